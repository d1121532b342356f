"""DynamoDB's answers where moto 5.2.5 gives others: ListTables' order and ProjectionExpression's
list indexes.

- ListTables (moto/dynamodb/models/__init__.py ``list_tables``): moto lists tables in creation
  order and pages by a table's position in that order; DynamoDB lists names in order (UTF-8 byte
  order: ``Beta`` before ``alpha``, ``mid-0`` before ``mid_1``) and a page starts after
  ExclusiveStartTableName, which need not name a table. ``LastEvaluatedTableName`` only when more
  names follow (API reference: "If you do not receive a LastEvaluatedTableName value in the
  response, this means that there are no more table names to be retrieved").
- ProjectionExpression (moto/dynamodb/responses.py ``ProjectionExpressionParser``, models/
  dynamo_type.py ``Item.project``): moto substitutes a ``#name`` only when it is a whole path
  element, so ``#l[2]`` is refused as an unused ExpressionAttributeNames entry, and two elements
  of one list (``l[0], l[2]``) keep only the last. DynamoDB's document paths (developer guide,
  "Specifying item attributes when using expressions": ``MyList[0]``, ``#pr.Pictures.FrontView``,
  nested indexes ``a[1][2]``) select each element; the elements of a list selected from one item
  come back in index order, a path to nothing selects nothing.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from moto.dynamodb.exceptions import InvalidProjectionExpression
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.responses import ProjectionExpressionParser, check_projection_expression
from moto.dynamodb.utils import find_duplicates

from emulator.services import patching

_ELEMENT = re.compile(r"([^\[\]]+)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")

Path = list[str | int]  # attribute and map-key names, list indexes


def install() -> None:
    patching.replace(DynamoDBBackend, "list_tables", list_tables)
    patching.replace(ProjectionExpressionParser, "parse", parse_projection)
    patching.replace(Item, "project", project)


# --- ListTables -----------------------------------------------------------------------------------
def list_tables(
    self: DynamoDBBackend, limit: int, exclusive_start_table_name: str | None
) -> tuple[list[str], str | None]:
    names = sorted(self.tables, key=lambda name: name.encode("utf-8"))
    encoded = [name.encode("utf-8") for name in names]
    start = (
        bisect.bisect_right(encoded, exclusive_start_table_name.encode("utf-8"))
        if exclusive_start_table_name
        else 0
    )
    page = names[start : start + limit] if limit else names[start:]
    more = bool(limit) and len(names) > start + limit
    return page, page[-1] if more and page else None


# --- ProjectionExpression -------------------------------------------------------------------------
def parse_projection(self: ProjectionExpressionParser) -> list[Path]:
    """Each comma-separated document path as names and indexes, ``#names`` substituted (also
    before an index) and recorded as used."""
    if not self.projection_expression:
        return []
    expressions = [x.strip() for x in self.projection_expression.split(",")]
    duplicates = find_duplicates(expressions)
    if duplicates:
        raise InvalidProjectionExpression(*duplicates)
    paths = []
    for expression in expressions:
        check_projection_expression(expression)
        path: Path = []
        for element in expression.split("."):
            match = _ELEMENT.fullmatch(element)
            name, indexes = (match.group(1), match.group(2)) if match else (element, "")
            if name in self.expression_attribute_names:
                self.expr_attr_names_found.append(name)
                name = self.expression_attribute_names[name]
            path.append(name)
            path.extend(int(i) for i in _INDEX.findall(indexes))
        paths.append(path)
    return paths


def project(self: Item, projection_expressions: list[Path]) -> Item:
    """The item with only what the paths select (lists' selected elements in index order)."""
    selected: dict[str, Any] = {}
    for path in projection_expressions:
        head = path[0]
        if isinstance(head, str) and head in self.attrs:
            node = _select(self.attrs[head], path[1:])
            if node is not None:
                selected[head] = _merge(selected.get(head), node)
    return Item(
        hash_key=self.hash_key,
        range_key=self.range_key,
        attrs={name: _built(node) for name, node in selected.items()},
    )


# A selection: a whole value (DynamoType), or ("M", {key: selection}) / ("L", {index: selection}).
def _select(value: DynamoType, rest: Path) -> Any:
    if not rest:
        return value
    step = rest[0]
    if isinstance(step, int):
        if value.type != "L" or step >= len(value.value):
            return None
        kind = "L"
    else:
        if value.type != "M" or step not in value.value:
            return None
        kind = "M"
    inner = _select(value.value[step], rest[1:])
    return None if inner is None else (kind, {step: inner})


def _merge(old: Any, new: Any) -> Any:
    if old is None:
        return new
    if isinstance(old, DynamoType) or isinstance(new, DynamoType):
        return old if isinstance(old, DynamoType) else new  # the whole value covers the part
    kind, children = old
    merged = dict(children)
    for key, child in new[1].items():
        merged[key] = _merge(merged.get(key), child)
    return (kind, merged)


def _built(node: Any) -> DynamoType:
    if isinstance(node, DynamoType):
        return node
    kind, children = node
    result = DynamoType({kind: [] if kind == "L" else {}})
    if kind == "L":
        result.value = [_built(children[index]) for index in sorted(children)]
    else:
        result.value = {key: _built(child) for key, child in children.items()}
    return result
