"""DynamoDB's answers where moto 5.2.6 gives others: ListTables' order, ProjectionExpression's
list indexes, ItemCollectionMetrics, PartiQL's writes and statements moto cannot parse, tags and
time to live, size() and begins_with on binary values (at the end of this module).

- ListTables (moto/dynamodb/models/__init__.py ``list_tables``): moto lists tables in creation
  order and pages by a table's position in that order; DynamoDB lists names in order (UTF-8 byte
  order: ``Beta`` before ``alpha``, ``mid-0`` before ``mid_1``) and a page starts after
  ExclusiveStartTableName, which need not name a table. ``LastEvaluatedTableName`` only when more
  names follow (API reference: "If you do not receive a LastEvaluatedTableName value in the
  response, this means that there are no more table names to be retrieved"). moto takes any
  Limit; DynamoDB's is 1 to 100 (a ValidationException otherwise).
- ProjectionExpression (moto/dynamodb/responses.py ``ProjectionExpressionParser``, models/
  dynamo_type.py ``Item.project``): moto substitutes a ``#name`` only when it is a whole path
  element, so ``#l[2]`` is refused as an unused ExpressionAttributeNames entry, and two elements
  of one list (``l[0], l[2]``) keep only the last. DynamoDB's document paths (developer guide,
  "Specifying item attributes when using expressions": ``MyList[0]``, ``#pr.Pictures.FrontView``,
  nested indexes ``a[1][2]``) select each element; the elements of a list selected from one item
  come back in index order, a path to nothing selects nothing.
- ItemCollectionMetrics (moto/dynamodb/responses.py): moto never returns one for PutItem,
  UpdateItem or DeleteItem, and an empty map for BatchWriteItem and TransactWriteItems. DynamoDB
  (API reference, "ItemCollectionMetrics"): with ReturnItemCollectionMetrics=SIZE, for a table
  with local secondary indexes only ("If the table does not have any local secondary indexes,
  this information is not returned"), the item collection each write touched:
  ``ItemCollectionKey`` (the partition key value) and ``SizeEstimateRangeGB`` (a lower and an
  upper bound in GB; here the collection's items by DynamoDB's item sizes, rounded down and up to
  whole GB: [0.0, 1.0] for a collection under 1 GB). The batch and transaction forms map each
  such table to its collections, one per partition key written; other tables are left out.
- PartiQL writes (moto/dynamodb/models/__init__.py ``execute_statement`` and friends): moto's
  INSERT overwrites an item of the same key, UPDATE and DELETE run with any WHERE clause, and
  ExecuteTransaction runs its statements one by one (a failing one leaves the earlier ones
  written). DynamoDB (developer guide, "PartiQL insert / update / delete statements for
  DynamoDB", API reference ExecuteTransaction): an INSERT of an existing key is
  DuplicateItemException ("Duplicate primary key exists in table"); UPDATE and DELETE need an
  equality on every key attribute in their WHERE clause (ValidationException "Where clause does
  not contain a mandatory equality on all key attributes"); BatchExecuteStatement answers such a
  statement with its Error (``DuplicateItem``, ``ValidationError``) beside the others' results;
  ExecuteTransaction checks every statement first and writes nothing when one fails
  (TransactionCanceledException with a reason per statement). SELECT is moto's; its
  BatchExecuteStatement looked a quoted table name ("Music") up with the quotes
  (ResourceNotFound), so the batch is answered here, statement by statement.
- Query of a table's partition (moto/dynamodb/models/table.py ``Table.query``): moto builds and
  sorts a list of every item of the table (``all_items``) for each Query, to keep those of the
  one partition asked for: a Query costs O(table) (3.8 ms at 1,010 items, 21 ms at 5,010 for a
  10-item partition, `make bench`'s P9). Here a base-table Query reads that partition's items
  alone; moto then sorts, pages and filters them as before. Index queries are moto's.
- PartiQL statements moto's parser (py_partiql_parser) cannot read: it raises whatever Python
  error its parse ends in (TypeError, IndexError, StopIteration, AttributeError), which the
  server answers with a 500 and a traceback. Here any such error is DynamoDB's refusal of a
  statement that is not well formed (ValidationException "Statement wasn't well formed, can't be
  processed: ..."; in BatchExecuteStatement that statement's Error ``ValidationError``): the
  client gets a 400 it does not retry. A statement DynamoDB would read but moto's parser cannot
  is refused the same way (docs/local-stack.md).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import inspect
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.dynamodb.comparisons import FuncBeginsWith, FuncSize
from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    DynamodbException,
    InvalidProjectionExpression,
    MockValidationException,
    ResourceNotFoundException,
    TransactionCanceledException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing import partiql
from moto.dynamodb.responses import (
    DynamoHandler,
    ProjectionExpressionParser,
    check_projection_expression,
)
from moto.dynamodb.utils import find_duplicates
from py_partiql_parser._internal.delete_parser import DeleteParser
from py_partiql_parser._internal.update_parser import UpdateParser

from emulator.services import patching

_COLLECTION_WRITES = (
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)
_GB = 1024**3
_ELEMENT = re.compile(r"([^\[\]]+)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")

Path = list[str | int]  # attribute and map-key names, list indexes


def install() -> None:
    global _original_execute_statement, _original_transaction  # noqa: PLW0603
    _original_execute_statement = patching.original(DynamoDBBackend, "execute_statement")
    _original_transaction = patching.original(DynamoDBBackend, "execute_transaction")
    patching.replace(DynamoDBBackend, "list_tables", list_tables)
    patching.replace(Table, "query", _query_one_partition(patching.original(Table, "query")))
    patching.replace(ProjectionExpressionParser, "parse", parse_projection)
    patching.replace(Item, "project", project)
    patching.replace(DynamoDBBackend, "execute_statement", _checked_statement)
    patching.replace(DynamoDBBackend, "batch_execute_statement", _checked_batch)
    patching.replace(DynamoDBBackend, "execute_transaction", _checked_transaction)
    for action in _COLLECTION_WRITES:
        original = getattr(DynamoHandler, action)
        patching.replace(DynamoHandler, action, _with_collection_metrics(action, original))
    patching.replace(FuncSize, "expr", _size(patching.original(FuncSize, "expr")))
    patching.replace(
        FuncBeginsWith, "expr", _begins_with(patching.original(FuncBeginsWith, "expr"))
    )
    patching.replace(DynamoDBBackend, "tag_resource", tag_resource)
    patching.replace(DynamoDBBackend, "untag_resource", untag_resource)
    patching.replace(DynamoDBBackend, "list_tags_of_resource", list_tags_of_resource)
    patching.replace(
        DynamoDBBackend,
        "update_time_to_live",
        _checked_ttl(patching.original(DynamoDBBackend, "update_time_to_live")),
    )


# --- ListTables -----------------------------------------------------------------------------------
LIST_TABLES_LIMIT = 100  # ListTables' Limit: 1 to 100 (API reference)


def list_tables(
    self: DynamoDBBackend, limit: int, exclusive_start_table_name: str | None
) -> tuple[list[str], str | None]:
    if not 1 <= limit <= LIST_TABLES_LIMIT:
        bound = "greater than or equal to 1" if limit < 1 else "less than or equal to 100"
        raise MockValidationException(
            f"1 validation error detected: Value '{limit}' at 'limit' failed to satisfy "
            f"constraint: Member must have value {bound}"
        )
    names = sorted(self.tables, key=lambda name: name.encode("utf-8"))
    encoded = [name.encode("utf-8") for name in names]
    start = (
        bisect.bisect_right(encoded, exclusive_start_table_name.encode("utf-8"))
        if exclusive_start_table_name
        else 0
    )
    page = names[start : start + limit]
    more = len(names) > start + limit
    return page, page[-1] if more and page else None


# --- Query: one partition, not the table ---------------------------------------------------------
class _Partition:
    """A table seen through one partition, as a base-table Query reads it."""

    def __init__(self, table: Table, hash_key: DynamoType) -> None:
        self._table = table
        self._hash_key = hash_key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def all_items(self) -> list[Item]:
        found = self._table.items.get(self._hash_key)  # .get: items is a defaultdict
        if found is None:
            return []
        return list(found.values()) if self._table.range_key_attr else [found]


_QUERY = inspect.signature(Table.query)


def _query_one_partition(original: Callable[..., Any]) -> Callable[..., Any]:
    def query(self: Table, *args: Any, **kwargs: Any) -> Any:
        bound = _QUERY.bind(self, *args, **kwargs)
        hash_key = bound.arguments.get("hash_key")
        if bound.arguments.get("index_name") is None and hash_key is not None:
            bound.arguments["self"] = _Partition(self, hash_key)
        return original(*bound.args, **bound.kwargs)

    return query


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


# --- ItemCollectionMetrics ------------------------------------------------------------------------
def _with_collection_metrics(action: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: DynamoHandler) -> Any:
        result = original(self)
        if self.body.get("ReturnItemCollectionMetrics") != "SIZE":
            return result
        written = _written_keys(action, self.body)
        metrics = {}
        for name, keyed in written.items():
            table = self.dynamodb_backend.get_table(name)
            if table.indexes:
                collections = {json.dumps(k[table.hash_key_attr], sort_keys=True): k for k in keyed}
                metrics[name] = [_collection_metrics(table, k) for k in collections.values()]
        response = result.result
        if action in ("batch_write_item", "transact_write_items"):
            response["ItemCollectionMetrics"] = metrics
        elif metrics:
            response["ItemCollectionMetrics"] = next(iter(metrics.values()))[0]
        return result

    method.__name__ = original.__name__
    return method


def _written_keys(action: str, body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each table written and the keys (or items) of its writes, in request order."""
    if action == "batch_write_item":
        return {
            name: [
                request.get("PutRequest", {}).get("Item") or request["DeleteRequest"]["Key"]
                for request in requests
            ]
            for name, requests in (body.get("RequestItems") or {}).items()
        }
    if action == "transact_write_items":
        written: dict[str, list[dict[str, Any]]] = {}
        for entry in body.get("TransactItems") or []:
            for kind, operation in entry.items():
                if kind != "ConditionCheck":
                    keyed = operation.get("Item") or operation["Key"]
                    written.setdefault(operation["TableName"], []).append(keyed)
        return written
    return {body["TableName"]: [body.get("Item") or body["Key"]]}


def _collection_metrics(table: Any, keyed: dict[str, Any]) -> dict[str, Any]:
    key = {table.hash_key_attr: keyed[table.hash_key_attr]}
    return {"ItemCollectionKey": key, "SizeEstimateRangeGB": _size_range(table, key)}


def _size_range(table: Any, key: dict[str, Any]) -> list[float]:
    collection = table.items.get(DynamoType(next(iter(key.values()))), {})
    size_gb = sum(item.size() for item in collection.values()) / _GB
    return [float(math.floor(size_gb)), float(math.floor(size_gb) + 1)]


# --- PartiQL writes -------------------------------------------------------------------------------
class DuplicateItem(DynamodbException):
    name = "DuplicateItem"  # the code BatchExecuteStatement reports it by

    def __init__(self) -> None:
        super().__init__("DuplicateItemException", "Duplicate primary key exists in table")


class KeyEqualityRequired(MockValidationException):
    name = "ValidationError"

    def __init__(self) -> None:
        super().__init__("Where clause does not contain a mandatory equality on all key attributes")


class NotWellFormed(MockValidationException):
    name = "ValidationError"  # the code BatchExecuteStatement reports it by

    def __init__(self, error: Exception) -> None:
        detail = f"{type(error).__name__} {error}".strip()
        super().__init__(f"Statement wasn't well formed, can't be processed: {detail}")


@contextlib.contextmanager
def _well_formed() -> Iterator[None]:
    """A parse that fails in moto's parser becomes DynamoDB's ValidationException."""
    try:
        yield
    except JsonRESTError:  # DynamoDB's own errors (ResourceNotFoundException is not a
        raise  # DynamodbException)
    except Exception as error:  # the parser's failures have no type of their own
        raise NotWellFormed(error) from error


def check_statement(backend: DynamoDBBackend, statement: str, parameters: list[Any]) -> None:
    """Refuse a PartiQL statement as DynamoDB does before moto runs it: one moto cannot parse
    (the parse raises: see ``_well_formed``), a write DynamoDB refuses. The parser consumes the
    parameters it binds (``?``): it gets a copy, the statement's run the list."""
    words = statement.split(None, 1)
    kind = words[0].upper() if words else ""
    if kind not in ("INSERT", "UPDATE", "DELETE"):
        # parsed on empty tables first, so a transaction refuses it before writing anything;
        # the metadata keeps a name's quotes ("Music"."ArtistIndex"), the parser's sources not
        names = partiql.get_query_metadata(statement).get_table_names()
        partiql.query(statement, {name.replace('"', ""): [] for name in names}, [*parameters])
        return
    if kind != "INSERT":
        # moto's metadata of an UPDATE or DELETE drops its WHERE clause: its parsers keep it
        if kind == "UPDATE":
            table_name, _, filters = UpdateParser().parse(statement)
        else:
            table_name, filters = DeleteParser().parse(statement)
        table = backend.get_table(table_name)
        if not set(table.table_key_attrs) <= {name for name, _ in filters}:
            raise KeyEqualityRequired
        return
    table = backend.get_table(partiql.get_query_metadata(statement).get_table_names()[0])
    _, updates = partiql.query(statement, {table.name: []}, [*parameters])
    for _, item in updates.get(table.name, []):
        if item is None:
            continue
        hash_key = DynamoType(item[table.hash_key_attr])
        range_key = DynamoType(item[table.range_key_attr]) if table.range_key_attr else None
        if table.get_item(hash_key, range_key) is not None:
            raise DuplicateItem


_original_execute_statement: Any = DynamoDBBackend.execute_statement


def _checked_statement(
    self: DynamoDBBackend, statement: str, parameters: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    with _well_formed():
        check_statement(self, statement, parameters)
        return _original_execute_statement(self, statement, parameters)


def _checked_batch(self: DynamoDBBackend, statements: list[dict[str, Any]]) -> list[Any]:
    """Each statement on its own, a refused one reported as its Error beside the others'
    results. As moto's (a SELECT must name the whole key), but moto's looked a quoted table name
    up with its quotes ("Music": ResourceNotFound)."""
    return [
        _batch_entry(self, stmt["Statement"], stmt.get("Parameters", [])) for stmt in statements
    ]


def _batch_entry(backend: DynamoDBBackend, statement: str, parameters: list[Any]) -> dict:
    try:
        with _well_formed():
            check_statement(backend, statement, parameters)
            metadata = partiql.get_query_metadata(statement)
            table_name = metadata.get_table_names()[0].replace('"', "")
            if table_name not in backend.tables:
                raise ResourceNotFoundException
            filtered = {name.replace('"', "") for name in metadata.get_filter_names()}
            if (
                metadata.is_select_query()
                and not set(backend.tables[table_name].table_key_attrs) <= filtered
            ):
                message = (
                    "Select statements within BatchExecuteStatement must specify the primary "
                    "key in the where clause."
                )
                return {
                    "TableName": table_name,
                    "Error": {"Code": "ValidationError", "Message": message},
                }
            items = _original_execute_statement(backend, statement, parameters)
    except ResourceNotFoundException:
        return {"Error": {"Code": "ResourceNotFound", "Message": "Requested resource not found"}}
    except (DuplicateItem, KeyEqualityRequired, NotWellFormed) as error:
        return {"Error": {"Code": error.name, "Message": error.message}}
    return {"TableName": table_name, **({"Item": items[0]} if items else {})}


def _checked_transaction(self: DynamoDBBackend, statements: list[dict[str, Any]]) -> list[Any]:
    reasons: list[tuple[str | None, str | None, None]] = []
    with _well_formed():
        for stmt in statements:
            try:
                check_statement(self, stmt["Statement"], stmt.get("Parameters", []))
                reasons.append((None, None, None))
            except DuplicateItem as error:
                reasons.append((error.name, error.message, None))
        if any(code for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        return _original_transaction(self, statements)


_original_transaction: Any = DynamoDBBackend.execute_transaction


# --- tags and time to live ------------------------------------------------------------------------
# moto appends a tag whose key the table already has (two values for one key), takes any ARN and
# answers an unknown table with ResourceNotFound whatever its account, and answers
# UpdateTimeToLive on an unknown table with "ResourceNotFound" (no such error code). DynamoDB
# (API_Tag.html: "If you try to add an existing tag (same key), the existing tag value will be
# updated to the new value";
# API_TagResource.html: ValidationException, ResourceNotFoundException, AccessDeniedException for
# a resource of another account; API_UpdateTimeToLive.html: AttributeName 1 to 255 characters).
_TABLE_ARN = re.compile(r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:(\d{12}):table/[a-zA-Z0-9_.-]{3,255}")


class AccessDenied(DynamodbException):
    def __init__(self, action: str, arn: str) -> None:
        super().__init__(
            ERROR_TYPE_PREFIX + "AccessDeniedException",
            f"User is not authorized to perform: dynamodb:{action} on resource: {arn}",
        )


def _tagged_table(backend: DynamoDBBackend, action: str, arn: str) -> Table:
    match = _TABLE_ARN.fullmatch(arn or "")
    if match is None:
        raise MockValidationException(
            f"Invalid TableArn: Invalid ResourceArn provided as input {arn}"
        )
    if match[1] != backend.account_id:
        raise AccessDenied(action, arn)
    for table in backend.tables.values():
        if table.table_arn == arn:
            return table
    raise ResourceNotFoundException


def tag_resource(self: DynamoDBBackend, arn: str, tags: dict[str, str]) -> None:
    table = _tagged_table(self, "TagResource", arn)
    kept = [tag for tag in table.tags if tag["Key"] not in tags]
    table.tags = kept + [{"Key": key, "Value": value} for key, value in tags.items()]


def untag_resource(self: DynamoDBBackend, arn: str, tag_keys: list[str]) -> None:
    table = _tagged_table(self, "UntagResource", arn)
    table.tags = [tag for tag in table.tags if tag["Key"] not in tag_keys]


def list_tags_of_resource(self: DynamoDBBackend, table_arn: str) -> list[dict[str, str]]:
    return _tagged_table(self, "ListTagsOfResource", table_arn).tags


def _checked_ttl(original: Callable[..., Any]) -> Callable[..., Any]:
    def update_time_to_live(self: DynamoDBBackend, table_name: str, ttl_spec: dict) -> None:
        if ttl_spec.get("AttributeName") == "":
            raise MockValidationException(
                "1 validation error detected: Value '' at "
                "'timeToLiveSpecification.attributeName' failed to satisfy constraint: "
                "Member must have length greater than or equal to 1"
            )
        self.get_table(table_name)  # ResourceNotFoundException, as DynamoDB names it
        original(self, table_name, ttl_spec)

    return update_time_to_live


# --- size() and begins_with on binary values ------------------------------------------------------
# moto keeps a binary value as its base64 text: size() counted the text's characters and
# begins_with matched strings alone; size() of a missing attribute raised inside the server (a
# 500). DynamoDB (developer guide, "Condition and filter expressions", functions): size of a
# binary is its number of bytes, begins_with takes a binary prefix of a binary, and a function
# of an attribute the item does not have makes the condition false.
def _bytes(value: Any) -> bytes:
    return base64.b64decode(value) if isinstance(value, str) else bytes(value)


def _size(original: Callable[..., Any]) -> Callable[..., Any]:
    def expr(self: FuncSize, item: Item | None) -> int | None:
        kind = self.attr.get_type(item)
        if kind is None:
            return None  # every comparison with it is false
        if kind == "B":
            return len(_bytes(self.attr.expr(item)))
        return original(self, item)

    return expr


def _begins_with(original: Callable[..., Any]) -> Callable[..., Any]:
    def expr(self: FuncBeginsWith, item: Item | None) -> bool:
        if self.attr.get_type(item) == self.substr.get_type(item) == "B":
            return _bytes(self.attr.expr(item)).startswith(_bytes(self.substr.expr(item)))
        return original(self, item)

    return expr
