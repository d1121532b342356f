"""SAM -> CloudFormation offline, with aws-sam-translator: local CodeUri/ContentUri rewritten to
s3:// placeholders in a local artifacts bucket first, as `sam package` would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform

from emulator.core.templates import parse_template
from emulator.deploy.errors import DeployError
from emulator.deploy.function_code import (
    SERVERLESS_FUNCTION,
    SERVERLESS_LAYER,
    global_function_property,
    is_local,
)

ARTIFACTS_BUCKET = "emulator-sam-artifacts"


def load_template(path: Path) -> dict[str, Any]:
    template = parse_template(path.read_text())
    if not isinstance(template, dict) or "Resources" not in template:
        raise DeployError(f"{path}: not a SAM/CloudFormation template")
    return template


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
            uri = props.get("CodeUri", global_function_property(packaged, "CodeUri"))
            if uri is None or is_local(uri):
                props["CodeUri"] = placeholder
        elif resource.get("Type") == SERVERLESS_LAYER and is_local(props.get("ContentUri")):
            props["ContentUri"] = placeholder
    globals_fn = packaged.get("Globals", {}).get("Function", {})
    if is_local(globals_fn.get("CodeUri")):
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
