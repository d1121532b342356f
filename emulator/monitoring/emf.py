"""Embedded metric format (EMF) log lines to CloudWatch metrics, as CloudWatch Logs extracts them
(CloudWatch user guide, "Specification: Embedded metric format").

A log event is an EMF document when it is a JSON object with an ``_aws`` member; ``extract``
gives the PutMetricData of its metrics. Per the specification: ``_aws.Timestamp`` (epoch
milliseconds) is every metric's timestamp; each ``CloudWatchMetrics`` directive names a
``Namespace``, ``Dimensions`` (dimension sets, each a list of root member names whose values are
strings, at most 30) and ``Metrics`` (at most 100, each a ``Name`` with an optional ``Unit`` and
``StorageResolution`` 1 or 60); a metric's value is the root member of its name, a number or an
array of at most 100 numbers. Every dimension set of a directive gets every metric of it.

A document that breaks a rule yields no metric at all (the event is still a log event) and
raises ``InvalidEmf``: CloudWatch Logs counts it in ``AWS/Logs`` ``EMFValidationErrors``
(``EMFParsingErrors`` for an ``_aws`` line that is not a JSON object), per log group.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_DIMENSIONS = 30
MAX_METRICS = 100
MAX_VALUES = 100
UNITS = frozenset(
    {
        "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes",
        "Gigabytes", "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits",
        "Percent", "Count", "Bytes/Second", "Kilobytes/Second", "Megabytes/Second",
        "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second",
        "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
    }
)  # fmt: skip
PARSING_ERRORS = "EMFParsingErrors"
VALIDATION_ERRORS = "EMFValidationErrors"


class InvalidEmf(ValueError):
    """The line claims EMF (it has ``_aws``) but breaks the specification; ``metric`` says which
    AWS/Logs error metric counts it."""

    def __init__(self, metric: str, problem: str) -> None:
        super().__init__(problem)
        self.metric = metric


@dataclass(frozen=True)
class Extracted:
    namespace: str
    metric_data: list[dict[str, Any]]  # PutMetricData's MetricData


def extract(line: bytes | str) -> list[Extracted]:
    """The metrics of one log event: [] when it is not EMF; InvalidEmf when it is invalid EMF."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    if '"_aws"' not in text:
        return []
    try:
        root = json.loads(text)
    except ValueError:
        raise InvalidEmf(PARSING_ERRORS, "not a JSON object") from None
    if not isinstance(root, dict) or "_aws" not in root:
        return []  # a log line that mentions "_aws" inside a value
    return _directives(root)


def _invalid(problem: str) -> InvalidEmf:
    return InvalidEmf(VALIDATION_ERRORS, problem)


def _directives(root: dict[str, Any]) -> list[Extracted]:
    meta = root["_aws"]
    if not isinstance(meta, dict):
        raise _invalid("_aws is not an object")
    stamp = meta.get("Timestamp")
    if not _is_number(stamp):
        raise _invalid("_aws.Timestamp is not a number of epoch milliseconds")
    directives = meta.get("CloudWatchMetrics")
    if not isinstance(directives, list):
        raise _invalid("_aws.CloudWatchMetrics is not an array")
    timestamp = datetime.fromtimestamp(stamp / 1000, UTC).replace(tzinfo=None)
    return [_directive(root, d, timestamp) for d in directives]


def _directive(root: dict[str, Any], directive: Any, timestamp: datetime) -> Extracted:
    if not isinstance(directive, dict):
        raise _invalid("a MetricDirective is not an object")
    namespace = directive.get("Namespace")
    if not isinstance(namespace, str) or not namespace.strip() or len(namespace) > 1024:
        raise _invalid("Namespace must be a non-blank string of at most 1024 characters")
    sets = directive.get("Dimensions")
    if not isinstance(sets, list):
        raise _invalid(f"{namespace}: Dimensions is not an array of dimension sets")
    dimension_sets = [_dimension_set(root, names) for names in sets]
    metrics = directive.get("Metrics")
    if not isinstance(metrics, list) or len(metrics) > MAX_METRICS:
        raise _invalid(f"{namespace}: Metrics must be an array of at most {MAX_METRICS}")
    data = []
    for definition in metrics:
        datum = _metric(root, definition, timestamp)
        data.extend({**datum, "Dimensions": dims} for dims in dimension_sets or [[]])
    return Extracted(namespace, data)


def _dimension_set(root: dict[str, Any], names: Any) -> list[dict[str, str]]:
    if not isinstance(names, list) or len(names) > MAX_DIMENSIONS:
        raise _invalid(f"a dimension set must be an array of at most {MAX_DIMENSIONS} names")
    dimensions = []
    for name in names:
        value = root.get(name) if isinstance(name, str) else None
        if not isinstance(value, str):
            raise _invalid(f"dimension {name!r} has no string value in the root node")
        dimensions.append({"Name": name, "Value": value})
    return dimensions


def _metric(root: dict[str, Any], definition: Any, timestamp: datetime) -> dict[str, Any]:
    if not isinstance(definition, dict) or not isinstance(definition.get("Name"), str):
        raise _invalid("a MetricDefinition has no Name")
    name = definition["Name"]
    value = root.get(name)
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > MAX_VALUES or not all(_is_number(v) for v in values):
        raise _invalid(f"metric {name!r}: the root node has no number or array of numbers")
    datum: dict[str, Any] = {"MetricName": name, "Values": values, "Timestamp": timestamp}
    unit = definition.get("Unit")
    if unit is not None:
        if unit not in UNITS:
            raise _invalid(f"metric {name!r}: {unit!r} is not a CloudWatch unit")
        datum["Unit"] = unit
    resolution = definition.get("StorageResolution")
    if resolution is not None:
        if resolution not in (1, 60) or isinstance(resolution, bool):
            raise _invalid(f"metric {name!r}: StorageResolution must be 1 or 60")
        datum["StorageResolution"] = resolution
    return datum


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
