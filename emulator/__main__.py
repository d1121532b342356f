"""python -m emulator {up,invoke,filter-test,iam-report}: the Docker-free local stack.

See docs/local-stack.md. Subcommands import what they need when they run (`filter-test` stays
fast: it never imports moto or boto3).
"""

# ruff: noqa: PLC0415 - imports are lazy on purpose (see above)

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.core.faults import Flag, Switch

DEFAULT_TEMPLATE = "template.yaml"
PROCESS_START = time.monotonic()  # the `ready` line's time counts imports too


def _region() -> str:
    return os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1"


def _default_port() -> int:
    return int(os.environ.get("EMULATOR_PORT", "4566"))


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return number


def _parameter_overrides(text: str) -> list[tuple[str, str]]:
    """One `--parameter-overrides` argument, as SAM CLI reads it: space-separated (shell-quoted)
    `Key=Value` or `ParameterKey=Key,ParameterValue=Value` entries."""
    import shlex

    try:
        entries = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    pairs = []
    for entry in entries:
        if entry.startswith("ParameterKey="):
            key_part, sep, value_part = entry.partition(",")
            key = key_part.removeprefix("ParameterKey=")
            if not sep or not value_part.startswith("ParameterValue="):
                raise argparse.ArgumentTypeError(
                    f"{entry!r}: expected ParameterKey=Key,ParameterValue=Value"
                )
            value = value_part.removeprefix("ParameterValue=")
        else:
            key, sep, value = entry.partition("=")
            if not sep:
                raise argparse.ArgumentTypeError(f"{entry!r}: expected Key=Value")
        if not key:
            raise argparse.ArgumentTypeError(f"{entry!r}: no parameter name")
        pairs.append((key, value))
    return pairs


def _fault_flags(up: argparse.ArgumentParser) -> None:
    """The `up` flag of every fault switch that has one (emulator/core/faults.py): its value is the
    switch's start-up value, as JSON; not given, the switch keeps its default."""
    from emulator.core.faults import SWITCHES

    for name, switch in SWITCHES.items():
        flag = switch.flag
        if flag is None:
            continue
        up.add_argument(
            flag.name,
            dest=name,
            type=_flag_value(name, switch, flag),
            action="append" if flag.repeatable else "store",
            default=None,
            metavar=flag.metavar,
            help=flag.help,
        )


def _flag_value(name: str, switch: Switch, flag: Flag) -> Callable[[str], Any]:
    """argparse ``type`` of a switch's flag: its JSON value (one entry when repeatable), checked
    now unless it is an entry (its list is checked as a whole, by ``_faults``)."""

    def value(text: str) -> Any:
        try:
            converted = flag.text(text)
            if not flag.repeatable:
                switch.parse(name, converted)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc
        return converted

    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the local stack in the foreground")
    up.add_argument("--port", type=int, default=None, help="default: EMULATOR_PORT or 4566")
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; 0.0.0.0 lets containers (`sam local invoke`) reach it",
    )
    up.add_argument("--template", default=DEFAULT_TEMPLATE)
    up.add_argument("--config-file", default=None, help="samconfig.toml (default: beside it)")
    up.add_argument(
        "--parameter-overrides",
        nargs="+",
        action="extend",
        default=None,
        type=_parameter_overrides,
        metavar="Key=Value",
        help="template parameters over samconfig's parameter_overrides, as SAM CLI takes them: "
        "Key=Value or ParameterKey=Key,ParameterValue=Value, several per argument or several "
        "arguments (e.g. FanOut=pipe)",
    )
    _fault_flags(up)
    up.add_argument(
        "--account-concurrency",
        type=_positive,
        default=None,
        help="invocations running at once over all functions (default: twice the cores, at "
        "least 4); more wait for a slot",
    )
    up.add_argument(
        "--log-dir",
        default=None,
        help="where each function's output goes, as <LogicalId>.log (default: .emulator/logs "
        "beside the template, shared by every stack started from it)",
    )
    up.add_argument("--verbose", action="store_true", help="echo function logs with a prefix")
    up.add_argument(
        "--enforce-iam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse a function's AWS call that its execution role does not allow, with the "
        "service's AccessDenied (default); --no-enforce-iam only records it",
    )

    invoke = sub.add_parser("invoke", help="run one function once (docker-free sam local invoke)")
    invoke.add_argument("logical_id")
    invoke.add_argument("-e", "--event", default=None, help="event JSON file ('-': stdin)")
    invoke.add_argument("-n", "--env-vars", default=None, help="SAM CLI env-vars JSON file")
    invoke.add_argument("-t", "--template", default=DEFAULT_TEMPLATE)
    invoke.add_argument("--config-file", default=None)

    report = sub.add_parser(
        "iam-report", help="per function: grants no call used, calls denied (exit 1 if any)"
    )
    report.add_argument("-t", "--template", default=DEFAULT_TEMPLATE)

    sub.add_parser(
        "filter-test", help="check a Lambda filter pattern against an event", add_help=False
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # filter-test takes its own arguments: dispatch before parsing (and import lazily).
    if argv and argv[0] == "filter-test":
        from emulator.cli import filter_test

        return int(filter_test.main(argv[1:]) or 0)
    args = _parser().parse_args(argv)
    if args.command == "up":
        return up(args)
    if args.command == "iam-report":
        from emulator.cli import iam_report

        return iam_report.main(Path(args.template))
    return invoke(args)


# --- up ------------------------------------------------------------------------------------------
def _faults(args: argparse.Namespace) -> Any:
    """The fault switches of the `up` flags (ValueError naming the switch when one is invalid)."""
    from emulator.core.faults import SWITCHES, Faults

    flags = {name: getattr(args, name, None) for name in SWITCHES}
    return Faults.from_json({name: value for name, value in flags.items() if value is not None})


def up(args: argparse.Namespace) -> int:
    from emulator.iam import access
    from emulator.lambda_.workers import DEFAULT_ACCOUNT_CONCURRENCY, Runtime
    from emulator.server import EmulatorServer
    from emulator.stack import DeployError, deploy, load_samconfig

    started = PROCESS_START
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    template = Path(args.template).resolve()
    if not template.exists():
        print(f"error: {template} not found", file=sys.stderr)
        return 2
    config_path = Path(args.config_file) if args.config_file else template.parent / "samconfig.toml"
    region = (
        os.environ.get("AWS_DEFAULT_REGION")
        or os.environ.get("AWS_REGION")
        or load_samconfig(config_path).region
        or "us-east-1"
    )
    port = args.port if args.port is not None else _default_port()
    try:
        faults = _faults(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = None
    # The runtime serves Lambda Invoke from the start (functions register once deployed), so an
    # early Invoke never falls through to moto's Docker path.
    runtime = Runtime(
        endpoint_url=f"http://127.0.0.1:{port}",
        account_concurrency=args.account_concurrency or DEFAULT_ACCOUNT_CONCURRENCY,
        faults=faults,
        log_dir=Path(args.log_dir) if args.log_dir else template.parent / ".emulator" / "logs",
        echo=args.verbose,
    )
    server = EmulatorServer(port, host=args.host, faults=faults, runtime=runtime, region=region)
    try:
        server.start()
        try:
            deployment = deploy(
                server.endpoint_url,
                template,
                samconfig_path=Path(args.config_file) if args.config_file else None,
                parameter_overrides=dict(
                    pair for pairs in args.parameter_overrides or () for pair in pairs
                ),
                region=region,
            )
        except DeployError as exc:
            print(f"error: deploy failed: {exc}", file=sys.stderr)
            return 1
        server.stack_name = deployment.stack_name
        server.access = access.Access(
            access.deployed_roles(deployment),
            enforce=args.enforce_iam,
            region=region,
            fingerprint=access.fingerprint(template),
        )
        for spec in deployment.functions:
            runtime.register(spec)
        threading.Thread(target=runtime.warm, daemon=True).start()
        engine = server.engine = _start_engine(server.endpoint_url, region, runtime, faults)
        if not _wait_enabled(engine, stop):
            return 0 if stop.is_set() else 1
        server.ready = True
        names = ", ".join(f.logical_id for f in deployment.functions)
        print(
            f"ready {server.endpoint_url} stack={deployment.stack_name} "
            f"functions={len(deployment.functions)} ({names}) "
            f"in {time.monotonic() - started:.1f}s",
            flush=True,
        )
        for key, value in sorted(deployment.outputs.items()):
            print(f"  {key} = {value}", flush=True)
        # A timed wait: a signal delivered to another thread only runs its Python handler once
        # the main thread executes bytecode again, which an untimed wait would never do.
        while not stop.wait(0.2):
            pass
        print("stopping", file=sys.stderr, flush=True)
        return 0
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if engine is not None:
            engine.stop()
        runtime.close()
        server.stop()
        if server.access is not None:  # the run's record, for `iam-report`
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time()))
            server.access.write(template.parent / access.RECORD_DIR, f"{stamp}-{os.getpid()}.json")


def _wait_enabled(engine: Any, stop: threading.Event, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not engine.all_enabled():
        if stop.wait(0.05):
            return False
        if time.monotonic() > deadline:
            print(f"error: event source mappings not enabled in {timeout:.0f} s", file=sys.stderr)
            return False
    return True


def _start_engine(endpoint_url: str, region: str, runtime: Any, faults: Any) -> Any:
    from emulator.delivery.engine import EventSourceMappingEngine

    engine = EventSourceMappingEngine(runtime, faults, region=region, endpoint_url=endpoint_url)
    engine.start()
    return engine


# --- invoke --------------------------------------------------------------------------------------
def invoke(args: argparse.Namespace) -> int:
    from emulator.lambda_.workers import Runtime
    from emulator.stack import (
        SERVERLESS_FUNCTION,
        DeployError,
        function_specs_offline,
        load_template,
    )

    template = Path(args.template).resolve()
    if args.event in (None, "-"):
        raw = sys.stdin.read() if args.event == "-" else "{}"
    else:
        raw = Path(args.event).read_text()
    try:
        event = json.loads(raw or "{}")
    except ValueError as exc:
        print(f"error: event is not JSON: {exc}", file=sys.stderr)
        return 2
    env_vars = json.loads(Path(args.env_vars).read_text()) if args.env_vars else None
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
    _environment_from_running_stack(spec, template, args, env_vars)
    # A local endpoint gets dummy credentials; otherwise the caller's AWS_* settings pass through.
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
    with Runtime(
        [spec], endpoint_url=endpoint, log_dir=None, echo=True, echo_prefix=False
    ) as runtime:
        result = runtime.invoke(spec.logical_id, event)
    document = result.payload if result.ok else result.error
    print(json.dumps(document))
    return 0 if result.ok else 1


def _environment_from_running_stack(
    spec: Any, template: Path, args: argparse.Namespace, env_vars: dict[str, Any] | None
) -> None:
    """With AWS_ENDPOINT_URL pointing at a running local stack, take the function's environment
    (real resource names) from the deployed function, as a deployed Lambda would see it."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return
    import boto3
    from botocore.config import Config

    from emulator.stack import DUMMY_CREDENTIALS, load_samconfig

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
        physical = next(
            r["PhysicalResourceId"]
            for r in resources
            if r.get("LogicalResourceId") == spec.logical_id
        )
        lam = boto3.client("lambda", region_name=spec.region, config=quick, **credentials)
        deployed = lam.get_function_configuration(FunctionName=physical)
    except Exception:
        return  # no such stack there: keep the template's values
    spec.function_name = deployed["FunctionName"]
    spec.environment.update(deployed.get("Environment", {}).get("Variables", {}))
    overrides = env_vars or {}
    spec.environment.update(
        {k: str(v) for k, v in overrides.get("Parameters", {}).items() if k in spec.environment}
    )
    spec.environment.update({k: str(v) for k, v in overrides.get(spec.logical_id, {}).items()})


if __name__ == "__main__":
    sys.exit(main())
