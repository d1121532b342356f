"""samconfig.toml as SAM CLI reads it: the stack name, the parameter overrides, the region."""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.deploy.errors import DeployError


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
