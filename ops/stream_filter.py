"""A stream reader's FilterCriteria (an event source mapping's or a pipe's), applied to DynamoDB
stream records as Lambda applies them, so that `ops stream replay` delivers only what the reader
would have been given.

Lambda's filter language is EventBridge's. This is the part of it the stack's stream filters use
(template.yaml), with Lambda's semantics: a pattern is an object shaped like the record (fields
AND-ed, nested objects go down into it); each leaf is a list of match values, OR-ed: a string, a
boolean or null matches an equal value of the same JSON type (the typed DynamoDB value:
``{"BOOL": [true]}`` never matches ``{"S": "true"}``), ``{"exists": true|false}`` whether the
field is there as a leaf (an object is no leaf), and ``{"anything-but": [strings]}`` any present
leaf other than those strings. A record array matches when any element does; a pattern key the
record lacks fails unless its leaf says ``exists: false``. The filters OR-ed; none: every record.

A pattern with anything else (numbers, prefix, numeric, $or, ...) is refused (UnsupportedFilter)
rather than guessed at: the replay reports the batch and keeps it. tests/unit/ops hold this
matcher to the local stack's full one on the template's filters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class UnsupportedFilter(ValueError):
    """A filter pattern outside the part of the language this module applies."""


@dataclass(frozen=True)
class StreamFilter:
    patterns: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, criteria: dict[str, Any] | None) -> StreamFilter:
        """From FilterCriteria as ListEventSourceMappings or DescribePipe return it."""
        patterns = []
        for index, item in enumerate((criteria or {}).get("Filters") or []):
            try:
                pattern = json.loads(item["Pattern"])
            except (ValueError, KeyError, TypeError):
                raise UnsupportedFilter(f"Filters[{index}]: not a JSON pattern") from None
            _check_object(pattern, f"Filters[{index}]")
            patterns.append(pattern)
        return cls(tuple(patterns))

    def admits(self, record: dict[str, Any]) -> bool:
        return not self.patterns or any(_object_matches(p, record) for p in self.patterns)


def _check_object(pattern: Any, path: str) -> None:
    if not isinstance(pattern, dict) or not pattern:
        raise UnsupportedFilter(f"{path}: not a pattern object")
    for key, rule in pattern.items():
        if isinstance(rule, dict):
            _check_object(rule, f"{path}.{key}")
        elif isinstance(rule, list) and rule:
            for value in rule:
                _check_value(value, f"{path}.{key}")
        else:
            raise UnsupportedFilter(f"{path}.{key}: {json.dumps(rule)} is not applied by ops")


def _check_value(value: Any, path: str) -> None:
    if value is None or isinstance(value, str | bool):
        return
    if isinstance(value, dict) and len(value) == 1:
        [(operator, argument)] = value.items()
        if operator == "exists" and isinstance(argument, bool):
            return
        excluded = argument if isinstance(argument, list) else [argument]
        if operator == "anything-but" and excluded and all(isinstance(v, str) for v in excluded):
            return
    raise UnsupportedFilter(f"{path}: {json.dumps(value)} is not applied by ops")


def _object_matches(pattern: dict[str, Any], value: Any) -> bool:
    if isinstance(value, list):
        elements = _flatten(value)
        return (
            any(_object_matches(pattern, e) for e in elements)
            if elements
            else (_object_matches(pattern, {}))
        )
    record = value if isinstance(value, dict) else {}
    for key, rule in pattern.items():
        if isinstance(rule, dict):
            if not _object_matches(rule, record.get(key)):
                return False
        elif not _leaf_matches(rule, record.get(key), key in record):
            return False
    return True


def _leaf_matches(rules: list[Any], value: Any, present: bool) -> bool:
    exists = {rule["exists"] for rule in rules if isinstance(rule, dict) and "exists" in rule}
    leaves = _leaves(value) if present else []
    if not leaves:
        return False in exists
    if True in exists:
        return True
    values = [rule for rule in rules if not (isinstance(rule, dict) and "exists" in rule)]
    return any(_value_matches(rule, leaf) for leaf in leaves for rule in values)


def _value_matches(rule: Any, leaf: Any) -> bool:
    if isinstance(rule, dict):  # anything-but, of strings
        excluded = rule["anything-but"]
        return not (
            isinstance(leaf, str)
            and leaf in (excluded if isinstance(excluded, list) else [excluded])
        )
    if rule is None or isinstance(rule, bool):
        return leaf is rule
    return isinstance(leaf, str) and leaf == rule


def _flatten(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.extend(_flatten(value) if isinstance(value, list) else [value])
    return out


def _leaves(value: Any) -> list[Any]:
    """What a leaf rule sees of a record value: an object is none, an array its leaves."""
    if isinstance(value, dict):
        return []
    if isinstance(value, list):
        return [v for v in _flatten(value) if not isinstance(v, dict)]
    return [value]
