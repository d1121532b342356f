"""Where each function's code and layers are, as SAM CLI resolves them (the `sam build` output
when it is fresh, else the source next to the template) or as Lambda unpacks what `sam deploy`
uploaded (``artifact_code``)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"


@dataclass
class LocalCode:
    code_dir: Path
    layer_dirs: list[Path]


def is_local(uri: Any) -> bool:
    return isinstance(uri, str) and not uri.startswith("s3://")


def global_function_property(template: dict[str, Any], name: str) -> Any:
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
    source = (base_dir / uri).resolve() if is_local(uri) else None
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
        uri = props.get("CodeUri", global_function_property(template, "CodeUri"))
        source = (base_dir / uri).resolve() if is_local(uri) else None
        built = _build_dir(base_dir, logical_id, source)
        if built is not None:
            code_dir = built
        elif source is not None:
            code_dir = source
        else:
            continue
        layers = []
        for ref in [
            *(global_function_property(template, "Layers") or []),
            *(props.get("Layers") or []),
        ]:
            if isinstance(ref, dict) and isinstance(ref.get("Ref"), str):
                layer = _layer_dir(template, base_dir, ref["Ref"])
                if layer is not None:
                    layers.append(layer)
        result[logical_id] = LocalCode(code_dir, layers)
    return result


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
