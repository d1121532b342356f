"""DynamoDB writes (emulator/services/dynamodb.py), moto in process: TransactWriteItems checked
whole under one write lock, UpdateItem's stream records."""

import threading

import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models import dynamodb_backends

from emulator.services import dynamodb
from tests.unit.emulator.support import ACCOUNT, REGION, client

pytestmark = pytest.mark.usefixtures("moto_patched")


class Table:
    def __init__(self, name: str = "table", items: int = 0):
        self.name = name
        self.ddb = client("dynamodb")
        self.stream_arn = self.ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
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
