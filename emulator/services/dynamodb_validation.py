"""DynamoDB's request validation where moto 5.2.6 accepts what DynamoDB refuses, and its numbers
as DynamoDB stores them.

Every item request of the DynamoDB handler (and CreateTable's name) is checked before moto acts
on it, in this order (each refusal a ValidationException unless said otherwise, as boto3 users
see it from AWS):

- the parameters' constraints in the API reference, every violation in one message ("2
  validation errors detected: ...; ..."): TableName given and not empty; ReturnValues,
  ReturnConsumedCapacity, ReturnItemCollectionMetrics and Select in their enumerations; Query's
  and Scan's Limit at least 1; TransactItems 1 to 100 (TransactGetItems too: moto takes 25),
  PartiQL's Statements 1 to 25 and TransactStatements 1 to 100; BatchGetItem and
  BatchWriteItem's RequestItems present ("The requestItems parameter is required for ..."),
  at most 100 keys a table in BatchGetItem;
- table names: 3-255 characters of ``[a-zA-Z0-9_.-]`` (a table ARN is left to moto);
- UpdateTable: capacity units at least 1, none with PAY_PER_REQUEST, a change of a provisioned
  table's throughput that changes something;
- expressions: every ``#name`` of a key condition, filter, condition or projection defined
  ("An expression attribute name used in the document path is not defined"), a projection of
  names, ``.``, ``[n]`` and commas alone ("Syntax error; token: ..."), in transactions and
  batches too;
- CreateTable: TableName present, AttributeType one of B, N, S, no key attribute named twice,
  index names unique, a local secondary index only on a table with a sort key and with the
  table's partition key;
- the rules between parameters: a Key of exactly the table's key attributes ("The provided key
  element does not match the schema"; in a transaction, TransactionCanceledException with that
  action's reason ValidationError), a non-empty KeyConditionExpression, Scan's Segment below
  TotalSegments (both named), ExpressionAttributeValues on PutItem / DeleteItem only beside a
  ConditionExpression; NULL only true, a binary set not empty ("Binary sets should not be
  empty"); UpdateItem's unused names or values and empty UpdateExpression reported without
  moto's "1 validation error detected:" count (DynamoDB counts only constraint violations);
- an expression beside its legacy parameter (ConditionExpression with Expected,
  KeyConditionExpression with KeyConditions, FilterExpression with QueryFilter/ScanFilter,
  ProjectionExpression with AttributesToGet, any expression with ConditionalOperator);
- every attribute value, wherever it is (items, keys, expression values; nested in lists and
  maps): no empty set, no duplicate in a set (numbers compared by value), numbers of at most 38
  significant digits within 1E-130..9.99E+125 in magnitude; numbers are stored normalised
  (``00042`` -> ``42``, ``1.50`` -> ``1.5``, ``1E2`` -> ``100``), so they come back so and a key
  written as ``042`` is the item of ``42``; an update's arithmetic works at 38 digits and stores
  its result so (``1.5 + 1.5`` is ``3``);
- the legacy parameters as the expressions they stand for: AttributesToGet as a
  ProjectionExpression (moto ignored it), Expected with ConditionalOperator as a
  ConditionExpression (moto read OR as AND); AttributeUpdates may not name a key attribute;
- BatchWriteItem: at most 25 requests, no two for one item;
- TransactGetItems: no two reads of one item;
- TransactWriteItems: at most 4 MB of items in all; a ClientRequestToken reused within 10 minutes
  with another payload is refused (IdempotentParameterMismatchException), with the same payload
  the call succeeds without writing again.

moto itself refuses (left to it): more than 100 transaction actions or two on one item (with
emulator/services/dynamodb.py), an item over 400 KB, an unparsable number, a number below 1E-130.

The rules are DynamoDB's documented ones (each operation's page of the API reference for the
parameters' constraints, https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/):
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html
(names, numbers, sets), .../developerguide/ServiceQuotas.html (25 requests, 4 MB, 100 actions),
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
(ClientRequestToken: 10 minutes, IdempotentParameterMismatch),
.../developerguide/Expressions.html / LegacyConditionalParameters.html (no mixing).
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import time
from collections.abc import Callable
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import Any

from moto.core.responses import ActionResult
from moto.dynamodb import responses as dynamodb_responses
from moto.dynamodb.exceptions import (
    DynamodbException,
    MockValidationException,
    TransactionCanceledException,
)
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.responses import DynamoHandler

from emulator.services import patching
from emulator.services.dynamodb import DYNAMODB_LOCK

_CHECKED_ACTIONS = (
    "create_table",
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "batch_get_item",
    "transact_write_items",
    "transact_get_items",
    "query",
    "scan",
    "batch_execute_statement",
    "execute_transaction",
    "update_table",
)
_TABLE_NAME = re.compile(r"[a-zA-Z0-9_.-]+")
_MAX_BATCH_WRITES = 25
_MAX_BATCH_READS = 100
_MAX_TRANSACTION_ITEMS = 100
_MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
_TOKEN_WINDOW_SECONDS = 600
_NUMBERS = Context(prec=80)  # wider than any valid number: normalising never rounds
# (expression parameter, legacy parameters it may not be used with), in DynamoDB's terms.
_EXPRESSION_PAIRS = (
    ("ConditionExpression", ("Expected", "ConditionalOperator")),
    ("KeyConditionExpression", ("KeyConditions",)),
    ("FilterExpression", ("QueryFilter", "ScanFilter", "ConditionalOperator")),
    ("ProjectionExpression", ("AttributesToGet",)),
    ("UpdateExpression", ("AttributeUpdates",)),
)
_SET_TYPES = {"SS": "string", "NS": "number", "BS": "binary"}
_COUNT_OF_ONE = "1 validation error detected: "
_EXPRESSIONS = (
    "KeyConditionExpression",
    "FilterExpression",
    "ConditionExpression",
    "ProjectionExpression",
)
_NAME_PLACEHOLDER = re.compile(r"#[A-Za-z0-9_]+")
_NOT_IN_PROJECTION = re.compile(r"[^A-Za-z0-9_#.\[\],\s]")
_UNCOUNTED_IN_COUNT = tuple(
    _COUNT_OF_ONE + message
    for message in (
        "Value provided in ExpressionAttributeNames unused",
        "Value provided in ExpressionAttributeValues unused",
        "Invalid UpdateExpression: The expression can not be empty",
    )
)
# The enumerations of the API reference, in the order DynamoDB's messages list them, and the
# actions that take each (PartiQL's and the batches' ReturnConsumedCapacity are left to moto).
_ENUMS = {
    "ReturnValues": ("NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"),
    "ReturnConsumedCapacity": ("INDEXES", "TOTAL", "NONE"),
    "ReturnItemCollectionMetrics": ("SIZE", "NONE"),
    "Select": ("SPECIFIC_ATTRIBUTES", "COUNT", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES"),
}
_WRITES = ("ReturnValues", "ReturnConsumedCapacity", "ReturnItemCollectionMetrics")
_ENUM_ACTIONS: dict[str, tuple[str, ...]] = {
    "put_item": _WRITES,
    "update_item": _WRITES,
    "delete_item": _WRITES,
    "get_item": ("ReturnConsumedCapacity",),
    "query": ("ReturnConsumedCapacity", "Select"),
    "scan": ("ReturnConsumedCapacity", "Select"),
    "create_table": (),
    "update_table": (),
    "batch_write_item": (),
    "batch_get_item": (),
    "transact_write_items": (),
    "transact_get_items": (),
    "execute_statement": (),
    "batch_execute_statement": (),
    "execute_transaction": (),
}
# (list parameter, its element's type, its most members): 1 to that many (API reference).
_LISTS = {
    "transact_write_items": (("TransactItems", "TransactWriteItem", _MAX_TRANSACTION_ITEMS),),
    "transact_get_items": (("TransactItems", "TransactGetItem", _MAX_TRANSACTION_ITEMS),),
    "batch_execute_statement": (("Statements", "BatchStatementRequest", 25),),
    "execute_transaction": (("TransactStatements", "ParameterizedStatement", 100),),
}


class IdempotentParameterMismatch(DynamodbException):
    def __init__(self) -> None:
        super().__init__(
            "IdempotentParameterMismatchException",
            "DynamoDB rejected the request because you retried a request with a different "
            "payload but with an idempotent token that was already used.",
        )


def install() -> None:
    # TransactGetItems takes 100 items as TransactWriteItems does (moto: 25)
    patching.replace(dynamodb_responses, "TRANSACTION_MAX_ITEMS", _MAX_TRANSACTION_ITEMS)
    for name in _CHECKED_ACTIONS:
        patching.replace(DynamoHandler, name, _validated(name, getattr(DynamoHandler, name)))
    patching.replace(
        DynamoHandler, "transact_write_items", _idempotent(DynamoHandler.transact_write_items)
    )
    for name, operation in (("__add__", operator.add), ("__sub__", operator.sub)):
        patching.replace(DynamoType, name, _arithmetic(operation, getattr(DynamoType, name)))
    forget_tokens()


def _arithmetic(
    operation: Callable[[Decimal, Decimal], Decimal], original: Callable[..., Any]
) -> Callable[..., Any]:
    """UpdateExpression's ``+`` / ``-`` (and ADD) on numbers at DynamoDB's 38 digits, the result
    normalised and checked as a stored number (moto: 28 digits, ``1.5 + 1.5`` is ``3.0``)."""

    def method(self: DynamoType, other: DynamoType) -> DynamoType:
        if self.type == other.type == "N":
            with localcontext(_NUMBERS):
                result = operation(Decimal(self.value), Decimal(other.value))
            return DynamoType({"N": normalised_number(str(result))})
        return original(self, other)

    return method


def _validated(action: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Any) -> Any:
        validate_request(action, self.body, self.dynamodb_backend)
        try:
            return original(self)
        except MockValidationException as error:
            # moto counts UpdateItem's expression errors as parameter constraints; DynamoDB
            # counts only "Value ... failed to satisfy constraint" so ("1 validation error ...")
            message = error.exception_msg
            if message.startswith(_UNCOUNTED_IN_COUNT):
                raise MockValidationException(message.removeprefix(_COUNT_OF_ONE)) from None
            raise

    method.__name__ = original.__name__
    return method


def validate_request(action: str, body: dict[str, Any], backend: Any) -> None:
    """Refuse ``body`` as DynamoDB would, normalising its numbers in place."""
    check_parameters(action, body)
    for name in _table_names(action, body):
        _check_table_name(name)
    if action == "create_table":
        _check_key_schemas(body)
    elif action == "update_table":
        _check_throughput_change(body, backend)
    _check_request_rules(action, body, backend)
    for params in [body, *_operations(action, body), *_batch_reads(action, body)]:
        _check_expressions(params)
    _check_expression_mix(body)
    for operation in _operations(action, body):
        _check_expression_mix(operation)
    _check_values(body)
    if action == "batch_write_item":
        _check_batch_write(body, backend)
    elif action == "batch_get_item":
        _check_batch_get(body)
    elif action == "transact_get_items":
        _check_one_read_per_item(body, backend)
    elif action == "transact_write_items":
        _check_transaction_size(body)
    _legacy_as_expressions(action, body, backend)


# --- the request's parameters -----------------------------------------------------------------
def check_parameters(action: str, body: dict[str, Any]) -> None:
    """The constraints of the API's shapes, checked before anything else and reported together
    ("2 validation errors detected: ...; ..."), each naming its parameter in camel case."""
    if action in ("batch_write_item", "batch_get_item") and not body.get("RequestItems"):
        operation = "BatchWriteItem" if action == "batch_write_item" else "BatchGetItem"
        raise MockValidationException(f"The requestItems parameter is required for {operation}")
    if action == "create_table" and body.get("TableName") is None:
        raise MockValidationException(
            "The parameter 'TableName' is required but was not present in the request"
        )
    problems = []
    if action not in ("batch_write_item", "batch_get_item") and not action.startswith(
        ("transact_", "execute_", "batch_execute_")
    ):
        problems += _table_name_problems(body.get("TableName"))
    for parameter, values in _ENUMS.items():
        value = body.get(parameter)
        if value is not None and value not in values and parameter in _ENUM_ACTIONS[action]:
            problems.append(
                f"Value '{value}' at '{_camel(parameter)}' failed to satisfy constraint: "
                f"Member must satisfy enum value set: [{', '.join(values)}]"
            )
    limit = body.get("Limit")
    if action in ("query", "scan") and isinstance(limit, int) and limit < 1:
        # Query's message names Limit as the request does and leaves its value out
        where = "at 'Limit'" if action == "query" else f"'{limit}' at 'limit'"
        problems.append(
            f"Value {where} failed to satisfy constraint: "
            "Member must have value greater than or equal to 1"
        )
    for i, definition in enumerate(body.get("AttributeDefinitions") or []):
        kind = definition.get("AttributeType")
        if action == "create_table" and kind not in ("B", "N", "S"):
            problems.append(
                f"Value '{kind}' at 'attributeDefinitions.{i + 1}.member.attributeType' failed "
                "to satisfy constraint: Member must satisfy enum value set: [B, N, S]"
            )
    for parameter, element, most in _LISTS.get(action, ()):
        members = body.get(parameter)
        if isinstance(members, list) and not 1 <= len(members) <= most:
            bound = "greater than or equal to 1" if not members else f"less than or equal to {most}"
            problems.append(
                f"Value '{_java_list(element, members)}' at '{_camel(parameter)}' failed to "
                f"satisfy constraint: Member must have length {bound}"
            )
    if problems:
        count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''}"
        raise MockValidationException(f"{count} detected: " + "; ".join(problems))


def _check_key_schemas(body: dict[str, Any]) -> None:
    """CreateTable's keys as DynamoDB refuses them (developer guide, "Core components": one
    partition key, at most one sort key; "Local secondary indexes": the table's partition key
    and a sort key, which the table needs too; index names unique within the table)."""
    table_keys = [key.get("AttributeName") for key in body.get("KeySchema") or []]
    if len(set(table_keys)) < len(table_keys):
        raise MockValidationException(
            "Invalid KeySchema: Some index key attribute have no definition"
        )
    indexes = [
        *(body.get("LocalSecondaryIndexes") or []),
        *(body.get("GlobalSecondaryIndexes") or []),
    ]
    names = [index.get("IndexName") for index in indexes]
    for name in names:
        if names.count(name) > 1:
            raise MockValidationException(
                f"One or more parameter values were invalid: Duplicate index name: {name}"
            )
    invalid = "One or more parameter values were invalid: "
    for index in body.get("LocalSecondaryIndexes") or []:
        if len(table_keys) < 2:
            raise MockValidationException(
                f"{invalid}Table KeySchema does not have a range key, which is required when "
                "specifying a LocalSecondaryIndex"
            )
        hash_key = next(
            (
                k.get("AttributeName")
                for k in index.get("KeySchema") or []
                if k.get("KeyType") == "HASH"
            ),
            None,
        )
        if hash_key != table_keys[0]:
            raise MockValidationException(
                f"{invalid}Index KeySchema does not have the same leading hash key as table "
                f"KeySchema for index: {index.get('IndexName')}. index hash key: {hash_key}, "
                f"table hash key: {table_keys[0]}"
            )


def _check_throughput_change(body: dict[str, Any], backend: Any) -> None:
    """UpdateTable's capacity (API_ProvisionedThroughput.html: capacity units at least 1;
    API_UpdateTable.html: PAY_PER_REQUEST takes no provisioned throughput; developer guide,
    "Service quotas": an update must change the throughput)."""
    throughput = body.get("ProvisionedThroughput")
    if not isinstance(throughput, dict):
        return
    problems = [
        f"Value '{throughput[name]}' at 'provisionedThroughput.{_camel(name)}' failed to satisfy "
        "constraint: Member must have value greater than or equal to 1"
        for name in ("ReadCapacityUnits", "WriteCapacityUnits")
        if isinstance(throughput.get(name), int) and throughput[name] < 1
    ]
    if problems:
        count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''}"
        raise MockValidationException(f"{count} detected: " + "; ".join(problems))
    if body.get("BillingMode") == "PAY_PER_REQUEST":
        raise MockValidationException(
            "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
            "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST"
        )
    table = _table_or_none(backend, body.get("TableName", ""))
    if table is None or table.billing_mode == "PAY_PER_REQUEST":
        return
    current = table.throughput or {}
    if all(
        current.get(n) == throughput.get(n) for n in ("ReadCapacityUnits", "WriteCapacityUnits")
    ):
        raise MockValidationException(
            "The provisioned throughput for the table will not change. The requested value "
            "equals the current value. Current ReadCapacityUnits provisioned for the table: "
            f"{current.get('ReadCapacityUnits')}. Requested ReadCapacityUnits: "
            f"{throughput.get('ReadCapacityUnits')}. Current WriteCapacityUnits provisioned for "
            f"the table: {current.get('WriteCapacityUnits')}. Requested WriteCapacityUnits: "
            f"{throughput.get('WriteCapacityUnits')}. Refer to the Amazon DynamoDB Developer "
            "Guide for current limits and how to request higher limits."
        )


def _batch_reads(action: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    if action != "batch_get_item":
        return []
    return [reads for reads in (body.get("RequestItems") or {}).values() if isinstance(reads, dict)]


def _check_expressions(params: dict[str, Any]) -> None:
    """What DynamoDB's expression parser refuses before it reads a name (developer guide,
    "Expression attribute names": every ``#name`` defined in ExpressionAttributeNames;
    "Projection expressions": attribute names, ``.`` and ``[n]`` separated by commas)."""
    names = params.get("ExpressionAttributeNames") or {}
    for parameter in _EXPRESSIONS:
        expression = params.get(parameter)
        if not isinstance(expression, str):
            continue
        for name in _NAME_PLACEHOLDER.findall(expression):
            if name not in names:
                raise MockValidationException(
                    f"Invalid {parameter}: An expression attribute name used in the document "
                    f"path is not defined; attribute name: {name}"
                )
    projection = params.get("ProjectionExpression")
    if isinstance(projection, str) and (bad := _NOT_IN_PROJECTION.search(projection)):
        token = bad.group()
        near = projection[bad.start() : bad.start() + 2]
        raise MockValidationException(
            f'Invalid ProjectionExpression: Syntax error; token: "{token}", near: "{near}"'
        )


def _check_request_rules(action: str, body: dict[str, Any], backend: Any) -> None:
    """The rules between parameters, each with DynamoDB's message (API reference of each
    operation: Key "must provide all of the attributes" of the primary key and no others;
    Scan's Segment "must be less than the value provided for TotalSegments"; an empty
    KeyConditionExpression; ExpressionAttributeValues only beside an expression)."""
    if action in ("get_item", "delete_item", "update_item") and isinstance(body.get("Key"), dict):
        table = _table_or_none(backend, body.get("TableName", ""))
        if table is not None:
            wanted = {n for n in (table.hash_key_attr, table.range_key_attr) if n is not None}
            if set(body["Key"]) != wanted:
                raise MockValidationException("The provided key element does not match the schema")
    if action in ("transact_get_items", "transact_write_items"):
        _check_transaction_keys(body, backend)
    if action == "query" and body.get("KeyConditionExpression") == "":
        raise MockValidationException(
            "Invalid KeyConditionExpression: The expression can not be empty;"
        )
    segment, total = body.get("Segment"), body.get("TotalSegments")
    if (
        action == "scan"
        and isinstance(segment, int)
        and isinstance(total, int)
        and segment >= total
    ):
        raise MockValidationException(
            "The Segment parameter is zero-based and must be less than parameter TotalSegments: "
            f"Segment: {segment} is not less than TotalSegments: {total}"
        )
    if (
        action in ("put_item", "delete_item")
        and body.get("ExpressionAttributeValues")
        and body.get("ConditionExpression") is None
        and not body.get("Expected")
    ):
        raise MockValidationException(
            "ExpressionAttributeValues can only be specified when using expressions: "
            "ConditionExpression is null"
        )


def _check_transaction_keys(body: dict[str, Any], backend: Any) -> None:
    """A transaction's action whose Key is not its table's key cancels the transaction, that
    action's reason ValidationError (API_TransactGetItems.html / API_TransactWriteItems.html:
    TransactionCanceledException, "ValidationError" among the cancellation reasons)."""
    reasons: list[tuple[str | None, str | None, None]] = []
    for op in _operations("transact_get_items", body):
        table = _table_or_none(backend, op.get("TableName", ""))
        key = op.get("Key")
        if table is None or not isinstance(key, dict):
            reasons.append((None, None, None))
            continue
        wanted = {n for n in (table.hash_key_attr, table.range_key_attr) if n is not None}
        if set(key) == wanted:
            reasons.append((None, None, None))
        else:
            reasons.append(
                ("ValidationError", "The provided key element does not match the schema", None)
            )
    if any(code for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)


def _table_or_none(backend: Any, name: str) -> Any:
    try:
        return backend.get_table(name)
    except Exception:  # an unknown table is moto's to refuse
        return None


def _table_name_problems(name: Any) -> list[str]:
    if name is None:
        return ["Value null at 'tableName' failed to satisfy constraint: Member must not be null"]
    if name == "":
        return [
            "Value '' at 'tableName' failed to satisfy constraint: "
            "Member must have length greater than or equal to 1"
        ]
    return []  # the rest by _check_table_name, which also reads the batches' names


def _camel(parameter: str) -> str:
    return parameter[0].lower() + parameter[1:]


def _java_list(element: str, members: list[Any]) -> str:
    """A list as DynamoDB's messages print one: Java's toString of its elements."""
    names = (
        f"com.amazonaws.dynamodb.v20120810.{element}@{i + 0x10000001:x}"
        for i in range(len(members))
    )
    return f"[{', '.join(names)}]"


def _table_names(action: str, body: dict[str, Any]) -> list[str]:
    if action in ("batch_write_item", "batch_get_item"):
        return list(body.get("RequestItems") or {})
    if action.startswith("transact_"):
        return [op.get("TableName", "") for op in _operations(action, body)]
    if action in ("batch_execute_statement", "execute_transaction"):
        return []  # the statements name their tables
    return [body.get("TableName", "")]


def _operations(action: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    if not action.startswith("transact_"):
        return []
    return [op for item in body.get("TransactItems") or [] for op in item.values()]


def _check_table_name(name: str) -> None:
    if name.startswith("arn:"):
        return
    problems = []
    if not _TABLE_NAME.fullmatch(name):
        problems.append("Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
    if len(name) < 3:
        problems.append("Member must have length greater than or equal to 3")
    if len(name) > 255:
        problems.append("Member must have length less than or equal to 255")
    if problems:
        raise MockValidationException(
            f"{len(problems)} validation error{'s' if len(problems) > 1 else ''} detected: "
            + "; ".join(
                f"Value '{name}' at 'tableName' failed to satisfy constraint: {p}" for p in problems
            )
        )


def _check_expression_mix(params: dict[str, Any]) -> None:
    expressions = [e for e, _ in _EXPRESSION_PAIRS if params.get(e) is not None]
    legacy = sorted(
        {
            name
            for expression, names in _EXPRESSION_PAIRS
            if params.get(expression) is not None
            for name in names
            if params.get(name) is not None
        }
    )
    if legacy:
        raise MockValidationException(
            "Can not use both expression and non-expression parameters in the same request: "
            f"Non-expression parameters: {{{', '.join(legacy)}}} "
            f"Expression parameters: {{{', '.join(expressions)}}}"
        )


# --- legacy parameters ----------------------------------------------------------------------------
# Expected (with ConditionalOperator) and AttributesToGet as the expressions they stand for
# (developer guide, "Legacy conditional parameters": Expected -> ConditionExpression,
# AttributesToGet -> ProjectionExpression); moto applies neither as DynamoDB does (AttributesToGet
# is ignored, ConditionalOperator OR read as AND).
_TERMS = {
    "EQ": "{0} = {1}",
    "NE": "{0} <> {1}",
    "LE": "{0} <= {1}",
    "LT": "{0} < {1}",
    "GE": "{0} >= {1}",
    "GT": "{0} > {1}",
    "CONTAINS": "contains({0}, {1})",
    "NOT_CONTAINS": "NOT contains({0}, {1})",
    "BEGINS_WITH": "begins_with({0}, {1})",
    "NULL": "attribute_not_exists({0})",
    "NOT_NULL": "attribute_exists({0})",
    "BETWEEN": "{0} BETWEEN {1} AND {2}",
}


def _legacy_as_expressions(action: str, body: dict[str, Any], backend: Any) -> None:
    if action in ("get_item", "query", "scan"):
        _projection_of(body)
    elif action == "batch_get_item":
        for reads in (body.get("RequestItems") or {}).values():
            _projection_of(reads)
    if action in ("put_item", "update_item", "delete_item") and body.get("Expected"):
        _condition_of(body)
    if action == "update_item" and body.get("AttributeUpdates"):
        _check_no_key_update(body, backend)


def _check_no_key_update(body: dict[str, Any], backend: Any) -> None:
    try:
        table = backend.get_table(body.get("TableName", ""))
    except Exception:  # an unknown table is moto's to refuse
        return
    for name in body["AttributeUpdates"]:
        if name in (table.hash_key_attr, table.range_key_attr):
            raise MockValidationException(
                "One or more parameter values were invalid: Cannot update attribute "
                f"{name}. This attribute is part of the key"
            )


def _projection_of(params: dict[str, Any]) -> None:
    names = params.pop("AttributesToGet", None)
    if not names:
        return
    placeholders = _names(params, names, "#legacy_get")
    params["ProjectionExpression"] = ", ".join(placeholders)


def _names(params: dict[str, Any], names: list[str], prefix: str) -> list[str]:
    placeholders = [f"{prefix}{i}" for i in range(len(names))]
    params.setdefault("ExpressionAttributeNames", {}).update(zip(placeholders, names, strict=True))
    return placeholders


def _condition_of(params: dict[str, Any]) -> None:
    expected: dict[str, Any] = params.pop("Expected")
    joiner = f" {params.pop('ConditionalOperator', 'AND')} "
    values = params.setdefault("ExpressionAttributeValues", {})
    terms = []
    for i, (name, condition) in enumerate(expected.items()):
        (path,) = _names(params, [name], f"#legacy_if{i}_")
        operands = condition.get("AttributeValueList")
        if operands is None and "Value" in condition:
            operands = [condition["Value"]]
        operator_name = condition.get("ComparisonOperator")
        if operator_name is None:  # Exists / Value
            operator_name = "NULL" if condition.get("Exists") is False else "EQ"
        placeholders = [f":legacy_if{i}_{j}" for j in range(len(operands or []))]
        values.update(zip(placeholders, operands or [], strict=True))
        terms.append(_term(operator_name, path, placeholders))
    params["ConditionExpression"] = joiner.join(f"({term})" for term in terms)
    if not values:
        del params["ExpressionAttributeValues"]


def _term(operator_name: str, path: str, values: list[str]) -> str:
    if operator_name == "IN":
        return f"{path} IN ({', '.join(values)})"
    if operator_name not in _TERMS:
        raise MockValidationException(
            f"Unsupported operator on ExpectedAttributeValue: {operator_name}"
        )
    return _TERMS[operator_name].format(path, *values)


# --- attribute values -----------------------------------------------------------------------------
def _check_values(node: Any) -> None:
    """Every attribute value under ``node`` checked, its numbers normalised in place."""
    if isinstance(node, list):
        for child in node:
            _check_values(child)
        return
    if not isinstance(node, dict):
        return
    if len(node) == 1:
        ((kind, value),) = node.items()
        if kind == "N" and isinstance(value, str):
            node["N"] = normalised_number(value)
            return
        if kind in _SET_TYPES and isinstance(value, list):
            _check_set(node, kind, value)
            return
        if kind == "NULL" and value is False:
            raise MockValidationException(
                "One or more parameter values were invalid: "
                "Null attribute value types must have the value of true"
            )
    for child in node.values():
        _check_values(child)


def _check_set(node: dict[str, Any], kind: str, members: list[Any]) -> None:
    if not members:
        empty = (
            "Binary sets should not be empty"
            if kind == "BS"
            else (f"An {_SET_TYPES[kind]} set  may not be empty")
        )
        raise MockValidationException(f"One or more parameter values were invalid: {empty}")
    if kind == "NS" and all(isinstance(m, str) for m in members):
        members = node["NS"] = [normalised_number(m) for m in members]
    if len(set(members)) < len(members):
        raise MockValidationException(
            "One or more parameter values were invalid: "
            f"Input collection [{', '.join(str(m) for m in members)}] contains duplicates."
        )


def normalised_number(text: str) -> str:
    """``text`` as DynamoDB stores it (no leading or trailing zeros, no exponent), refused
    beyond DynamoDB's precision and magnitude; an unparsable one is left for moto to refuse."""
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        return text
    if not number.is_finite():
        return text
    if number.is_zero():
        return "0"
    number = number.normalize(_NUMBERS)
    if len(number.as_tuple().digits) > 38:
        raise MockValidationException(
            "Attempting to store more than 38 significant digits in a Number"
        )
    if number.adjusted() > 125:
        raise MockValidationException(
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if number.adjusted() < -130:
        raise MockValidationException(
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )
    return format(number, "f")


# --- batches and transactions ---------------------------------------------------------------------
def _key_of(backend: Any, table_name: str, attrs: dict[str, Any]) -> tuple[Any, ...] | None:
    try:
        table = backend.get_table(table_name)
    except Exception:  # an unknown table is moto's to refuse
        return None
    names = [n for n in (table.hash_key_attr, table.range_key_attr) if n is not None]
    return table_name, *(tuple(sorted((attrs.get(n) or {}).items())) for n in names)


def _check_batch_write(body: dict[str, Any], backend: Any) -> None:
    requests = body.get("RequestItems") or {}
    for writes in requests.values():
        if len(writes) > _MAX_BATCH_WRITES:
            tables = ", ".join(
                f"{name}={_java_list('WriteRequest', each)}" for name, each in requests.items()
            )
            raise MockValidationException(
                f"1 validation error detected: Value '{{{tables}}}' at 'requestItems' failed to "
                "satisfy constraint: Map value must satisfy constraint: [Member must have length "
                "less than or equal to 25, Member must have length greater than or equal to 1]"
            )
    if sum(len(writes) for writes in requests.values()) > _MAX_BATCH_WRITES:
        raise MockValidationException("Too many items requested for the BatchWriteItem call")
    seen: set[tuple[Any, ...]] = set()
    for table_name, writes in requests.items():
        for write in writes:
            if "PutRequest" in write:
                attrs = write["PutRequest"].get("Item") or {}
            else:
                attrs = (write.get("DeleteRequest") or {}).get("Key") or {}
            key = _key_of(backend, table_name, attrs)
            if key is None:
                continue
            if key in seen:
                raise MockValidationException("Provided list of item keys contains duplicates")
            seen.add(key)


def _check_batch_get(body: dict[str, Any]) -> None:
    for name, reads in (body.get("RequestItems") or {}).items():
        if len(reads.get("Keys") or []) > _MAX_BATCH_READS:
            raise MockValidationException(
                f"1 validation error detected: Value at 'RequestItems.{name}.member.Keys' failed "
                f"to satisfy constraint: Member must have length less than or equal to "
                f"{_MAX_BATCH_READS}"
            )


def _check_one_read_per_item(body: dict[str, Any], backend: Any) -> None:
    seen: set[tuple[Any, ...]] = set()
    for op in _operations("transact_get_items", body):
        key = _key_of(backend, op.get("TableName", ""), op.get("Key") or {})
        if key is None:
            continue
        if key in seen:
            raise MockValidationException(
                "Transaction request cannot include multiple operations on one item"
            )
        seen.add(key)


def _check_transaction_size(body: dict[str, Any]) -> None:
    total = 0
    for item in body.get("TransactItems") or []:
        for op_type, op in item.items():
            attrs = op.get("Item") if op_type == "Put" else op.get("Key")
            total += _item_bytes(attrs or {})
    if total > _MAX_TRANSACTION_BYTES:
        raise MockValidationException("Transaction request cannot be larger than 4 MB")


def _item_bytes(attrs: dict[str, Any]) -> int:
    """DynamoDB's item size: each attribute's name and value in bytes (numbers counted by their
    characters, an upper bound: enough for a limit check)."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in attrs.items())


def _value_bytes(value: dict[str, Any]) -> int:
    kind, inner = next(iter(value.items()), ("NULL", True))
    if kind == "M":
        return 3 + _item_bytes(inner)
    if kind == "L":
        return 3 + sum(_value_bytes(v) for v in inner)
    if kind in ("S", "N", "B"):
        return _length(inner)
    if kind in _SET_TYPES:
        return sum(_length(m) for m in inner)
    return 1  # BOOL, NULL


def _length(scalar: Any) -> int:
    return len(scalar.encode()) if isinstance(scalar, str) else len(scalar)


# --- ClientRequestToken ---------------------------------------------------------------------------
# token -> (a digest of the request without its token, when it completed), oldest first
_tokens: dict[str, tuple[bytes, float]] = {}


def forget_tokens() -> None:
    with DYNAMODB_LOCK:
        _tokens.clear()


def _idempotent(original: Callable[..., Any]) -> Callable[..., Any]:
    def transact_write_items(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if token is None:
            return original(self)
        payload = hashlib.sha256(
            json.dumps(
                {k: v for k, v in self.body.items() if k != "ClientRequestToken"},
                sort_keys=True,
                default=bytes.hex,  # binary values
            ).encode()
        ).digest()
        with DYNAMODB_LOCK:
            now = time.monotonic()
            while _tokens:  # oldest first: a token is added once, when its request completed
                used, (_, at) = next(iter(_tokens.items()))
                if now - at <= _TOKEN_WINDOW_SECONDS:
                    break
                del _tokens[used]
            if token in _tokens:
                if _tokens[token][0] != payload:
                    raise IdempotentParameterMismatch()
                return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
            result = original(self)
            _tokens[token] = (payload, time.monotonic())
            return result

    transact_write_items.__name__ = original.__name__
    return transact_write_items
