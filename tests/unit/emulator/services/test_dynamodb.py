"""DynamoDB writes (emulator/services/dynamodb.py), moto in process: TransactWriteItems checked
whole under one write lock, UpdateItem's stream records, condition and update expressions parsed
once."""

import contextlib
import threading
import uuid

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords
from moto.dynamodb.parsing.validators import ActionCountValidator, UpdateExpressionValidator

from emulator.process import ACCOUNT, REGION
from emulator.services import dynamodb, patching
from tests.unit.emulator.support import STREAM_OF_BOTH_IMAGES, client, pk_sk_table, pk_table

pytestmark = pytest.mark.usefixtures("moto_patched")


class Table:
    def __init__(self, name: str = "table", items: int = 0):
        self.name = name
        self.ddb = client("dynamodb")
        self.stream_arn = self.ddb.create_table(
            **pk_table(name, StreamSpecification=STREAM_OF_BOTH_IMAGES)
        )["TableDescription"]["LatestStreamArn"]
        self.backend = dynamodb_backends[ACCOUNT][REGION]
        table = self.backend.get_table(name)
        for i in range(items):  # straight into moto: a big table without thousands of calls
            table.put_item({"pk": {"S": f"bulk-{i:05d}"}, "v": {"N": str(i)}})
        self.streams = client("dynamodbstreams")

    @property
    def model(self):
        return self.backend.tables[self.name]

    def put(self, pk: str, **attrs: str) -> None:
        item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
        self.ddb.put_item(TableName=self.name, Item=item)

    def get(self, pk: str) -> dict | None:
        return self.ddb.get_item(TableName=self.name, Key={"pk": {"S": pk}}).get("Item")

    def latest_iterator(self) -> dict[str, str]:
        """A LATEST iterator per shard (the stream has several)."""
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        return {
            shard["ShardId"]: self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
            for shard in shards
        }

    def raw_records(self, iterators: dict[str, str]) -> list[dict]:
        """Every shard's records after its iterator, in sequence-number order (each iterator
        moves on)."""
        got = []
        for shard, iterator in iterators.items():
            response = self.streams.get_records(ShardIterator=iterator)
            iterators[shard] = response["NextShardIterator"]
            got += response["Records"]
        return sorted(got, key=lambda r: int(r["dynamodb"]["SequenceNumber"]))

    def records(self, iterators: dict[str, str]) -> list[tuple[str, str]]:
        return [
            (r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in self.raw_records(iterators)
        ]

    def transact(self, *actions: dict) -> dict:
        return self.ddb.transact_write_items(TransactItems=list(actions))


def put(table: str, pk: str, **extra) -> dict:
    return {"Put": {"TableName": table, "Item": {"pk": {"S": pk}, "v": {"S": "new"}}, **extra}}


def test_a_failing_condition_cancels_the_transaction_and_writes_nothing(moto_in_process):
    table = Table()
    table.put("existing", v="old")
    model, shard = table.model, table.model.stream_shard
    iterator = table.latest_iterator()
    with pytest.raises(ClientError) as cancelled:
        table.transact(
            put(table.name, "fresh"),
            {
                "Update": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "existing"}},
                    "UpdateExpression": "SET v = :v",
                    "ExpressionAttributeValues": {":v": {"S": "changed"}},
                }
            },
            {
                "Delete": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "other"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        )
    error = cancelled.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in error["CancellationReasons"]] == [
        "None",
        "None",
        "ConditionalCheckFailed",
    ]
    assert table.get("fresh") is None
    assert table.get("existing")["v"] == {"S": "old"}
    assert table.model is model  # no table copies swapped in
    assert table.model.stream_shard is shard
    assert table.records(iterator) == []  # nothing of the cancelled transaction
    table.put("later")
    assert table.records(iterator) == [("INSERT", "later")]  # the old iterator still reads


def test_condition_check_failure_returns_the_item_with_all_old(moto_in_process):
    table = Table()
    table.put("existing", v="old")
    with pytest.raises(ClientError) as cancelled:
        table.transact(
            put(table.name, "fresh"),
            {
                "ConditionCheck": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "existing"}},
                    "ConditionExpression": "v = :want",
                    "ExpressionAttributeValues": {":want": {"S": "something else"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": table.name,
                    "Item": {"pk": {"S": "unconditional"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
    reasons = cancelled.value.response["CancellationReasons"]
    assert reasons[0] == {"Code": "None"}
    assert reasons[1]["Code"] == "ConditionalCheckFailed"
    assert reasons[1]["Item"] == {"pk": {"S": "existing"}, "v": {"S": "old"}}
    assert reasons[2] == {"Code": "None"}
    assert table.get("fresh") is None
    assert table.get("unconditional") is None


def test_a_successful_transaction_applies_every_action_with_its_stream_records(moto_in_process):
    table = Table()
    table.put("updated", v="old")
    table.put("deleted", v="old")
    table.put("checked", v="ok")
    iterator = table.latest_iterator()
    table.transact(
        put(table.name, "inserted", ConditionExpression="attribute_not_exists(pk)"),
        {
            "Update": {
                "TableName": table.name,
                "Key": {"pk": {"S": "updated"}},
                "UpdateExpression": "SET v = :v",
                "ConditionExpression": "v = :old",
                "ExpressionAttributeValues": {":v": {"S": "new"}, ":old": {"S": "old"}},
            }
        },
        {"Delete": {"TableName": table.name, "Key": {"pk": {"S": "deleted"}}}},
        {
            "ConditionCheck": {
                "TableName": table.name,
                "Key": {"pk": {"S": "checked"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
    )
    assert table.get("inserted")["v"] == {"S": "new"}
    assert table.get("updated")["v"] == {"S": "new"}
    assert table.get("deleted") is None
    assert table.records(iterator) == [
        ("INSERT", "inserted"),
        ("MODIFY", "updated"),
        ("REMOVE", "deleted"),
    ]


def test_a_transactions_puts_land_in_a_range_keyed_table_with_their_stream_records(
    moto_in_process,
):
    """Each Put's item is stored as the transaction checked it: a new item (INSERT), a
    changed one (MODIFY, both images), an unchanged one (no record, as DynamoDB Streams)."""
    ddb, streams = client("dynamodb"), client("dynamodbstreams")
    stream_arn = ddb.create_table(
        **pk_sk_table("ranged", StreamSpecification=STREAM_OF_BOTH_IMAGES)
    )["TableDescription"]["LatestStreamArn"]

    def item(sk: str, v: str) -> dict:
        return {"pk": {"S": "caller"}, "sk": {"S": sk}, "v": {"S": v}}

    ddb.put_item(TableName="ranged", Item=item("changed", "old"))
    ddb.put_item(TableName="ranged", Item=item("same", "kept"))
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    iterators = [
        streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
        )["ShardIterator"]
        for shard in shards
    ]
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "ranged", "Item": item("changed", "new")}},
            {"Put": {"TableName": "ranged", "Item": item("same", "kept")}},
            {
                "Put": {
                    "TableName": "ranged",
                    "Item": item("inserted", "new"),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
    )
    stored = ddb.query(
        TableName="ranged",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "caller"}},
    )["Items"]
    assert sorted((i["sk"]["S"], i["v"]["S"]) for i in stored) == [
        ("changed", "new"),
        ("inserted", "new"),
        ("same", "kept"),
    ]
    records = sorted(
        (r for it in iterators for r in streams.get_records(ShardIterator=it)["Records"]),
        key=lambda r: int(r["dynamodb"]["SequenceNumber"]),
    )
    assert [
        (
            r["eventName"],
            r["dynamodb"]["Keys"]["sk"]["S"],
            r["dynamodb"].get("OldImage", {}).get("v"),
            r["dynamodb"]["NewImage"]["v"],
        )
        for r in records
    ] == [
        ("MODIFY", "changed", {"S": "old"}, {"S": "new"}),
        ("INSERT", "inserted", None, {"S": "new"}),
    ]


def test_a_cancelled_transaction_on_a_big_table_copies_nothing(moto_in_process):
    table = Table(items=3000)
    model, shard, items = table.model, table.model.stream_shard, table.model.items
    iterator = table.latest_iterator()
    for _ in range(3):
        with pytest.raises(ClientError, match="TransactionCanceled"):
            table.transact(
                put(table.name, "bulk-00001", ConditionExpression="attribute_not_exists(pk)")
            )
    assert table.model is model
    assert table.model.items is items
    assert table.model.stream_shard is shard
    assert len(table.model.items) == 3000
    table.transact(put(table.name, "bulk-99999"))
    assert table.records(iterator) == [("INSERT", "bulk-99999")]


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (
            lambda t: [put(t, "same"), {"Delete": {"TableName": t, "Key": {"pk": {"S": "same"}}}}],
            "multiple operations on one item",
        ),
        (lambda t: [put(t, f"k{i}") for i in range(101)], "less than or equal to 100"),
        (
            lambda t: [
                put(t, "first"),
                {
                    "Update": {
                        "TableName": t,
                        "Key": {"pk": {"S": "second"}},
                        "UpdateExpression": "SET v = v + :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ],
            "",
        ),
    ],
)
def test_an_invalid_transaction_is_refused_and_writes_nothing(moto_in_process, actions, message):
    table = Table()
    table.put("second", v="a string")
    model = table.model
    iterator = table.latest_iterator()
    with pytest.raises(ClientError) as refused:
        table.transact(*actions(table.name))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert message in refused.value.response["Error"]["Message"]
    assert table.get("first") is None
    assert table.get("same") is None
    assert table.get("second")["v"] == {"S": "a string"}
    assert table.model is model
    assert table.records(iterator) == []


def test_no_write_lands_between_a_transactions_checks_and_its_writes(moto_in_process, monkeypatch):
    table = Table()
    checking, release = threading.Event(), threading.Event()
    original = dynamodb.get_filter_expression

    def slow_check(*args, **kwargs):
        checking.set()
        release.wait(5)
        return original(*args, **kwargs)

    monkeypatch.setattr(dynamodb, "get_filter_expression", slow_check)
    outcome = {}

    def transaction():
        try:
            table.transact(put(table.name, "k", ConditionExpression="attribute_not_exists(pk)"))
            outcome["transaction"] = "applied"
        except ClientError as error:
            outcome["transaction"] = error.response["Error"]["Code"]

    def concurrent_put():
        table.put("k", v="concurrent")
        outcome["put"] = "done"

    first = threading.Thread(target=transaction)
    first.start()
    assert checking.wait(5), "the transaction never checked its condition"
    second = threading.Thread(target=concurrent_put)
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waits for the transaction
    release.set()
    first.join(5)
    second.join(5)
    assert outcome == {"transaction": "applied", "put": "done"}
    assert table.get("k")["v"] == {"S": "concurrent"}  # the put came after the transaction


def test_update_item_creating_an_item_writes_one_insert(moto_in_process):
    table = Table()
    iterator = table.latest_iterator()
    for _ in range(2):
        table.ddb.update_item(
            TableName=table.name,
            Key={"pk": {"S": "u"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    records = table.raw_records(iterator)
    assert [r["eventName"] for r in records] == ["INSERT"]  # the repeat changed nothing
    assert records[0]["dynamodb"]["NewImage"] == {"pk": {"S": "u"}, "v": {"N": "1"}}


@pytest.mark.parametrize("action", ["put_item", "transact_write_items"])
def test_an_item_over_the_size_limit_is_refused_and_one_under_it_stored(moto_in_process, action):
    """Items are built in linear time (one size sum, not one per attribute): the limit stays
    moto's, over it refused, under it stored, in a single write and inside a transaction."""
    table = Table()
    chunk = "x" * 100_000

    def write(pk: str, attributes: int) -> None:
        item = {"pk": {"S": pk}, **{f"a{i}": {"S": chunk} for i in range(attributes)}}
        if action == "put_item":
            table.ddb.put_item(TableName=table.name, Item=item)
        else:
            table.ddb.transact_write_items(
                TransactItems=[{"Put": {"TableName": table.name, "Item": item}}]
            )

    write("fits", 4)  # 400,014 bytes
    assert len(table.get("fits")) == 5
    with pytest.raises(ClientError) as refused:
        write("too-big", 5)  # 500,017 bytes
    assert "Item size has exceeded the maximum allowed size" in str(refused.value)
    assert table.get("too-big") is None


# --- condition expressions parsed once ------------------------------------------------------------
class _MotoParser(ConditionExpressionParser):
    """moto's own parser, as it was before the patches."""

    parse = patching.original(ConditionExpressionParser, "parse")
    _make_operand = patching.original(ConditionExpressionParser, "_make_operand")


_PATHS = st.sampled_from(["a", "b", "#n", "a.c", "l[1]"])
_VALUES = st.sampled_from([":v0", ":v1", ":v2"])
_OPERANDS = st.one_of(_PATHS, _VALUES, _PATHS.map(lambda path: f"size({path})"))


def _conditions() -> st.SearchStrategy[str]:
    simple = st.one_of(
        st.tuples(_OPERANDS, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), _OPERANDS).map(
            " ".join
        ),
        _PATHS.map(lambda path: f"attribute_exists({path})"),
        _PATHS.map(lambda path: f"attribute_not_exists({path})"),
        st.tuples(_PATHS, _VALUES).map(lambda pair: f"begins_with({pair[0]}, {pair[1]})"),
        st.tuples(_PATHS, _VALUES).map(lambda pair: f"contains({pair[0]}, {pair[1]})"),
        st.tuples(_OPERANDS, _VALUES, _VALUES).map(lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
        st.tuples(_OPERANDS, st.lists(_VALUES, min_size=1, max_size=3)).map(
            lambda t: f"{t[0]} IN ({', '.join(t[1])})"
        ),
    )
    return st.recursive(
        simple,
        lambda inner: st.one_of(
            inner.map(lambda c: f"NOT {c}"),
            inner.map(lambda c: f"({c})"),
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(" ".join),
        ),
        max_leaves=5,
    )


_SCALARS = st.one_of(
    st.sampled_from(["", "x", "xy", "y"]).map(lambda s: {"S": s}),
    st.integers(-2, 2).map(lambda n: {"N": str(n)}),
)
_EXPRESSION_VALUES = st.fixed_dictionaries({":v0": _SCALARS, ":v1": _SCALARS, ":v2": _SCALARS})
_ITEMS = st.fixed_dictionaries(
    {},
    optional={
        "a": _SCALARS,
        "b": _SCALARS,
        "n": _SCALARS,
        "l": st.lists(_SCALARS, max_size=3).map(lambda values: {"L": values}),
    },
)


def _outcome(parser_class: type, expression: str, values: dict, items: list[dict]) -> tuple:
    """What a parse gives: the condition's answer on each item (or the error), the names and
    values it found; or the parse's error."""
    parser = parser_class(expression, {"#n": "n"}, values)
    try:
        condition = parser.parse()
    except Exception as error:
        return ("parse failed", type(error).__name__, str(error))
    answers = []
    for attrs in items:
        try:
            answers.append(condition.expr(Item(DynamoType({"S": "k"}), None, attrs)))
        except Exception as error:
            answers.append((type(error).__name__, str(error)))
    return answers, parser.expr_attr_names_found, parser.expr_attr_values_found


@settings(max_examples=300, deadline=None)
@given(_conditions(), _EXPRESSION_VALUES, _EXPRESSION_VALUES, st.lists(_ITEMS, max_size=4))
def test_a_kept_condition_answers_as_moto_parses_it_with_each_calls_values(
    expression, first, then, items
):
    """The first parse of an expression keeps its tree; a later one with other values answers
    as moto's own parse with those values: the same answer on every item, the same names and
    values found, the same error when it fails."""
    assert _outcome(ConditionExpressionParser, expression, first, items) == _outcome(
        _MotoParser, expression, first, items
    )
    assert _outcome(ConditionExpressionParser, expression, then, items) == _outcome(
        _MotoParser, expression, then, items
    )


def test_a_kept_condition_still_needs_every_value_it_names(moto_in_process):
    """The same expression decides by each write's own values; parsed once with every value
    there, it fails without one of them as moto fails it (a KeyError naming the value, where
    DynamoDB answers a ValidationException: docs/local-stack.md), not from the kept tree."""
    table = Table()

    def put(v: str, ended: str, **values: dict) -> None:
        table.ddb.put_item(
            TableName=table.name,
            Item={"pk": {"S": "k"}, "v": {"S": v}, "ended": {"S": ended}},
            ConditionExpression="attribute_not_exists(pk) OR ended < :ended",
            ExpressionAttributeValues=values,
        )

    put("first", "2026-01-01", **{":ended": {"S": "2026-01-01"}})
    put("newer", "2026-01-02", **{":ended": {"S": "2026-01-02"}})
    with pytest.raises(ClientError) as stale:
        put("older", "2026-01-01", **{":ended": {"S": "2026-01-01"}})
    assert stale.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    with pytest.raises(KeyError, match=":ended"):
        put("no value", "2026-01-03", **{":other": {"S": "2026-01-03"}})
    assert table.get("k")["v"] == {"S": "newer"}


# --- update expressions parsed once ---------------------------------------------------------------
@contextlib.contextmanager
def _moto_update_parsing():
    """moto's own update expression parser and validator passes, as before the patches."""
    with pytest.MonkeyPatch.context() as restore:
        for owner, name in (
            (UpdateExpressionParser, "make"),
            (DepthFirstTraverser, "traverse_node_recursively"),
            (Node, "find_clauses"),
            (Node, "__deepcopy__"),
            (UpdateExpressionValidator, "__init__"),
            (UpdateExpressionValidator, "validate"),
        ):
            original = patching.original(owner, name)
            if original is None:  # moto has none: the patch added it
                restore.delattr(owner, name)
            else:
                restore.setattr(owner, name, original)
        restore.setattr(ReservedKeywords, "KEYWORDS", None)  # moto loads its list again
        yield


_UPDATE_ACTIONS = st.sampled_from(
    [
        "SET a = :s",
        "SET #n = :n",
        "SET data = :s",  # a reserved word
        "SET n2 = n2 + :n",
        "SET a = if_not_exists(a, :s)",
        "SET l = list_append(l, :l)",
        "SET m.k = :s",
        "SET m = :s",  # overlaps m.k
        "SET pk = :s",  # a key attribute
        "REMOVE a",
        "REMOVE l[0]",
        "ADD n2 :n",
        "ADD ss :ss",
        "DELETE ss :ss",
    ]
)
_UPDATE_VALUES = st.fixed_dictionaries(
    {
        ":s": st.sampled_from(["x", "y"]).map(lambda s: {"S": s}),
        ":n": st.integers(-3, 3).map(lambda n: {"N": str(n)}),
        ":l": st.just({"L": [{"S": "e"}]}),
        ":ss": st.sampled_from([["x"], ["x", "y"]]).map(lambda v: {"SS": v}),
    }
)
_UPDATE_ITEMS = st.fixed_dictionaries(
    {},
    optional={
        "a": st.just({"S": "old"}),
        "n2": st.integers(0, 2).map(lambda n: {"N": str(n)}),
        "l": st.just({"L": [{"S": "first"}]}),
        "m": st.just({"M": {"k": {"S": "v"}}}),
        "ss": st.just({"SS": ["x"]}),
    },
)


_UPDATE_NAMES = st.sampled_from(["n", "a", "pk"])  # what #n names: its own, a path set, the key


def _updated(ddb, table: str, key: str, item: dict, expression: str, values: list) -> list:
    """The item after each update (or the error of the one that failed), each with its own
    values and its own name for #n."""
    item_key = {"pk": {"S": key}}
    ddb.put_item(TableName=table, Item={**item_key, **item})
    after = []
    for each, name_of_n in values:
        used = {name: value for name, value in each.items() if name in expression}
        try:
            ddb.update_item(
                TableName=table,
                Key=item_key,
                UpdateExpression=expression,
                **({"ExpressionAttributeValues": used} if used else {}),
                **({"ExpressionAttributeNames": {"#n": name_of_n}} if "#n" in expression else {}),
            )
            after.append(ddb.get_item(TableName=table, Key=item_key)["Item"])
        except ClientError as error:
            after.append(error.response["Error"])
    return after


@pytest.fixture
def update_tables(moto_in_process):
    """A table for the kept parse, one for moto's own, both in process for the whole test."""
    ddb = client("dynamodb")
    for table in ("kept", "moto"):
        ddb.create_table(**pk_table(table))
    return ddb


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(_UPDATE_ACTIONS, min_size=1, max_size=3, unique=True),
    _UPDATE_ITEMS,
    st.lists(st.tuples(_UPDATE_VALUES, _UPDATE_NAMES), min_size=2, max_size=2),
)
def test_a_kept_update_expression_updates_as_moto_parses_it(update_tables, actions, item, values):
    """An expression parsed once and kept (its second use here), its checks of clauses, paths
    and keys skipped once they passed with the same names, updates an item exactly as moto's own
    parser and validators do, or fails with the same error."""
    expression = " ".join(actions)
    key = uuid.uuid4().hex  # an item of its own in each table
    kept = _updated(update_tables, "kept", key, item, expression, values)
    with _moto_update_parsing():
        assert _updated(update_tables, "moto", key, item, expression, values) == kept


def test_an_updates_clause_path_and_key_checks_run_again_only_for_other_names(
    update_tables, monkeypatch
):
    """The checks that read only the expression, its names and the table's keys run until they
    pass once with those names; other names (here one that makes #n the key) meet them again."""
    checked = []
    traverse = ActionCountValidator.traverse

    def counted(self, node):
        checked.append(node)
        return traverse(self, node)

    monkeypatch.setattr(ActionCountValidator, "traverse", counted)
    expression = f"SET #n = :n ADD counted_{uuid.uuid4().hex} :n"  # an expression of its own
    update = {"TableName": "kept", "Key": {"pk": {"S": "k"}}, "UpdateExpression": expression}
    values = {":n": {"N": "1"}}
    for _ in range(3):
        update_tables.update_item(
            **update, ExpressionAttributeNames={"#n": "n"}, ExpressionAttributeValues=values
        )
    assert len(checked) == 1
    with pytest.raises(ClientError, match="Cannot update attribute pk"):
        update_tables.update_item(
            **update, ExpressionAttributeNames={"#n": "pk"}, ExpressionAttributeValues=values
        )
    assert len(checked) == 2
