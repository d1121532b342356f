"""Deploy template.yaml onto the local moto server, the way `sam deploy` + CloudFormation would.

1. Read samconfig.toml (stack name, parameter overrides) and the SAM template.
2. Translate SAM -> CloudFormation offline with aws-sam-translator (local CodeUri/ContentUri are
   rewritten to s3:// placeholders first, as `sam package` would, and uploaded to a local
   artifacts bucket so moto's code validation passes).
3. create_stack through moto's CloudFormation API and wait for CREATE_COMPLETE.
4. Close the gaps moto's CloudFormation leaves (``close_gaps``, see docs/local-stack.md):
   - a bucket's NotificationConfiguration is ignored: applied here through the S3 API, with the
     targets resolved to real ARNs (S3 then sends its s3:TestEvent, as AWS does);
   - a function's Layers are dropped (Ref of a LayerVersion resolves to ''): layers are resolved
     from the SAM template (ContentUri dirs, or their `sam build` output);
   - function code is resolved the way SAM CLI does: .aws-sam/build/<LogicalId> when it exists,
     else CodeUri next to the template.
   In-process patches of moto itself are in moto_patches.py.

A stack `sam deploy` made through the CloudFormation API (services/cloudformation.py) is taken
over by ``adopt``: the same gaps closed, its functions' code and layers from the S3 artifacts
`sam deploy` uploaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform

from emulator.core.arns import parse_arn
from emulator.core.templates import parse_template
from emulator.core.values import parse_bool
from emulator.lambda_.workers import FunctionSpec

ARTIFACTS_BUCKET = "emulator-sam-artifacts"
DUMMY_CREDENTIALS = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "aws_session_token": "testing",
}
SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"


class DeployError(RuntimeError):
    pass


# --- configuration -------------------------------------------------------------------------------
@dataclass
class SamConfig:
    stack_name: str | None = None
    parameter_overrides: dict[str, str] = field(default_factory=dict)
    region: str | None = None


def parse_parameter_overrides(value: str | list[str] | None) -> dict[str, str]:
    """`Key=Value Key2="v 2"` (string) or ["Key=Value", ...] (list), as samconfig allows."""
    if not value:
        return {}
    items = shlex.split(value) if isinstance(value, str) else list(value)
    result = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise DeployError(f"parameter override without '=': {item!r}")
        result[key.strip()] = val
    return result


def load_samconfig(path: Path, env: str = "default") -> SamConfig:
    if not path.exists():
        return SamConfig()
    data = tomllib.loads(path.read_text()).get(env, {})
    merged: dict[str, Any] = {}
    # precedence as in SAM CLI: global < the command's own table
    for command in ("global", "deploy"):
        merged.update(data.get(command, {}).get("parameters", {}))
    return SamConfig(
        stack_name=merged.get("stack_name"),
        parameter_overrides=parse_parameter_overrides(merged.get("parameter_overrides")),
        region=merged.get("region"),
    )


def load_template(path: Path) -> dict[str, Any]:
    template = parse_template(path.read_text())
    if not isinstance(template, dict) or "Resources" not in template:
        raise DeployError(f"{path}: not a SAM/CloudFormation template")
    return template


# --- code and layers, as SAM CLI resolves them -------------------------------------------------
@dataclass
class LocalCode:
    code_dir: Path
    layer_dirs: list[Path]


def _is_local(uri: Any) -> bool:
    return isinstance(uri, str) and not uri.startswith("s3://")


def _global_function_property(template: dict[str, Any], name: str) -> Any:
    return template.get("Globals", {}).get("Function", {}).get(name)


def _newest_mtime(root: Path) -> float:
    newest = 0.0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            with contextlib.suppress(OSError):
                newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
    return newest


_STALE_WARNED: set[Path] = set()


def _build_dir(base_dir: Path, logical_id: str, source: Path | None) -> Path | None:
    """`sam build` output for ``logical_id`` when it exists and is not older than its source.

    SAM CLI always prefers the build; a build older than an edited source would run stale code
    here without a word, so the source wins then (with a warning on stderr)."""
    built = base_dir / ".aws-sam" / "build" / logical_id
    if not built.is_dir():
        return None
    if source is not None and source.is_dir() and _newest_mtime(source) > _newest_mtime(built):
        if built not in _STALE_WARNED:  # once per process (deploy and the IAM record both ask)
            _STALE_WARNED.add(built)
            print(
                f"warning: {built.relative_to(base_dir)} is older than"
                f" {source.relative_to(base_dir)}: running the source (run `sam build` to"
                " refresh the build)",
                file=sys.stderr,
            )
        return None
    return built


def _layer_dir(template: dict[str, Any], base_dir: Path, logical_id: str) -> Path | None:
    resource = template["Resources"].get(logical_id, {})
    if resource.get("Type") != SERVERLESS_LAYER:
        return None
    uri = resource.get("Properties", {}).get("ContentUri")
    source = (base_dir / uri).resolve() if _is_local(uri) else None
    built = _build_dir(base_dir, logical_id, source)
    if built is not None:
        return built / "python" if (built / "python").is_dir() else built
    if source is None:
        return None
    build_method = resource.get("Metadata", {}).get("BuildMethod")
    # With a BuildMethod, `sam build` copies ContentUri's root under python/ (/opt/python on
    # Lambda); without one the directory is used as zipped: its python/ is what is importable.
    if not build_method and (source / "python").is_dir():
        return source / "python"
    return source


def local_code(
    template: dict[str, Any], base_dir: Path, only: str | None = None
) -> dict[str, LocalCode]:
    """Code dir and layer dirs of every AWS::Serverless::Function with local code (``only``:
    of that one function)."""
    result = {}
    for logical_id, resource in template["Resources"].items():
        if resource.get("Type") != SERVERLESS_FUNCTION or only not in (None, logical_id):
            continue
        props = resource.get("Properties", {})
        uri = props.get("CodeUri", _global_function_property(template, "CodeUri"))
        source = (base_dir / uri).resolve() if _is_local(uri) else None
        built = _build_dir(base_dir, logical_id, source)
        if built is not None:
            code_dir = built
        elif source is not None:
            code_dir = source
        else:
            continue
        layers = []
        for ref in [
            *(_global_function_property(template, "Layers") or []),
            *(props.get("Layers") or []),
        ]:
            if isinstance(ref, dict) and isinstance(ref.get("Ref"), str):
                layer = _layer_dir(template, base_dir, ref["Ref"])
                if layer is not None:
                    layers.append(layer)
        result[logical_id] = LocalCode(code_dir, layers)
    return result


# --- translation ---------------------------------------------------------------------------------
class _BundledPolicies:
    """ManagedPolicyLoader stand-in: the translator checks its bundled map first; never IAM."""

    def load(self) -> dict[str, str]:
        return {}


def package(template: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``template`` with local CodeUri/ContentUri as s3:// placeholders (`sam package`)."""
    packaged = json.loads(json.dumps(template))
    for logical_id, resource in packaged["Resources"].items():
        props = resource.setdefault("Properties", {})
        placeholder = f"s3://{ARTIFACTS_BUCKET}/{logical_id}.zip"
        if resource.get("Type") == SERVERLESS_FUNCTION:
            if "InlineCode" in props or "ImageUri" in props:
                continue
            uri = props.get("CodeUri", _global_function_property(packaged, "CodeUri"))
            if uri is None or _is_local(uri):
                props["CodeUri"] = placeholder
        elif resource.get("Type") == SERVERLESS_LAYER and _is_local(props.get("ContentUri")):
            props["ContentUri"] = placeholder
    globals_fn = packaged.get("Globals", {}).get("Function", {})
    if _is_local(globals_fn.get("CodeUri")):
        del globals_fn["CodeUri"]
    return packaged


def translate(
    template: dict[str, Any], parameters: dict[str, str], region: str = "us-east-1"
) -> dict[str, Any]:
    """SAM -> CloudFormation, offline."""
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    try:
        return transform(package(template), dict(parameters), _BundledPolicies())  # type: ignore[arg-type]
    except InvalidDocumentException as exc:
        causes = "; ".join(str(c) for c in exc.causes)
        raise DeployError(f"SAM translation failed: {causes}") from exc


# --- template rules ----------------------------------------------------------------------------
def check_rules(template: dict[str, Any], parameters: dict[str, str]) -> None:
    """CloudFormation's template Rules: for each rule whose RuleCondition holds, every Assert
    must; DeployError naming the rule and its AssertDescription otherwise, before anything is
    created (moto ignores Rules)."""
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not _rule_value(rule["RuleCondition"], parameters):
            continue
        for assertion in rule.get("Assertions", []):
            if not _rule_value(assertion["Assert"], parameters):
                reason = assertion.get("AssertDescription", "an assertion failed")
                raise DeployError(f"template rule {name}: {reason}")


# The rule functions the local stack evaluates, over their evaluated arguments.
_RULE_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "Fn::Equals": lambda args: args[0] == args[1],
    "Fn::Not": lambda args: not args[0],
    "Fn::And": all,
    "Fn::Or": any,
    "Fn::Contains": lambda args: args[1] in args[0],
}


def _rule_value(
    value: Any,
    parameters: dict[str, str],
    condition: Callable[[str], bool] | None = None,
) -> Any:
    if not isinstance(value, dict):
        return value
    ((function, argument),) = value.items()
    if function == "Ref":
        if argument not in parameters:
            raise DeployError(f"template rules: Ref to {argument!r}, not a parameter")
        return parameters[argument]
    if function == "Condition" and condition is not None:
        return condition(argument)
    if function not in _RULE_FUNCTIONS:
        raise DeployError(f"template rules: {function} is not evaluated by the local stack")
    return _RULE_FUNCTIONS[function](
        [_rule_value(item, parameters, condition) for item in argument]
    )


def template_conditions(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, bool]:
    """The template's Conditions, evaluated as CloudFormation does (moto evaluates them too, but
    keeps the result to itself)."""
    definitions = template.get("Conditions", {})
    values: dict[str, bool] = {}

    def condition(name: str) -> bool:
        if name not in values:
            values[name] = bool(_rule_value(definitions[name], parameters, condition))
        return values[name]

    for name in definitions:
        condition(name)
    return values


# --- deployment ---------------------------------------------------------------------------------
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
        """``value`` as CloudFormation deployed it (see ``chosen``)."""
        return chosen(value, self.conditions)


_NO_VALUE = object()


def chosen(value: Any, conditions: dict[str, bool]) -> Any:
    """A template value with each Fn::If replaced by the branch its condition picked, and
    AWS::NoValue left out, as CloudFormation does."""
    if isinstance(value, list):
        return [v for v in (chosen(item, conditions) for item in value) if v is not _NO_VALUE]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::If"}:
        name, when_true, when_false = value["Fn::If"]
        return chosen(when_true if conditions[name] else when_false, conditions)
    if value == {"Ref": "AWS::NoValue"}:
        return _NO_VALUE
    items = ((key, chosen(item, conditions)) for key, item in value.items())
    return {key: item for key, item in items if item is not _NO_VALUE}


def _client(service: str, endpoint_url: str, region: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint_url, region_name=region, **DUMMY_CREDENTIALS)


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


class _Resolver:
    """The few intrinsics a bucket notification or an output needs, against the live stack."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        resources: dict[str, tuple[str, str]],
        parameters: dict[str, str],
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.resources = resources
        self.parameters = parameters

    def __call__(self, value: Any) -> Any:  # noqa: PLR0911 - one return per intrinsic
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            name = value["Ref"]
            if name in self.parameters:
                return self.parameters[name]
            if name in self.resources:
                return self.resources[name][1]
            if name == "AWS::Region":
                return self.region
            raise DeployError(f"cannot resolve Ref {name}")
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            logical_id, attribute = target.split(".", 1) if isinstance(target, str) else target
            return self.get_att(logical_id, attribute)
        return {k: self(v) for k, v in value.items()}

    def get_att(self, logical_id: str, attribute: str) -> str:
        rtype, physical = self.resources[logical_id]
        if rtype == "AWS::SQS::Queue":
            sqs = _client("sqs", self.endpoint_url, self.region)
            if attribute == "Arn":
                attrs = sqs.get_queue_attributes(QueueUrl=physical, AttributeNames=["QueueArn"])
                return attrs["Attributes"]["QueueArn"]
            if attribute == "QueueUrl":
                return physical
            if attribute == "QueueName":
                return physical.rsplit("/", 1)[-1]
        if rtype == "AWS::Lambda::Function" and attribute == "Arn":
            lam = _client("lambda", self.endpoint_url, self.region)
            return lam.get_function_configuration(FunctionName=physical)["FunctionArn"]
        if rtype == "AWS::SNS::Topic" and attribute == "TopicArn":
            return physical
        raise DeployError(f"cannot resolve Fn::GetAtt {logical_id}.{attribute} ({rtype})")


def _s3_filter(cfn_filter: dict[str, Any] | None) -> dict[str, Any] | None:
    rules = (cfn_filter or {}).get("S3Key", {}).get("Rules")
    if not rules:
        return None
    return {"Key": {"FilterRules": [{"Name": r["Name"], "Value": r["Value"]} for r in rules]}}


def bucket_notification(cfn_config: dict[str, Any], resolve: _Resolver) -> dict[str, Any]:
    """CloudFormation NotificationConfiguration -> S3 PutBucketNotificationConfiguration shape."""
    config = resolve(cfn_config)
    result: dict[str, Any] = {}
    kinds = (
        ("QueueConfigurations", "Queue", "QueueArn"),
        ("TopicConfigurations", "Topic", "TopicArn"),
        ("LambdaConfigurations", "Function", "LambdaFunctionArn"),
    )
    for section, target, api_target in kinds:
        entries = []
        for entry in config.get(section, []):
            item = {api_target: entry[target], "Events": [entry["Event"]]}
            s3_filter = _s3_filter(entry.get("Filter"))
            if s3_filter:
                item["Filter"] = s3_filter
            entries.append(item)
        if entries:
            result[section] = entries
    if parse_bool(config.get("EventBridgeConfiguration", {}).get("EventBridgeEnabled")):
        result["EventBridgeConfiguration"] = {}
    return result


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


def close_gaps(
    s3: Any, cfn_template: dict[str, Any], resources: dict[str, tuple[str, str]], resolve: _Resolver
) -> None:
    """What moto's CloudFormation leaves undone, done through the services' APIs."""
    # Gap: moto's CloudFormation creates an AWS::S3::Bucket with BucketEncryption and Tags only;
    # VersioningConfiguration, PublicAccessBlockConfiguration and NotificationConfiguration
    # are applied here through the S3 API (notifications last: S3 sends its s3:TestEvent then).
    for logical_id, resource in cfn_template["Resources"].items():
        if resource.get("Type") != "AWS::S3::Bucket":
            continue
        props = resource.get("Properties", {})
        props = {
            k: resolve(props[k])
            for k in ("VersioningConfiguration", "PublicAccessBlockConfiguration")
            if k in props
        }
        bucket = resources[logical_id][1]
        if props.get("VersioningConfiguration", {}).get("Status"):
            s3.put_bucket_versioning(
                Bucket=bucket,
                VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]},
            )
        if props.get("PublicAccessBlockConfiguration"):
            s3.put_public_access_block(
                Bucket=bucket,
                PublicAccessBlockConfiguration={
                    k: parse_bool(v) for k, v in props["PublicAccessBlockConfiguration"].items()
                },
            )
        notification = resource.get("Properties", {}).get("NotificationConfiguration")
        if notification:
            s3.put_bucket_notification_configuration(
                Bucket=resources[logical_id][1],
                NotificationConfiguration=bucket_notification(notification, resolve),
            )


def _function_specs(
    endpoint_url: str,
    region: str,
    resources: dict[str, tuple[str, str]],
    code: dict[str, LocalCode],
) -> list[FunctionSpec]:
    lam = _client("lambda", endpoint_url, region)
    specs = []
    for logical_id, (rtype, physical) in resources.items():
        if rtype != "AWS::Lambda::Function" or logical_id not in code:
            continue
        config = lam.get_function_configuration(FunctionName=physical)
        arn = config["FunctionArn"]
        specs.append(
            FunctionSpec(
                logical_id=logical_id,
                function_name=config["FunctionName"],
                handler=config["Handler"],
                code_dir=code[logical_id].code_dir,
                layer_dirs=code[logical_id].layer_dirs,
                environment={
                    k: _env_value(v)
                    for k, v in config.get("Environment", {}).get("Variables", {}).items()
                },
                timeout=float(config.get("Timeout", 3)),
                memory_size=int(config.get("MemorySize", 128)),
                region=region,
                account_id=parse_arn(arn).account,
                runtime=config.get("Runtime") or "python3.13",
            )
        )
    return specs


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
    unknown = set(overrides) - set(declared)
    if unknown:
        raise DeployError(f"parameter overrides not declared by the template: {sorted(unknown)}")
    cfn_template = translate(sam_template, overrides, region)
    parameters = {
        name: str(overrides.get(name, spec.get("Default", ""))) for name, spec in declared.items()
    }
    check_rules(cfn_template, parameters)

    s3 = _client("s3", endpoint_url, region)
    cfn = _client("cloudformation", endpoint_url, region)
    _upload_placeholders(s3, cfn_template)
    cfn.create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(cfn_template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in overrides.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    stack = _wait_for_stack(cfn, stack_name)
    resources = _stack_resources(cfn, stack_name)
    resolve = _Resolver(endpoint_url, region, resources, parameters)

    close_gaps(s3, cfn_template, resources, resolve)

    code = local_code(sam_template, base_dir)
    functions = _function_specs(endpoint_url, region, resources, code)
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


def _unzipped(s3: Any, location: dict[str, Any], into: Path) -> Path:
    """The artifact at ``location`` ({S3Bucket, S3Key[, S3ObjectVersion]}) unzipped in a
    directory of its own under ``into`` (kept: an unchanged artifact is not unzipped again)."""
    key = location["S3Key"]
    version = location.get("S3ObjectVersion")
    name = "-".join(filter(None, (location["S3Bucket"], key.replace("/", "_"), version)))
    target = into / name
    if not target.is_dir():
        request = {"Bucket": location["S3Bucket"], "Key": key}
        if version:
            request["VersionId"] = version
        body = s3.get_object(**request)["Body"].read()
        partial = into / f".{name}.partial"
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            archive.extractall(partial)
        partial.rename(target)
    return target


def artifact_code(s3: Any, cfn_template: dict[str, Any], into: Path) -> dict[str, LocalCode]:
    """Code and layers of each AWS::Lambda::Function from the S3 artifacts its processed
    template names (what `sam deploy` uploaded), unzipped under ``into``, as Lambda unpacks them
    (a layer's python/ is what /opt/python holds)."""
    resources = cfn_template["Resources"]
    result = {}
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        code = props.get("Code", {})
        if resource.get("Type") != "AWS::Lambda::Function" or "S3Key" not in code:
            continue
        layers = []
        for ref in props.get("Layers") or []:
            layer = resources.get(ref.get("Ref", "")) if isinstance(ref, dict) else None
            if layer is None or layer.get("Type") != "AWS::Lambda::LayerVersion":
                continue
            unpacked = _unzipped(s3, layer["Properties"]["Content"], into)
            layers.append(unpacked / "python" if (unpacked / "python").is_dir() else unpacked)
        result[logical_id] = LocalCode(_unzipped(s3, code, into), layers)
    return result


def adopt(endpoint_url: str, stack_name: str, *, region: str, artifacts_dir: Path) -> Deployment:
    """The stack a CloudFormation client (`sam deploy`) made on the local stack at
    ``endpoint_url``, its gaps closed as ``deploy`` closes them, its functions running the S3
    artifacts its template names (unzipped under ``artifacts_dir``/<stack>)."""
    started = time.monotonic()
    cfn = _client("cloudformation", endpoint_url, region)
    s3 = _client("s3", endpoint_url, region)
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    processed = cfn.get_template(StackName=stack_name, TemplateStage="Processed")
    body = processed["TemplateBody"]  # botocore hands a JSON body over parsed
    cfn_template = json.loads(json.dumps(body)) if isinstance(body, dict) else json.loads(body)
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}
    resources = _stack_resources(cfn, stack_name)
    close_gaps(s3, cfn_template, resources, _Resolver(endpoint_url, region, resources, parameters))
    into = artifacts_dir / stack_name
    into.mkdir(parents=True, exist_ok=True)
    code = artifact_code(s3, cfn_template, into)
    return Deployment(
        stack_name=stack_name,
        stack_id=stack["StackId"],
        region=region,
        outputs={o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])},
        resources=resources,
        functions=_function_specs(endpoint_url, region, resources, code),
        template=cfn_template,
        conditions=template_conditions(cfn_template, parameters),
        seconds=time.monotonic() - started,
    )


def function_specs_offline(
    template_path: Path,
    *,
    samconfig_path: Path | None = None,
    parameter_overrides: dict[str, str] | None = None,
    env_vars: dict[str, Any] | None = None,
    region: str = "us-east-1",
    only: str | None = None,
) -> dict[str, FunctionSpec]:
    """Functions of a template without deploying it (`invoke`): like `sam local invoke`,
    environment values that are not plain strings (Ref/GetAtt of resources) come out empty
    unless ``env_vars`` ({"LogicalId": {...}} or {"Parameters": {...}}) provides them. ``only``:
    that function alone (its build's freshness is the only one checked)."""
    template_path = Path(template_path).resolve()
    base_dir = template_path.parent
    config = load_samconfig(samconfig_path or base_dir / "samconfig.toml")
    sam_template = load_template(template_path)
    overrides = {**config.parameter_overrides, **(parameter_overrides or {})}
    parameters = {
        name: str(overrides.get(name, spec.get("Default", "")))
        for name, spec in sam_template.get("Parameters", {}).items()
    }
    cfn_template = translate(sam_template, overrides, region)
    code = local_code(sam_template, base_dir, only)
    env_vars = env_vars or {}
    specs = {}
    for logical_id, local in code.items():
        props = cfn_template["Resources"][logical_id]["Properties"]
        environment = {}
        for name, value in props.get("Environment", {}).get("Variables", {}).items():
            environment[name] = _offline_value(value, parameters, region)
        environment.update(
            {k: str(v) for k, v in env_vars.get("Parameters", {}).items() if k in environment}
        )
        environment.update({k: str(v) for k, v in env_vars.get(logical_id, {}).items()})
        name = props.get("FunctionName")
        specs[logical_id] = FunctionSpec(
            logical_id=logical_id,
            function_name=name if isinstance(name, str) else logical_id,
            handler=props.get("Handler", "app.lambda_handler"),
            code_dir=local.code_dir,
            layer_dirs=local.layer_dirs,
            environment=environment,
            timeout=float(_offline_value(props.get("Timeout", 3), parameters, region) or 3),
            memory_size=int(
                _offline_value(props.get("MemorySize", 128), parameters, region) or 128
            ),
            region=region,
            runtime=props.get("Runtime", "python3.13"),
        )
    return specs


def _env_value(value: Any) -> str:
    """CloudFormation passes every environment value to Lambda as a string."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _offline_value(value: Any, parameters: dict[str, str], region: str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        if value["Ref"] in parameters:
            return parameters[value["Ref"]]
        if value["Ref"] == "AWS::Region":
            return region
    return ""
