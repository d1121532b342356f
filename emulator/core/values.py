"""Settings as CloudFormation and the AWS APIs hand them over: booleans and numbers may arrive as
strings ("true", "10"), parsed here once."""

from __future__ import annotations


def parse_bool(value: object) -> bool:
    """True for ``True`` or a string "true" in any case; False for anything else."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def parse_int(value: object, default: int) -> int:
    """An integer setting: ``default`` when it is unset (None or ""); ValueError when it is not
    an integer."""
    if value is None or value == "":
        return default
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValueError(f"not an integer: {value!r}") from None
