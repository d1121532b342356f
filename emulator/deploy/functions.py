"""The settings each function's worker runs with (``FunctionSpec``): from the deployed stack's
Lambda configuration, or from the template alone, without deploying it (`invoke`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.core.arns import parse_arn
from emulator.deploy.function_code import LocalCode, local_code
from emulator.deploy.parameters import parameter_values
from emulator.deploy.samconfig import load_samconfig
from emulator.deploy.translate import load_template, translate
from emulator.lambda_.workers import FunctionSpec


def deployed_function_specs(
    lam: Any,
    region: str,
    resources: dict[str, tuple[str, str]],
    code: dict[str, LocalCode],
) -> list[FunctionSpec]:
    """Each deployed function with code in ``code``, as Lambda (``lam``) holds its settings."""
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
    parameters = parameter_values(sam_template.get("Parameters", {}), overrides)
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
