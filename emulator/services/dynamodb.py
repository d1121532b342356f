"""moto 5.2.6's DynamoDB writes as DynamoDB makes them: no stream record for a write that changes
nothing, one INSERT for an UpdateItem that creates its item, every write under one lock, and a
TransactWriteItems checked whole before it writes anything; an item built in time linear in its
attributes, a condition or update expression parsed once."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from typing import Any

from moto.dynamodb.comparisons import ConditionExpressionParser, get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    InvalidAttributeTypeError,
    ItemSizeTooLarge,
    ItemSizeToUpdateTooLarge,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import StreamShard
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.parsing.ast_nodes import (
    DepthFirstTraverser,
    Expression,
    Node,
    UpdateExpressionFunction,
)
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords
from moto.dynamodb.parsing.validators import (
    ActionCountValidator,
    OverlappingPathsValidator,
    UpdateExpressionValidator,
    UpdateHashRangeKeyValidator,
)
from moto.dynamodb.responses import DynamoHandler

from emulator.services import patching

log = logging.getLogger("emulator.moto")


def install() -> None:
    _patch_unchanged_put_item_stream_record()
    _patch_dynamodb_writes()
    _patch_item_construction()
    _patch_condition_parsing()
    _patch_update_parsing()


# --- an item built in linear time ----------------------------------------------------------------
# Gap (speed, not behaviour): moto/dynamodb/models/dynamo_type.py Item.__init__ sets each attribute
# through LimitedSizeDict.__setitem__, which sums the sizes of every attribute already there: a
# quadratic cost per item, paid for each item written or validated (3.6% of the CPU of the
# transaction-heavy model, ops and ingest unit tests). Sizes are not negative, so the sum checked
# at the last attribute is the largest: one sum over all of them refuses exactly what moto
# refuses (ItemSizeTooLarge). Later writes to an item's attributes (an update's SET) still go
# through moto's own check.
_MOTO_ITEM_SIZE_LIMIT = 405000  # LimitedSizeDict's own limit (its comment: 409-410 KB measured)


def _patch_item_construction() -> None:
    def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        values = {key: DynamoType(value) for key, value in attrs.items()}
        size = sum(bytesize(key) + value.size() for key, value in values.items())
        if size > _MOTO_ITEM_SIZE_LIMIT:
            raise ItemSizeTooLarge
        self.attrs = LimitedSizeDict()
        dict.update(self.attrs, values)

    patching.replace(Item, "__init__", __init__)


# --- a condition expression parsed once ---------------------------------------------------------
# Gap (speed, not behaviour): moto/dynamodb/comparisons.py ConditionExpressionParser.parse lexes
# and parses the expression on every call (0.3-0.7 ms each for this pipeline's conditions), and a
# conditional write's expression is parsed twice (the handler's validation, then the check, three
# times in a transaction with this module's check). Clients send the same few expressions with
# other values. The syntax tree depends on the expression and its names alone: moto looks each
# ``:value`` up into its leaf, and only ``_make_operand`` reads it. So a tree is kept per
# (expression, names) once moto's own steps built it without error; each parse then checks its
# values as moto's lookup does (a KeyError for the first missing one, in the expression's order)
# and builds the condition from the tree with its own values. A failing parse is never kept: it
# fails again, as moto fails it.
_VALUE = ConditionExpressionParser.Kind.EXPRESSION_ATTRIBUTE_VALUE


class _ParsedCondition:
    __slots__ = ("names_found", "node", "values_found", "values_in_order")

    def __init__(self, parser: Any) -> None:
        nodes = parser._lex_condition_expression()
        nodes = parser._parse_paths(nodes)
        self.values_in_order = tuple(node.text for node in nodes if node.kind == _VALUE)
        nodes = parser._apply_functions(nodes)  # before the comparators, as moto parses
        nodes = parser._apply_comparator(nodes)
        nodes = parser._apply_in(nodes)
        nodes = parser._apply_between(nodes)
        nodes = parser._apply_parens_and_booleans(nodes)
        self.node = nodes[0]
        parser._assert_no_redundant_parentheses(self.node)
        self.names_found = tuple(parser._find_literals(self.node))
        self.values_found = tuple(parser._find_expr_attr_values(self.node))


_MAX_KEPT = 1024  # entries of each kept-parse map: a client's few expressions, with room to spare


def _keep(kept: dict[Any, Any], key: Any, value: Any) -> Any:
    """``kept[key] = value``, the oldest entry dropped once the map holds _MAX_KEPT."""
    if len(kept) >= _MAX_KEPT:
        kept.pop(next(iter(kept)), None)
    kept[key] = value
    return value


_parsed_conditions: dict[tuple[str, tuple[tuple[str, str], ...]], _ParsedCondition] = {}


def _patch_condition_parsing() -> None:
    original_parse = ConditionExpressionParser.parse
    original_operand = ConditionExpressionParser._make_operand

    def parse(self: Any) -> Any:
        expression = self.condition_expression
        if not expression:
            return original_parse(self)
        names = self.expression_attribute_names
        key = (expression, tuple(sorted(names.items())) if names else ())
        parsed = _parsed_conditions.get(key)
        if parsed is None:
            parsed = _keep(_parsed_conditions, key, _ParsedCondition(self))
        else:
            for name in parsed.values_in_order:
                self._lookup_expression_attribute_value(name)
        self.expr_attr_names_found.extend(parsed.names_found)
        self.expr_attr_values_found.extend(parsed.values_found)
        return self._make_op_condition(parsed.node)

    def make_operand(self: Any, node: Any) -> Any:
        if node.kind == _VALUE:  # this parse's value, not the one the kept tree was built with
            node = node._replace(value=self._lookup_expression_attribute_value(node.text))
        return original_operand(self, node)

    patching.replace(ConditionExpressionParser, "parse", parse)
    patching.replace(ConditionExpressionParser, "_make_operand", make_operand)


# --- an update expression parsed once, its validators' passes without rebuilt maps ----------------
# Gap (speed, not behaviour): moto parses an UpdateItem's expression twice (the handler's check of
# the names and values it uses, then the backend; a transaction's Update once more for its check
# here), each time through its tokenizer and recursive-descent parser; and each of the ten passes of
# an UpdateExpressionValidator (moto/dynamodb/parsing/ast_nodes.py DepthFirstTraverser) rebuilds its
# node-type -> processor map twice for every node it visits and asks ABCMeta's isinstance what each
# node is, one of them (ActionCountValidator) through ``Node.find_clauses`` at every node; the
# Validator deep-copies the tree through the pickling protocol; and each path name is looked for in
# a list of DynamoDB's 573 reserved words. The parser's tree is a function of the expression alone
# and nothing changes it: each Validator deep-copies it before its passes (validators.py
# ``Validator.__init__``), the handler only reads it. So a tree is kept per expression; a pass
# resolves each node type's processor once per traverser class (the first type of its map the node's
# type is a subclass of: what moto's ``process`` picks, as none of those types has virtual
# subclasses) and visits the nodes as moto does (children first, in order, each processed node put
# in its parent's place); node types are told apart by a cached subclass check; a node is
# deep-copied attribute by attribute; the reserved words are a set.
# Three of the ten passes (at most one clause of each kind, no path set twice or overlapping, no key
# attribute set) read only the tree, the names and the table's key attributes, and change nothing:
# once a validation with the same three has passed, later validations skip them. A validation that
# fails keeps nothing, so a faulty request meets every pass in moto's order.
_parsed_updates: dict[str, Any] = {}
_SHAPE_CHECKS = (ActionCountValidator, OverlappingPathsValidator, UpdateHashRangeKeyValidator)
_valid_shapes: dict[tuple[Any, ...], None] = {}  # (tree, names, key attributes) that passed


def _patch_update_parsing() -> None:
    original_make = UpdateExpressionParser.__dict__["make"].__func__

    def make(cls: Any, expression: str) -> Any:
        tree = _parsed_updates.get(expression)
        if tree is None:
            # a failing parse raises, and is not kept
            tree = _keep(_parsed_updates, expression, original_make(cls, expression))
        return tree

    original_init = UpdateExpressionValidator.__init__

    def init(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, expression, *args, **kwargs)
        self.shape = (
            expression,
            tuple((self.expression_attribute_names or {}).items()),
            tuple(self.table.table_key_attrs),
        )

    def validate(self: Any) -> Any:
        shape_valid = self.shape in _valid_shapes
        node = self.node_to_validate
        for processor in self.processors:
            if not (shape_valid and isinstance(processor, _SHAPE_CHECKS)):
                node = processor.traverse(node)
        if not shape_valid:
            _keep(_valid_shapes, self.shape, None)
        return node

    patching.replace(UpdateExpressionParser, "make", classmethod(make))
    patching.replace(UpdateExpressionValidator, "__init__", init)
    patching.replace(UpdateExpressionValidator, "validate", validate)
    patching.replace(DepthFirstTraverser, "traverse_node_recursively", _traverse)
    patching.replace(Node, "find_clauses", _find_clauses)
    patching.replace(Node, "__deepcopy__", _deep_copy)
    # moto asks whether each path's name is reserved by a scan of a list of 573 words
    patching.replace(
        ReservedKeywords, "KEYWORDS", frozenset(ReservedKeywords._get_reserved_keywords())
    )


_IS_NODE, _HAS_CLAUSES = 1, 2
_node_kinds: dict[type, int] = {}  # a type -> what it is in moto's tree: _IS_NODE, _HAS_CLAUSES
_NO_HOOK = DepthFirstTraverser.pre_processing_of_child
_UNRESOLVED = object()


def _kind(node_type: type) -> int:
    kind = _node_kinds.get(node_type)
    if kind is None:
        kind = _node_kinds[node_type] = (_IS_NODE if issubclass(node_type, Node) else 0) | (
            _HAS_CLAUSES if issubclass(node_type, Expression | UpdateExpressionFunction) else 0
        )
    return kind


_processors_by_class: dict[tuple[type, type], Any] = {}


def _processor(traverser: Any, node_type: type) -> Any:
    """What the traverser does with a node of this type: moto's ``process`` takes the first of its
    map's types the node is an instance of (none of them has virtual subclasses). A pass's
    traverser is new every call and its map names its own methods, so the choice is kept per
    traverser class as the method's function; a map entry of another kind is looked up each time."""
    key = (type(traverser), node_type)
    function = _processors_by_class.get(key, _UNRESOLVED)
    if function is _UNRESOLVED:
        process = next(
            (p for t, p in traverser._processing_map().items() if issubclass(node_type, t)), None
        )
        if process is not None and getattr(process, "__self__", None) is not traverser:
            return process
        function = _processors_by_class[key] = getattr(process, "__func__", None)
    return None if function is None else function.__get__(traverser)


def _traverse(self: Any, node: Any, child_id: int = -1) -> Any:
    """DepthFirstTraverser.traverse_node_recursively: children first, in order, each processed
    node put in its parent's place; the pre-child hook called only where a pass has one."""
    node_type = type(node)
    if not _kind(node_type) & _IS_NODE:
        return node
    parent = node.parent
    if node.children is not None:
        hook = self.pre_processing_of_child
        hooked = hook.__func__ is not _NO_HOOK
        for index, child in enumerate(node.children):
            if hooked:
                hook(node, index)
            self.traverse_node_recursively(child, index)
    process = _processor(self, node_type)
    if process is not None:
        node = process(node)
        node.parent = parent
        if parent:
            parent.children[child_id] = node
    return node


def _find_clauses(self: Any, clause_types: Any) -> list[Any]:
    """Node.find_clauses: the children of those types, and theirs in expressions and functions."""
    clauses: list[Any] = []
    for child in self.children or []:
        child_type = type(child)
        if child_type in clause_types:
            clauses.append(child)
        elif _kind(child_type) & _HAS_CLAUSES:
            clauses.extend(child.find_clauses(clause_types))
    return clauses


_ATOMIC = frozenset({str, int, bool, float, type(None)})  # what copy.deepcopy returns as it is


def _deep_copy(self: Any, memo: dict[int, Any]) -> Any:
    """copy.deepcopy of a tree node without the pickling protocol it goes through: a twin of the
    same type with deep copies of the attributes (its parent, copied before it, from ``memo``)."""
    twin = object.__new__(type(self))
    memo[id(self)] = twin
    attributes = twin.__dict__
    for name, value in vars(self).items():
        attributes[name] = _copied(value, memo)
    return twin


def _copied(value: Any, memo: dict[int, Any]) -> Any:
    """copy.deepcopy(value, memo) for what a tree holds (names, indexes, child lists, nodes),
    without its dispatch; anything else through copy.deepcopy itself."""
    value_type = type(value)
    if value_type in _ATOMIC:
        return value
    twin = memo.get(id(value))
    if twin is not None:
        return twin
    if value_type is list:
        twin = memo[id(value)] = []
        for element in value:
            twin.append(_copied(element, memo))
        return twin
    if _kind(value_type) & _IS_NODE:
        return _deep_copy(value, memo)
    return copy.deepcopy(value, memo)


# --- stream records of writes that change nothing, and UpdateItem's extra INSERT ------------------
# Gap: moto/dynamodb/models/table.py Table.put_item calls StreamShard.add(old, new) for every
# write, so a PutItem (or UpdateItem) that rewrites an identical item yields a MODIFY record.
# DynamoDB Streams writes a record only when the item actually changed. And moto's
# DynamoDBBackend.update_item creates a missing item by a Table.put_item of its key alone (an
# INSERT record with only the key) before applying the update (a second INSERT): DynamoDB writes
# one INSERT with the new image. The UpdateItem patch (below) sets ``_stream.skip_insert`` so
# that the key-only INSERT is dropped.
_stream = threading.local()


def _patch_unchanged_put_item_stream_record() -> None:
    original = StreamShard.add

    def add(self: Any, old: Any, new: Any) -> None:
        # Item.attrs compare as DynamoDB does: numbers by value, sets in any order (and without
        # serialising both items, as comparing to_json() did).
        if old is not None and new is not None and old.attrs == new.attrs:
            return
        if old is None and getattr(_stream, "skip_insert", False):
            _stream.skip_insert = False  # the key-only item UpdateItem creates first
            return
        original(self, old, new)

    patching.replace(StreamShard, "add", add)


# --- DynamoDB writes: one lock, and TransactWriteItems without table copies -----------------------
# Gap: moto/dynamodb/models/__init__.py DynamoDBBackend.transact_write_items deep-copies every
# table it touches before the transaction (O(table size)) and, when the transaction is cancelled,
# replaces the backend's tables by those copies: shard iterators taken before keep reading the
# discarded table's stream shard (stream readers stall or see records of the cancelled writes).
# And nothing keeps another write from landing between a transaction's checks and its writes
# (the server is threaded). Fix: every DynamoDB write path (PutItem, UpdateItem, DeleteItem,
# BatchWriteItem, TransactWriteItems; the backend methods and the request handlers) runs under one
# re-entrant lock; a transaction checks every action first (the 100-action limit, one action per
# item, each condition against the current item, each Put's item and each Update's expression on
# a copy of its one item) and writes nothing when any fails (TransactionCanceledException with
# the per-action reasons, ConditionalCheckFailed with the item under
# ReturnValuesOnConditionCheckFailure=ALL_OLD), else applies every action through the ordinary
# write paths: stream records only for applied writes, the table objects never replaced.
# UpdateItem also drops the key-only INSERT record of an item it creates (above).
DYNAMODB_LOCK = threading.RLock()
_DYNAMODB_BACKEND_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_DYNAMODB_HANDLER_WRITES = (
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)
_TRANSACTION_ACTIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_MAX_TRANSACTION_ACTIONS = 100


def _locked(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        with DYNAMODB_LOCK:
            return original(*args, **kwargs)

    method.__name__ = original.__name__
    method.__doc__ = original.__doc__
    return method


def _patch_dynamodb_writes() -> None:
    for name in _DYNAMODB_HANDLER_WRITES:
        patching.replace(DynamoHandler, name, _locked(getattr(DynamoHandler, name)))
    for name in ("put_item", "delete_item"):
        patching.replace(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name)))

    original_update = DynamoDBBackend.update_item

    def update_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        with DYNAMODB_LOCK:
            _stream.skip_insert = True
            try:
                return original_update(self, *args, **kwargs)
            finally:
                _stream.skip_insert = False

    patching.replace(DynamoDBBackend, "update_item", update_item)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with DYNAMODB_LOCK:
            if len(transact_items) > _MAX_TRANSACTION_ACTIONS:
                raise TooManyTransactionsException()
            writes, reasons = _check_transaction(self, transact_items)
            if any(code is not None for code, _, _ in reasons):
                raise TransactionCanceledException(reasons)
            for write in writes:
                write()

    patching.replace(DynamoDBBackend, "transact_write_items", transact_write_items)


def _check_transaction(
    backend: Any, transact_items: list[dict[str, Any]]
) -> tuple[list[Callable[[], Any]], list[tuple[Any, Any, Any]]]:
    """Every action checked against the current items, nothing written: (the writes to apply,
    the cancellation reasons as moto's TransactionCanceledException takes them)."""
    targets: set[tuple[str, str]] = set()
    writes: list[Callable[[], Any]] = []
    reasons: list[tuple[Any, Any, Any]] = []
    for action in transact_items:
        if len(action) > 1:
            raise TransactWriteSingleOpException
        try:
            writes.append(_check_action(backend, action, targets))
            reasons.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            raise
        except ConditionalCheckFailed as error:
            reasons.append(
                ("ConditionalCheckFailed", str(error.message), getattr(error, "old_image", None))
            )
        except Exception as error:  # as moto: any other failure is that action's reason
            reasons.append((type(error).__name__, str(error), None))
    return writes, reasons


class _ConditionFailed(ConditionalCheckFailed):
    def __init__(self, old_image: dict[str, Any] | None) -> None:
        super().__init__(item=old_image)
        self.old_image = old_image


def _check_action(
    backend: Any, action: dict[str, Any], targets: set[tuple[str, str]]
) -> Callable[[], Any]:
    op_type, op = next(iter(action.items()))
    if op_type not in _TRANSACTION_ACTIONS:
        raise ValueError("Unsupported transaction operation")
    table = backend.get_table(op["TableName"])
    if op_type == "Put":
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
    else:
        key = op["Key"]
    target = (table.name, str(dict(sorted(key.items()))))
    if target in targets:
        raise MultipleTransactionsException()
    targets.add(target)
    current = backend.get_item(op["TableName"], key)
    condition = op.get("ConditionExpression")
    if condition is not None:
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        if not get_filter_expression(condition, names, values).expr(current):
            all_old = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
            raise _ConditionFailed(current.to_json()["Attributes"] if all_old and current else None)
    return _planned_write(backend, table, op_type, op, key=key, current=current)


def _planned_write(
    backend: Any, table: Any, op_type: str, op: dict[str, Any], *, key: dict[str, Any], current: Any
) -> Callable[[], Any]:
    """Validate one action without writing (raising what the write would raise) and return the
    write. Conditions are checked already: the writes go without them."""
    table_name = op["TableName"]
    if op_type == "Put":
        item = _validate_put(table, op["Item"])
        return lambda: _store(table, item, current)
    if op_type == "Delete":
        return lambda: backend.delete_item(table_name, key)
    if op_type == "Update":
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        expression = op["UpdateExpression"]
        _try_update(backend, table, key, current, expression=expression, names=names, values=values)
        return lambda: backend.update_item(
            table_name,
            key,
            update_expression=expression,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    return lambda: None  # ConditionCheck


def _validate_put(table: Any, attrs: dict[str, Any]) -> Item:
    """The checks of moto's Table.put_item, without the write: the item to store."""
    for name in (table.hash_key_attr, table.range_key_attr):
        if name is not None and name not in attrs:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {name} in the item"
            )
    hash_value = DynamoType(attrs[table.hash_key_attr])
    if hash_value.type != table.hash_key_type:
        raise InvalidAttributeTypeError(
            table.hash_key_attr, expected_type=table.hash_key_type, actual_type=hash_value.type
        )
    range_value = None
    if table.range_key_attr is not None:
        range_value = DynamoType(attrs[table.range_key_attr])
        if range_value.type != table.range_key_type:
            raise InvalidAttributeTypeError(
                table.range_key_attr,
                expected_type=table.range_key_type,
                actual_type=range_value.type,
            )
    table._validate_item_types(attrs)
    table._validate_key_sizes(attrs)
    return Item(hash_value, range_value, attrs)  # the item size limit


def _store(table: Any, item: Item, current: Item | None) -> None:
    """What moto's Table.put_item does once its checks pass (the transaction made them, and the
    lock keeps ``current`` current): the item in its place and its stream record."""
    if table.range_key_attr is not None:
        table.items[item.hash_key][item.range_key] = item
    else:
        table.items[item.hash_key] = item
    if table.stream_shard is not None:
        table.stream_shard.add(current, item)


def _try_update(
    backend: Any,
    table: Any,
    key: dict[str, Any],
    current: Any,
    *,
    expression: str,
    names: dict[str, Any] | None,
    values: dict[str, Any] | None,
) -> None:
    """moto's UpdateItem validation and execution, on a copy of the one item it touches."""
    ast = UpdateExpressionParser.make(expression)
    if current is None:
        hash_value, range_value = backend.get_keys_value(table, key)
        probe = Item(hash_value, range_value, {k: v for k, v in key.items()})
    else:
        probe = copy.deepcopy(current)
    validated = UpdateExpressionValidator(
        ast,
        expression_attribute_names=names,
        expression_attribute_values=values,
        item=probe,
        table=table,
    ).validate()
    validated.normalize()
    try:
        UpdateExpressionExecutor(validated, probe, names).execute()
    except ItemSizeTooLarge as error:
        raise ItemSizeToUpdateTooLarge() from error
