"""A template's parameter values, as CloudFormation takes them: the value given, else the
declared Default."""

from __future__ import annotations

from typing import Any


def parameter_values(declared: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """Each parameter ``declared`` (the template's Parameters) with its value: the one ``given``,
    else its Default ('' with neither), as a string, as CloudFormation passes it on."""
    return {name: str(given.get(name, spec.get("Default", ""))) for name, spec in declared.items()}
