"""Lambda event filtering (an event source mapping's ``FilterCriteria``), as the service applies it.

Lambda uses the EventBridge pattern language ("Filter rule syntax" in the Lambda developer guide):

- A pattern is a JSON object shaped like the record. Nested objects go down into the record;
  every leaf of the pattern is a *list* of match values, which are OR-ed. Fields are AND-ed.
- Match values: strings, numbers, ``true``/``false`` and ``null`` match equal JSON values of the
  same type (numbers by their JSON text: 300 and 300.0 differ, as the Lambda guide says), and the
  operators ``prefix``, ``suffix``, ``equals-ignore-case`` (strings only), ``anything-but``
  (a value, a list of strings or of numbers, or ``prefix``/``suffix``/``equals-ignore-case``),
  ``numeric`` (``=``, ``<``, ``<=``, ``>``, ``>=``, or a range: lower bound then upper bound;
  JSON numbers only, never a numeric string such as a DynamoDB ``{"N": "600"}``) and
  ``exists`` (true/false).
- ``"$or": [{...}, {...}]`` matches when any of its sub-patterns matches at that level.
- A record array matches when any element matches (elements are tried one by one, so the fields of
  one sub-pattern must hold in the same element).
- Operators see only leaves: a record value that is an object counts as absent for a leaf rule,
  so ``exists: true`` on a DynamoDB attribute must name the typed leaf
  (``{"email": {"S": [{"exists": true}]}}``), and ``{"email": [{"exists": false}]}`` matches even
  when the attribute is there (its value ``{"S": ...}`` is an object, not a leaf).
- A pattern key absent from the record fails, unless its rules include ``exists: false``.
- SQS: the message ``body`` is matched as parsed JSON when it is a JSON object or array, else as a
  plain string; when the body's format and the pattern's ``body`` format differ (JSON body against
  a list of values, plain-text body against an object) the record never matches ("Properly
  filtering Amazon SQS messages" in the Lambda guide).
- ``FilterCriteria``: up to N filters, OR-ed; no filters means every record matches.

EventBridge rules and SNS filter policies use the same language (emulator/services/events.py,
emulator/services/sns_filter_policies.py match with this module); EventBridge's ``wildcard`` and
``cidr`` are refused (``compile_event_pattern``: an ``InvalidPatternError`` saying the local stack
does not emulate them).

Public API: ``compile_pattern``, ``Pattern.matches``, ``FilterCriteria.from_mapping``,
``FilterCriteria.matches``, ``record_view``, ``detect_source``, ``InvalidPatternError``,
``UnsupportedOperatorError``, ``compile_event_pattern``, ``sns_attributes_view``.
Pure stdlib, no I/O.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "FilterCriteria",
    "InvalidPatternError",
    "Pattern",
    "UnsupportedOperatorError",
    "compile_event_pattern",
    "compile_pattern",
    "detect_source",
    "record_view",
    "sns_attributes_view",
]

MAX_PATTERN_LENGTH = 4096  # Filter.Pattern length limit in the Lambda API reference.
# Emulator guard (AWS documents no depth limit; the 4096-character pattern bounds it in practice).
MAX_DEPTH = 32
SOURCES = ("sqs", "dynamodb")
_EVENT_SOURCES = {"aws:sqs": "sqs", "aws:dynamodb": "dynamodb"}
OPERATORS = ("anything-but", "equals-ignore-case", "exists", "numeric", "prefix", "suffix")
# EventBridge operators that the Lambda guide does not list for event filtering.
_NOT_IN_LAMBDA = ("cidr", "wildcard")
_COMPARE = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

Test = Callable[[Any], bool]


class InvalidPatternError(ValueError):
    """A filter pattern Lambda would reject; ``path`` is where in the pattern (JSON path)."""

    def __init__(self, path: str, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"invalid filter pattern at {path}: {problem}")


class UnsupportedOperatorError(InvalidPatternError):
    """An EventBridge operator (``wildcard``, ``cidr``) that Lambda filtering rejects; EventBridge
    rules and SNS filter policies accept it but the local stack does not match it."""

    def __init__(self, path: str, operator_name: str):
        self.operator = operator_name
        super().__init__(path, f"operator {operator_name!r} is not supported by Lambda filtering")


# ---------------------------------------------------------------------------------------------
# Value helpers


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same_value(event_value: Any, pattern_value: Any) -> bool:
    """Exact match: same JSON type and same JSON text (so 1 != true and 300 != 300.0)."""
    if _is_number(pattern_value):
        return _is_number(event_value) and json.dumps(event_value) == json.dumps(pattern_value)
    if isinstance(pattern_value, bool) or pattern_value is None:
        return event_value is pattern_value
    return isinstance(event_value, str) and event_value == pattern_value


def _flatten(values: list) -> list:
    """The elements of a (possibly nested) record array."""
    out: list = []
    for value in values:
        out.extend(_flatten(value) if isinstance(value, list) else [value])
    return out


def _leaves(value: Any) -> list:
    """What leaf rules see of a record value: objects are not leaves, arrays give their leaves."""
    if isinstance(value, dict):
        return []
    if isinstance(value, list):
        return [v for v in _flatten(value) if not isinstance(v, dict)]
    return [value]


def _describe(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, Mapping) else "an object"


# ---------------------------------------------------------------------------------------------
# Compiled pattern tree


class _Leaf:
    """A pattern leaf: a list of match values, OR-ed. Its plain strings are one set: a record's
    string leaf is looked up, not compared with each (they are most filters' values)."""

    def __init__(self, tests: Sequence[Test], exists: set[bool], strings: frozenset[str]):
        self.tests = tuple(tests)
        self.strings = strings
        self.if_absent = False in exists  # exists: false
        self.if_present = True in exists  # exists: true

    def match(self, value: Any, present: bool) -> bool:
        if not present or isinstance(value, dict):  # an object is not a leaf: absent
            return self.if_absent
        if isinstance(value, list):
            leaves = _leaves(value)
            if not leaves:
                return self.if_absent
            return self.if_present or any(self._test(leaf) for leaf in leaves)
        return self.if_present or self._test(value)

    def _test(self, leaf: Any) -> bool:
        return (isinstance(leaf, str) and leaf in self.strings) or any(
            test(leaf) for test in self.tests
        )


class _Object:
    """A pattern object: every field must match, and one branch of every ``$or``."""

    def __init__(self, fields: list[tuple[str, _Leaf | _Object]], ors: list[list[_Object]]):
        self.fields = fields
        self.ors = ors

    def match(self, value: Any, strict: Sequence[str] = ()) -> bool:
        if isinstance(value, list):
            elements = _flatten(value)
            return any(self.match(element) for element in elements) if elements else self.match({})
        record = value if isinstance(value, dict) else {}
        for key, node in self.fields:
            present = key in record
            if key in strict and present and not _same_format(node, record[key]):
                return False
            if isinstance(node, _Object):
                if not node.match(record.get(key)):
                    return False
            elif not node.match(record.get(key), present):
                return False
        return all(
            any(branch.match(record, strict) for branch in branches) for branches in self.ors
        )


def _same_format(node: _Leaf | _Object, value: Any) -> bool:
    """SQS body check: an object pattern needs a JSON body, a value list a plain-text body."""
    return isinstance(node, _Object) == isinstance(value, dict | list)


# ---------------------------------------------------------------------------------------------
# Compilation (validation with the JSON path of each problem)


def _compile_object(node: Any, path: str, depth: int) -> _Object:
    if not isinstance(node, Mapping):
        raise InvalidPatternError(path, f"must be a JSON object, got {_describe(node)}")
    if not node:
        raise InvalidPatternError(path, "empty objects are not allowed")
    if depth > MAX_DEPTH:
        raise InvalidPatternError(path, f"nesting deeper than {MAX_DEPTH} levels")
    fields: list[tuple[str, _Leaf | _Object]] = []
    ors: list[list[_Object]] = []
    for key, value in node.items():
        if not isinstance(key, str):
            raise InvalidPatternError(path, f"field names must be strings, got {key!r}")
        sub = f"{path}.{key}"
        if key == "$or":
            ors.append(_compile_or(value, sub, depth))
        elif isinstance(value, Mapping):
            fields.append((key, _compile_object(value, sub, depth + 1)))
        elif isinstance(value, list):
            fields.append((key, _compile_leaf(value, sub)))
        else:
            raise InvalidPatternError(
                sub,
                f"must be an object or a list of match values (leaf values must be lists: "
                f"write [{_describe(value)}], not {_describe(value)})",
            )
    return _Object(fields, ors)


def _compile_or(value: Any, path: str, depth: int) -> list[_Object]:
    if not isinstance(value, list) or len(value) < 2:
        raise InvalidPatternError(path, "$or takes a list of at least 2 pattern objects")
    branches = []
    for index, branch in enumerate(value):
        if not isinstance(branch, Mapping):
            raise InvalidPatternError(
                f"{path}[{index}]", f"$or elements must be objects, got {_describe(branch)}"
            )
        branches.append(_compile_object(branch, f"{path}[{index}]", depth + 1))
    return branches


def _compile_leaf(values: list, path: str) -> _Leaf:
    if not values:
        raise InvalidPatternError(path, "empty lists are not allowed (a leaf needs match values)")
    tests: list[Test] = []
    exists: set[bool] = set()
    strings: set[str] = set()
    for index, value in enumerate(values):
        at = f"{path}[{index}]"
        if isinstance(value, Mapping):
            op, arg = _single_operator(value, at)
            if op == "exists":
                if not isinstance(arg, bool):
                    raise InvalidPatternError(at, "exists takes true or false")
                exists.add(arg)
            else:
                tests.append(_compile_operator(op, arg, at))
        elif isinstance(value, list):
            raise InvalidPatternError(at, "nested lists are not allowed")
        elif isinstance(value, str):
            strings.add(value)
        elif value is None or isinstance(value, bool) or _is_finite(value):
            tests.append(lambda leaf, expected=value: _same_value(leaf, expected))
        else:
            raise InvalidPatternError(at, f"unsupported match value {value!r}")
    return _Leaf(tests, exists, frozenset(strings))


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _single_operator(expression: Mapping, path: str) -> tuple[str, Any]:
    if len(expression) != 1:
        raise InvalidPatternError(
            path, f"a match expression has exactly one operator, got {sorted(expression)}"
        )
    ((op, arg),) = expression.items()
    if op in _NOT_IN_LAMBDA:
        raise UnsupportedOperatorError(path, op)
    if op not in OPERATORS:
        raise InvalidPatternError(
            path, f"unknown operator {op!r} (supported: {', '.join(OPERATORS)})"
        )
    return op, arg


def _compile_operator(op: str, arg: Any, path: str) -> Test:
    if op == "numeric":
        return _compile_numeric(arg, f"{path}.numeric")
    if op == "anything-but":
        return _compile_anything_but(arg, f"{path}.anything-but")
    if op == "equals-ignore-case":
        folded = _string(arg, f"{path}.{op}").casefold()
        return lambda leaf: isinstance(leaf, str) and leaf.casefold() == folded
    return _compile_affix(op, arg, f"{path}.{op}")


def _compile_affix(op: str, arg: Any, path: str) -> Test:
    """prefix / suffix, either a string or {"equals-ignore-case": string}."""
    ignore_case = isinstance(arg, Mapping)
    if ignore_case:
        inner, value = _single_key(arg, ("equals-ignore-case",), path)
        text = _string(value, f"{path}.{inner}").casefold()
    else:
        text = _string(arg, path)
    method = str.startswith if op == "prefix" else str.endswith

    def test(leaf: Any) -> bool:
        if not isinstance(leaf, str):
            return False
        return method(leaf.casefold() if ignore_case else leaf, text)

    return test


def _compile_anything_but(arg: Any, path: str) -> Test:
    if isinstance(arg, Mapping):
        inner, value = _single_key(arg, ("prefix", "suffix", "equals-ignore-case"), path)
        at = f"{path}.{inner}"
        if inner == "equals-ignore-case":
            words = value if isinstance(value, list) else [value]
            if not words:
                raise InvalidPatternError(at, "empty lists are not allowed")
            folded = {_string(w, f"{at}[{i}]").casefold() for i, w in enumerate(words)}
            return lambda leaf: not (isinstance(leaf, str) and leaf.casefold() in folded)
        affix = _string(value, at)
        if not affix:
            raise InvalidPatternError(at, f"anything-but {inner} must not be empty")
        method = str.startswith if inner == "prefix" else str.endswith
        return lambda leaf: not (isinstance(leaf, str) and method(leaf, affix))
    excluded = arg if isinstance(arg, list) else [arg]
    if not excluded:
        raise InvalidPatternError(path, "empty lists are not allowed")
    if all(isinstance(v, str) for v in excluded):
        strings = set(excluded)
        return lambda leaf: not (isinstance(leaf, str) and leaf in strings)
    if all(_is_finite(v) for v in excluded):
        numbers = {float(v) for v in excluded}
        return lambda leaf: not (_is_number(leaf) and float(leaf) in numbers)
    raise InvalidPatternError(
        path, "takes a string, a number, a list of only strings or only numbers, or an object"
    )


def _compile_numeric(arg: Any, path: str) -> Test:
    """["=", n] | [op, n] | [">" or ">=", low, "<" or "<=", high] with low < high."""
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        raise InvalidPatternError(
            path, 'takes [op, number] or [">"|">=", low, "<"|"<=", high], got ' + _describe(arg)
        )
    bounds = []
    for index in range(0, len(arg), 2):
        op, number = arg[index], arg[index + 1]
        if op not in _COMPARE:
            raise InvalidPatternError(f"{path}[{index}]", f"unknown numeric operator {op!r}")
        if not _is_finite(number):
            raise InvalidPatternError(
                f"{path}[{index + 1}]", f"{op} needs a number, got {_describe(number)}"
            )
        bounds.append((op, number))
    if len(bounds) == 2:
        (low_op, low), (high_op, high) = bounds
        if low_op not in (">", ">=") or high_op not in ("<", "<="):
            raise InvalidPatternError(
                path, 'a range is a lower bound (">" or ">=") then an upper bound ("<" or "<=")'
            )
        if low >= high:
            raise InvalidPatternError(path, f"empty range: {low} is not below {high}")
    return lambda leaf: _is_number(leaf) and all(_COMPARE[op](leaf, n) for op, n in bounds)


def _single_key(arg: Mapping, allowed: tuple[str, ...], path: str) -> tuple[str, Any]:
    if len(arg) != 1 or next(iter(arg)) not in allowed:
        raise InvalidPatternError(
            path, f"takes an object with one of {', '.join(allowed)}, got {sorted(arg)}"
        )
    return next(iter(arg.items()))


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidPatternError(path, f"must be a string, got {_describe(value)}")
    return value


# ---------------------------------------------------------------------------------------------
# Records as Lambda's filter sees them


def detect_source(record: Mapping[str, Any]) -> str | None:
    """ "sqs" or "dynamodb" from a record's ``eventSource``; None for anything else."""
    return _EVENT_SOURCES.get(record.get("eventSource"))


def _json_container(text: str) -> dict | list | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def record_view(record: Mapping[str, Any], source: str | None = None) -> dict[str, Any]:
    """The document a filter pattern is matched against, for one record of an event source.

    SQS: the record with ``body`` parsed when it is a JSON object or array (else the plain
    string). DynamoDB streams: the record unchanged (``eventName``, ``dynamodb.Keys``,
    ``dynamodb.NewImage`` with typed values such as ``{"S": "x"}``, ``{"N": "600"}``,
    ``{"BOOL": true}``; numbers in ``N`` stay strings). ``source`` defaults to the record's
    ``eventSource``.
    """
    source = _check_source(source) or detect_source(record)
    view = dict(record)
    if source == "sqs" and isinstance(record.get("body"), str):
        parsed = _json_container(record["body"])
        if parsed is not None:
            view["body"] = parsed
    return view


def sns_attributes_view(message_attributes: dict[str, Any] | None) -> dict[str, Any]:
    """SNS message attributes (``{"Type", "Value"}`` as the SNS envelope and moto hold them, or
    Publish's ``{"DataType", "StringValue"}``) as the document a filter policy of scope
    MessageAttributes is matched against: ``String`` (and ``String.<custom>``) as the string,
    ``Number`` as a JSON number (so ``numeric`` works and ``[300]`` matches), ``String.Array`` as
    its JSON array (any element may match); ``Binary`` attributes are left out (SNS never matches
    them)."""
    view: dict[str, Any] = {}
    for name, attribute in (message_attributes or {}).items():
        kind = attribute.get("Type") or attribute.get("DataType") or ""
        value = attribute.get("Value", attribute.get("StringValue"))
        if kind.startswith("Binary") or not isinstance(value, str):
            continue
        if kind == "String.Array":
            try:
                view[name] = json.loads(value)
            except ValueError:
                continue
        elif kind.startswith("Number"):
            try:
                view[name] = json.loads(value)
            except ValueError:
                view[name] = float(value)
        else:
            view[name] = value
    return view


def _check_source(source: str | None) -> str | None:
    if source is not None and source not in SOURCES:
        raise ValueError(f"unknown event source {source!r} (expected one of {SOURCES})")
    return source


# ---------------------------------------------------------------------------------------------
# Public objects


class Pattern:
    """A compiled filter pattern; ``document`` is the pattern as a dict."""

    def __init__(self, document: dict[str, Any]):
        self.document = document
        self._root = _compile_object(document, "$", 1)

    def matches(self, event: Mapping[str, Any], source: str | None = None) -> bool:
        """Whether a record (or any JSON object) matches. SQS and DynamoDB records (known from
        ``eventSource`` or ``source``) are first turned into what Lambda's filter sees."""
        if not isinstance(event, Mapping):
            raise TypeError(f"a record is a JSON object, got {type(event).__name__}")
        source = _check_source(source) or detect_source(event)
        strict = ("body",) if source == "sqs" else ()
        return self._root.match(record_view(event, source), strict)

    def __repr__(self) -> str:
        return f"Pattern({json.dumps(self.document)})"


def compile_pattern(pattern: str | Mapping[str, Any]) -> Pattern:
    """Compile a filter pattern (the JSON string of ``Filters[].Pattern``, or its dict)."""
    if isinstance(pattern, str):
        if len(pattern) > MAX_PATTERN_LENGTH:
            raise InvalidPatternError(
                "$", f"pattern is {len(pattern)} characters, the limit is {MAX_PATTERN_LENGTH}"
            )
        try:
            document = json.loads(pattern)
        except ValueError as error:
            raise InvalidPatternError("$", f"not valid JSON: {error}") from None
    elif isinstance(pattern, Mapping):
        document = json.loads(json.dumps(pattern))  # a plain, detached JSON document
    else:
        raise InvalidPatternError("$", f"a pattern is a JSON string or object, got {pattern!r}")
    if not isinstance(document, dict):
        raise InvalidPatternError(
            "$", f"a pattern must be a JSON object, got {_describe(document)}"
        )
    return Pattern(document)


def compile_event_pattern(pattern: str | Mapping[str, Any]) -> Pattern:
    """An EventBridge rule's event pattern or an SNS filter policy (the same language):
    ``compile_pattern``, with EventBridge's ``wildcard`` and ``cidr`` refused as not emulated."""
    try:
        return compile_pattern(pattern)
    except UnsupportedOperatorError as error:
        raise InvalidPatternError(
            error.path,
            f"operator {error.operator!r} is valid on AWS but the local stack does not match it",
        ) from None


class FilterCriteria:
    """An event source mapping's filters: a record passes when any pattern matches it."""

    def __init__(self, patterns: Sequence[Pattern] = ()):
        self.patterns = tuple(patterns)

    @classmethod
    def from_mapping(cls, criteria: Mapping[str, Any] | None) -> FilterCriteria:
        """From ``{"Filters": [{"Pattern": "<json>"}, ...]}`` (Pattern may also be a dict).
        None, ``{}`` and ``{"Filters": []}`` give no filters: every record matches."""
        if not criteria:
            return cls()
        if not isinstance(criteria, Mapping):
            raise InvalidPatternError("FilterCriteria", "must be an object with Filters")
        filters = criteria.get("Filters", [])
        if not isinstance(filters, list):
            raise InvalidPatternError("FilterCriteria.Filters", "must be a list")
        patterns = []
        for index, item in enumerate(filters):
            where = f"FilterCriteria.Filters[{index}]"
            if not isinstance(item, Mapping) or "Pattern" not in item:
                raise InvalidPatternError(where, 'each filter is {"Pattern": "<json>"}')
            try:
                patterns.append(compile_pattern(item["Pattern"]))
            except InvalidPatternError as error:
                raise InvalidPatternError(
                    f"{where}.Pattern{error.path[1:]}", error.problem
                ) from None
        return cls(patterns)

    def matches(self, record: Mapping[str, Any], source: str | None = None) -> bool:
        return not self.patterns or any(p.matches(record, source) for p in self.patterns)

    def __len__(self) -> int:
        return len(self.patterns)

    def __repr__(self) -> str:
        return f"FilterCriteria({list(self.patterns)!r})"
