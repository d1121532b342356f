"""A template's parameter values, as CloudFormation takes them: the value given, else the
declared Default, refused before anything is created when it breaks a constraint the parameter
declares (AllowedValues, AllowedPattern, MinLength/MaxLength, MinValue/MaxValue, a Number or a
list type), with CloudFormation's message."""

from __future__ import annotations

import re
from typing import Any

from emulator.deploy.errors import DeployError

LIST_TYPES = ("CommaDelimitedList", "List<Number>")
NUMBER_TYPES = ("Number", "List<Number>")


def parameter_values(declared: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """Each parameter ``declared`` (the template's Parameters) with its value: the one ``given``,
    else its Default ('' with neither), as a string, as CloudFormation passes it on."""
    return {name: str(given.get(name, spec.get("Default", ""))) for name, spec in declared.items()}


def check_parameters(declared: dict[str, Any], given: dict[str, str]) -> None:
    """DeployError with CloudFormation's message when ``given`` names a parameter the template
    does not declare, leaves one without a Default unset, or a value (given, else the Default)
    breaks its parameter's constraints; a ConstraintDescription replaces the reason."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise DeployError(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    missing = sorted(n for n, spec in declared.items() if n not in given and "Default" not in spec)
    if missing:
        raise DeployError(f"Parameters: [{', '.join(missing)}] must have values")
    for name, value in parameter_values(declared, given).items():
        spec = declared[name]
        reason = _broken_constraint(name, spec, value)
        if reason is not None:
            description = spec.get("ConstraintDescription")
            if description:
                raise DeployError(f"Parameter {name} failed to satisfy constraint: {description}")
            raise DeployError(reason)


def _broken_constraint(name: str, spec: dict[str, Any], value: str) -> str | None:
    """The message of the first constraint ``value`` breaks, None when it keeps them all: a list
    type's constraints hold for each member, the lengths for the whole string."""
    kind = spec.get("Type", "String")
    members = [m.strip() for m in value.split(",")] if kind in LIST_TYPES else [value]
    allowed = spec.get("AllowedValues")
    pattern = spec.get("AllowedPattern")
    for member in members:
        if allowed is not None and member not in [str(a) for a in allowed]:
            return f"Parameter '{name}' must be one of AllowedValues"
        if pattern is not None and re.fullmatch(str(pattern), member) is None:
            return f"Parameter '{name}' must match pattern {pattern}"
        if kind in NUMBER_TYPES:
            reason = _broken_bound(name, spec, member)
            if reason is not None:
                return reason
    if "MinLength" in spec and len(value) < int(spec["MinLength"]):
        return f"Parameter '{name}' must contain at least {spec['MinLength']} characters"
    if "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
        return f"Parameter '{name}' must contain at most {spec['MaxLength']} characters"
    return None


def _broken_bound(name: str, spec: dict[str, Any], member: str) -> str | None:
    try:
        number = float(member)
    except ValueError:
        return f"Parameter '{name}' must be a number."
    if "MinValue" in spec and number < float(spec["MinValue"]):
        return f"Parameter '{name}' must be a number not less than {spec['MinValue']}"
    if "MaxValue" in spec and number > float(spec["MaxValue"]):
        return f"Parameter '{name}' must be a number not greater than {spec['MaxValue']}"
    return None
