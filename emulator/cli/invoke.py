"""`python -m emulator invoke`: run one function once (a docker-free `sam local invoke`), with the
environment of the running local stack's function when AWS_ENDPOINT_URL points at one."""

# ruff: noqa: PLC0415 - imports are lazy: the command line loads only what its command runs

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

IMPORT_ERROR = "Runtime.ImportModuleError"


def _region() -> str:
    return os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1"


class InputError(Exception):
    """The event or the env-vars file cannot be read: one line says which and why."""


def _inputs(args: argparse.Namespace) -> tuple[Any, dict | None]:
    """The event (-e FILE, - for stdin, none: {}) and the env-vars (-n FILE), as JSON."""
    if args.event is None:
        # sam local invoke's --no-event, said: a handler given {} fails in ways that mislead
        print(
            "note: no event given (-e FILE, or -e - for stdin): invoking with {}", file=sys.stderr
        )
        raw = "{}"
    elif args.event == "-":
        raw = sys.stdin.read()
    else:
        try:
            raw = Path(args.event).read_text()
        except OSError as exc:
            raise InputError(f"cannot read the event file {args.event}: {exc.strerror}") from None
    try:
        event = json.loads(raw or "{}")
    except ValueError as exc:
        raise InputError(f"event is not JSON: {exc}") from None
    try:
        env_vars = json.loads(Path(args.env_vars).read_text()) if args.env_vars else None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the env-vars file {args.env_vars}: {exc}") from None
    return event, env_vars


def run(args: argparse.Namespace) -> int:
    from emulator.deploy.errors import DeployError
    from emulator.deploy.function_code import SERVERLESS_FUNCTION
    from emulator.deploy.functions import function_specs_offline
    from emulator.deploy.translate import load_template
    from emulator.lambda_.workers import Runtime

    template = Path(args.template).resolve()
    try:
        event, env_vars = _inputs(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        specs = function_specs_offline(
            template,
            samconfig_path=Path(args.config_file) if args.config_file else None,
            env_vars=env_vars,
            region=_region(),
            only=args.logical_id,
        )
    except (DeployError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spec = specs.get(args.logical_id)
    if spec is None:
        functions = [
            logical_id
            for logical_id, resource in load_template(template)["Resources"].items()
            if resource.get("Type") == SERVERLESS_FUNCTION
        ]
        print(
            f"error: no function {args.logical_id!r} in {template} (have: {', '.join(functions)})",
            file=sys.stderr,
        )
        return 2
    refusal = _environment_from_running_stack(spec, template, args, env_vars)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    # A local endpoint gets dummy credentials (and, served over TLS, the authority the caller
    # trusts); otherwise the caller's AWS_* settings pass through.
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
    authority = os.environ.get("AWS_CA_BUNDLE")
    with Runtime(
        [spec],
        endpoint_url=endpoint,
        ca_bundle=Path(authority) if authority else None,
        log_dir=None,
        echo=True,
        echo_prefix=False,
    ) as runtime:
        result = runtime.invoke(spec.logical_id, event)
    unbuilt = template.parent / ".aws-sam" / "build" / spec.logical_id
    if not result.ok and result.error["errorType"] == IMPORT_ERROR and not unbuilt.is_dir():
        # The source runs without its layer's requirements: only `sam build` installs them.
        print(
            f"error: {spec.logical_id} cannot import its code ({result.error['errorMessage']}): "
            f"there is no build ({unbuilt.relative_to(template.parent)}); run `make build`",
            file=sys.stderr,
        )
        return 2
    document = result.payload if result.ok else result.error
    print(json.dumps(document))
    return 0 if result.ok else 1


def _environment_from_running_stack(
    spec: Any, template: Path, args: argparse.Namespace, env_vars: dict[str, Any] | None
) -> str | None:
    """With AWS_ENDPOINT_URL pointing at a running local stack, take the function's environment
    (real resource names) from the deployed function, as a deployed Lambda would see it. Why
    that cannot be done (no stack there, or not this function), else None: the template's empty
    names would only fail later, in an AWS call."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return None
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError, EndpointConnectionError

    from emulator.deploy.deployer import DUMMY_CREDENTIALS
    from emulator.deploy.samconfig import load_samconfig

    config = load_samconfig(
        Path(args.config_file) if args.config_file else template.parent / "samconfig.toml"
    )
    stack_name = config.stack_name or template.parent.name
    quick = Config(connect_timeout=1, read_timeout=5, retries={"max_attempts": 1})
    credentials = {} if os.environ.get("AWS_ACCESS_KEY_ID") else DUMMY_CREDENTIALS
    try:
        cfn = boto3.client("cloudformation", region_name=spec.region, config=quick, **credentials)
        # describe_stack_resources: moto's describe_stack_resource trips over skipped types
        resources = cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
        physical = [
            r["PhysicalResourceId"]
            for r in resources
            if r.get("LogicalResourceId") == spec.logical_id
        ]
        if not physical:
            return f"stack {stack_name!r} at {endpoint} has no {spec.logical_id}"
        lam = boto3.client("lambda", region_name=spec.region, config=quick, **credentials)
        deployed = lam.get_function_configuration(FunctionName=physical[0])
    except EndpointConnectionError:
        return (
            f"no stack at {endpoint}: start one with `make up` (in another shell), or unset "
            "AWS_ENDPOINT_URL to run with the template's values"
        )
    except ClientError as error:
        return f"no stack {stack_name!r} at {endpoint}: {error}"
    spec.function_name = deployed["FunctionName"]
    spec.environment.update(deployed.get("Environment", {}).get("Variables", {}))
    overrides = env_vars or {}
    spec.environment.update(
        {k: str(v) for k, v in overrides.get("Parameters", {}).items() if k in spec.environment}
    )
    spec.environment.update({k: str(v) for k, v in overrides.get(spec.logical_id, {}).items()})
    return None
