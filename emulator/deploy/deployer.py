"""Deploy template.yaml onto the local moto server, the way `sam deploy` + CloudFormation would.

1. Read samconfig.toml (stack name, parameter overrides) and the SAM template; check each
   parameter value against its constraints and the template's Rules, as CloudFormation does.
2. Translate SAM -> CloudFormation offline (translate.py), the placeholders it names uploaded to
   a local artifacts bucket so moto's code validation passes.
3. create_stack through moto's CloudFormation API and wait for CREATE_COMPLETE.
4. Close the gaps moto's CloudFormation leaves (gaps.py, see docs/local-stack.md); a function's
   Layers, which moto drops, and its code are resolved from the SAM template the way SAM CLI
   does (function_code.py). In-process patches of moto itself are in services/moto_patches.py.

A stack `sam deploy` made through the CloudFormation API (services/cloudformation.py) is taken
over by ``adopt``: the same gaps closed, its functions' code and layers from the S3 artifacts
`sam deploy` uploaded.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from emulator.deploy.errors import DeployError
from emulator.deploy.function_code import artifact_code, local_code
from emulator.deploy.functions import deployed_function_specs
from emulator.deploy.gaps import Resolver, close_gaps
from emulator.deploy.parameters import check_parameters, parameter_values
from emulator.deploy.rules import check_rules, chosen, template_conditions
from emulator.deploy.samconfig import load_samconfig
from emulator.deploy.translate import ARTIFACTS_BUCKET, load_template, translate
from emulator.lambda_.workers import FunctionSpec

DUMMY_CREDENTIALS = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "aws_session_token": "testing",
}


@dataclass
class Deployment:
    stack_name: str
    stack_id: str
    region: str
    outputs: dict[str, str]
    resources: dict[str, tuple[str, str]]  # logical id -> (type, physical id)
    functions: list[FunctionSpec]
    template: dict[str, Any]  # the translated CloudFormation template
    conditions: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def physical_id(self, logical_id: str) -> str:
        return self.resources[logical_id][1]

    def chosen(self, value: Any) -> Any:
        """``value`` as CloudFormation deployed it (see ``rules.chosen``)."""
        return chosen(value, self.conditions)


def _client(service: str, endpoint_url: str, region: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint_url, region_name=region, **DUMMY_CREDENTIALS)


def _clients(endpoint_url: str, region: str) -> Callable[[str], Any]:
    """A service's client on the local stack at ``endpoint_url``, by name."""
    return lambda service: _client(service, endpoint_url, region)


def _placeholder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("EMULATOR.txt", "code runs from the local directory, not this archive\n")
    return buffer.getvalue()


def _upload_placeholders(s3: Any, cfn_template: dict[str, Any]) -> None:
    keys = set()
    for resource in cfn_template["Resources"].values():
        props = resource.get("Properties", {})
        for location in (props.get("Code"), props.get("Content")):
            if isinstance(location, dict) and location.get("S3Bucket") == ARTIFACTS_BUCKET:
                keys.add(location["S3Key"])
    if not keys:
        return
    s3.create_bucket(Bucket=ARTIFACTS_BUCKET)
    body = _placeholder_zip()
    for key in sorted(keys):
        s3.put_object(Bucket=ARTIFACTS_BUCKET, Key=key, Body=body)


def _wait_for_stack(cfn: Any, stack_name: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        status = stack["StackStatus"]
        if status == "CREATE_COMPLETE":
            return stack
        if not status.endswith("IN_PROGRESS") or time.monotonic() > deadline:
            events = cfn.describe_stack_events(StackName=stack_name)["StackEvents"]
            failed = [
                f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}"
                for e in events
                if e.get("ResourceStatus", "").endswith("FAILED")
            ]
            raise DeployError(f"stack {stack_name} ended in {status}: {'; '.join(failed)}")
        time.sleep(0.05)


def deploy(
    endpoint_url: str,
    template_path: Path,
    *,
    samconfig_path: Path | None = None,
    stack_name: str | None = None,
    parameter_overrides: dict[str, str] | None = None,
    region: str = "us-east-1",
) -> Deployment:
    """Deploy ``template_path`` to the moto server at ``endpoint_url``; return the live stack."""
    started = time.monotonic()
    template_path = Path(template_path).resolve()
    base_dir = template_path.parent
    config = load_samconfig(samconfig_path or base_dir / "samconfig.toml")
    stack_name = stack_name or config.stack_name or base_dir.name
    sam_template = load_template(template_path)
    overrides = {**config.parameter_overrides, **(parameter_overrides or {})}
    declared = sam_template.get("Parameters", {})
    check_parameters(declared, overrides)
    cfn_template = translate(sam_template, overrides, region)
    parameters = parameter_values(declared, overrides)
    check_rules(cfn_template, parameters)

    s3 = _client("s3", endpoint_url, region)
    cfn = _client("cloudformation", endpoint_url, region)
    lam = _client("lambda", endpoint_url, region)
    _upload_placeholders(s3, cfn_template)
    cfn.create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(cfn_template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in overrides.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    stack = _wait_for_stack(cfn, stack_name)
    resources = _stack_resources(cfn, stack_name)
    resolve = Resolver(_clients(endpoint_url, region), region, resources, parameters)

    close_gaps(s3, cfn_template, resources, resolve)

    code = local_code(sam_template, base_dir)
    functions = deployed_function_specs(lam, region, resources, code)
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}
    return Deployment(
        stack_name=stack_name,
        stack_id=stack["StackId"],
        region=region,
        outputs=outputs,
        resources=resources,
        functions=functions,
        template=cfn_template,
        conditions=template_conditions(cfn_template, parameters),
        seconds=time.monotonic() - started,
    )


def _stack_resources(cfn: Any, stack_name: str) -> dict[str, tuple[str, str]]:
    return {
        r["LogicalResourceId"]: (r["ResourceType"], r["PhysicalResourceId"])
        for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
    }


def adopt(endpoint_url: str, stack_name: str, *, region: str, artifacts_dir: Path) -> Deployment:
    """The stack a CloudFormation client (`sam deploy`) made on the local stack at
    ``endpoint_url``, its gaps closed as ``deploy`` closes them, its functions running the S3
    artifacts its template names (unzipped under ``artifacts_dir``/<stack>)."""
    started = time.monotonic()
    cfn = _client("cloudformation", endpoint_url, region)
    s3 = _client("s3", endpoint_url, region)
    lam = _client("lambda", endpoint_url, region)
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    processed = cfn.get_template(StackName=stack_name, TemplateStage="Processed")
    body = processed["TemplateBody"]  # botocore hands a JSON body over parsed
    cfn_template = json.loads(json.dumps(body)) if isinstance(body, dict) else json.loads(body)
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}
    resources = _stack_resources(cfn, stack_name)
    resolve = Resolver(_clients(endpoint_url, region), region, resources, parameters)
    close_gaps(s3, cfn_template, resources, resolve)
    into = artifacts_dir / stack_name
    into.mkdir(parents=True, exist_ok=True)
    code = artifact_code(s3, cfn_template, into)
    return Deployment(
        stack_name=stack_name,
        stack_id=stack["StackId"],
        region=region,
        outputs={o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])},
        resources=resources,
        functions=deployed_function_specs(lam, region, resources, code),
        template=cfn_template,
        conditions=template_conditions(cfn_template, parameters),
        seconds=time.monotonic() - started,
    )
