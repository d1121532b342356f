"""DynamoDB stream records and shards (emulator/services/dynamodbstreams.py), moto in process
through boto3's dynamodbstreams client and the engine's in-process reader
(emulator.delivery.sources.StreamSource): EMULATOR_STREAM_SHARDS shards (default 4), one partition
key's records in one shard in write order, records shaped as AWS sends them (eventVersion 1.1,
SizeBytes by DynamoDB's item-size rule)."""

import math
from collections import defaultdict
from datetime import datetime

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from emulator.delivery.sources import StreamSource
from emulator.process import REGION
from emulator.services import dynamodbstreams
from harness.in_process import create_stream_table
from harness.polling import eventually

KEYS = [f"customer-{n}" for n in range(10)]
ITEMS_PER_KEY = 4  # 40 items
WRITES_PER_ITEM = 3  # INSERT, MODIFY, MODIFY


NO_RETRIES = Config(retries={"total_max_attempts": 1})

pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture(scope="module")
def clients(module_credentials):
    """boto3 clients, made once (mock_aws intercepts every client while it is active)."""
    return (
        boto3.client("dynamodb", region_name=REGION),
        boto3.client("dynamodbstreams", region_name=REGION),
    )


class Aws:
    def __init__(self, clients):
        self.ddb, self.streams = clients

    def table(self, name: str = "contacts") -> str:
        return create_stream_table(self.ddb, name)

    def shard_ids(self, arn: str) -> list[str]:
        description = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]
        return [shard["ShardId"] for shard in description["Shards"]]

    def records(self, arn: str, shard_id: str, limit: int = 1000) -> list[dict]:
        """Every record of a shard, through GetShardIterator TRIM_HORIZON and GetRecords."""
        iterator = self.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = []
        while True:
            page = self.streams.get_records(ShardIterator=iterator, Limit=limit)
            if not page["Records"]:
                return records
            records.extend(page["Records"])
            iterator = page["NextShardIterator"]

    def by_shard(self, arn: str) -> dict[str, list[dict]]:
        return {shard_id: self.records(arn, shard_id) for shard_id in self.shard_ids(arn)}


@pytest.fixture
def aws(clients, monkeypatch):
    monkeypatch.delenv(dynamodbstreams.SHARDS_ENV, raising=False)
    with mock_aws():
        yield Aws(clients)


def item(pk: str, sk: str, version: int, payload: str = "") -> dict:
    return {
        "pk": {"S": pk},
        "sk": {"S": sk},
        "version": {"N": str(version)},
        "payload": {"S": payload},
        "blob": {"B": bytes([version]) * 3},
    }


def write_history(aws: Aws) -> list[tuple[str, str, int]]:
    """40 items over 10 partition keys, each written 3 times (PutItem, PutItem, UpdateItem),
    keys interleaved; the writes in order as (pk, sk, version)."""
    writes = []
    for version in range(1, WRITES_PER_ITEM + 1):
        for n in range(ITEMS_PER_KEY):
            for pk in KEYS:
                sk = f"order-{n}"
                if version < WRITES_PER_ITEM:
                    aws.ddb.put_item(
                        TableName="contacts", Item=item(pk, sk, version, "x" * (n + version))
                    )
                else:
                    aws.ddb.update_item(
                        TableName="contacts",
                        Key={"pk": {"S": pk}, "sk": {"S": sk}},
                        UpdateExpression="SET version = :v",
                        ExpressionAttributeValues={":v": {"N": str(version)}},
                    )
                writes.append((pk, sk, version))
    return writes


# --- DynamoDB's item-size rule, written out independently -------------------------------------


def number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").strip("0")
    return math.ceil(len(digits) / 2) + 1


def value_size(value: dict) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return number_size(raw)
    if kind == "B":
        return len(raw)
    raise AssertionError(f"not used here: {kind}")


def attributes_size(attributes: dict) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in attributes.items())


def expected_size(record: dict) -> int:
    change = record["dynamodb"]
    return sum(
        attributes_size(change[part]) for part in ("Keys", "NewImage", "OldImage") if part in change
    )


# --- shards --------------------------------------------------------------------------------------


def test_describe_stream_lists_the_default_four_shards(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-0", "order-0", 1))

    shard_ids = aws.shard_ids(arn)

    assert len(shard_ids) == dynamodbstreams.DEFAULT_SHARDS == 4
    assert len(set(shard_ids)) == 4
    description = aws.streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert description["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert all("ParentShardId" not in shard for shard in description["Shards"])


def test_one_keys_records_stay_in_one_shard_in_write_order(aws):
    arn = aws.table()
    writes = write_history(aws)

    shards = aws.by_shard(arn)

    assert sum(len(records) for records in shards.values()) == len(writes) == 120
    every_sequence = [r["dynamodb"]["SequenceNumber"] for rs in shards.values() for r in rs]
    assert len(set(every_sequence)) == len(every_sequence)  # unique across the stream
    shard_of: dict[str, set[str]] = defaultdict(set)
    for shard_id, records in shards.items():
        sequences = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
        assert sequences == sorted(sequences)
        assert len(set(sequences)) == len(sequences)
        for record in records:
            shard_of[record["dynamodb"]["Keys"]["pk"]["S"]].add(shard_id)
    assert all(len(ids) == 1 for ids in shard_of.values()), shard_of
    assert len({next(iter(ids)) for ids in shard_of.values()}) > 1  # keys spread over shards

    for pk in KEYS:
        (shard_id,) = shard_of[pk]
        seen = [
            (pk, r["dynamodb"]["Keys"]["sk"]["S"], int(r["dynamodb"]["NewImage"]["version"]["N"]))
            for r in shards[shard_id]
            if r["dynamodb"]["Keys"]["pk"]["S"] == pk
        ]
        assert seen == [w for w in writes if w[0] == pk]


# --- records -------------------------------------------------------------------------------------


def test_records_are_shaped_as_dynamodb_streams_sends_them(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1, "first"))
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 2, "second"))
    aws.ddb.delete_item(
        TableName="contacts", Key={"pk": {"S": "customer-1"}, "sk": {"S": "order-1"}}
    )

    records = [r for records in aws.by_shard(arn).values() for r in records]

    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    for record in records:
        assert record["eventVersion"] == "1.1"
        assert record["eventSource"] == "aws:dynamodb"
        assert record["awsRegion"] == REGION
        change = record["dynamodb"]
        assert change["Keys"] == {"pk": {"S": "customer-1"}, "sk": {"S": "order-1"}}
        assert change["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert isinstance(change["ApproximateCreationDateTime"], datetime)
        assert change["SizeBytes"] == expected_size(record)
    insert, modify, remove = (r["dynamodb"] for r in records)
    assert insert["NewImage"] == item("customer-1", "order-1", 1, "first")  # binary as bytes
    assert "OldImage" not in insert
    assert modify["OldImage"] == insert["NewImage"]
    assert modify["NewImage"] == item("customer-1", "order-1", 2, "second")
    assert remove["OldImage"] == modify["NewImage"]
    assert "NewImage" not in remove


def test_size_bytes_follows_the_items_size(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "small", 1, "x" * 10))
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "large", 1, "x" * 1010))
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "wide", 1, "é" * 10))

    records = {
        r["dynamodb"]["Keys"]["sk"]["S"]: r
        for records in aws.by_shard(arn).values()
        for r in records
    }
    small, large, wide = (records[k]["dynamodb"]["SizeBytes"] for k in ("small", "large", "wide"))

    # keys twice (Keys and NewImage): pk + "customer-1" + sk + the sort key, then version 1,
    # payload and a 3-byte blob
    keys = len("pk") + len("customer-1") + len("sk")
    assert small == 2 * (keys + len("small")) + (7 + 2) + (7 + 10) + (4 + 3)
    assert large - small == 1000 + 2 * (len("large") - len("small"))
    assert wide - small == 10 + 2 * (len("wide") - len("small"))  # UTF-8 bytes, not characters
    for record in records.values():
        assert record["dynamodb"]["SizeBytes"] == expected_size(record)


def test_size_bytes_counts_both_images_of_a_modify(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1, "a" * 100))
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 2, "b" * 300))

    insert, modify = (r for records in aws.by_shard(arn).values() for r in records)

    assert modify["dynamodb"]["SizeBytes"] == expected_size(modify)
    assert modify["dynamodb"]["SizeBytes"] - insert["dynamodb"]["SizeBytes"] == attributes_size(
        modify["dynamodb"]["NewImage"]
    )


def test_an_unchanged_rewrite_adds_no_record(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))

    records = [r for records in aws.by_shard(arn).values() for r in records]

    assert [r["eventName"] for r in records] == ["INSERT"]


def test_get_records_pages_through_a_shard(aws):
    arn = aws.table()
    for n in range(30):
        aws.ddb.put_item(TableName="contacts", Item=item(KEYS[n % 10], f"order-{n}", 1))
    whole = aws.by_shard(arn)

    paged = {shard_id: aws.records(arn, shard_id, limit=3) for shard_id in whole}

    assert paged == whole
    assert sum(len(records) for records in paged.values()) == 30


def test_latest_iterator_starts_after_the_shards_last_record(aws):
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))
    shard_id = next(s for s, records in aws.by_shard(arn).items() if records)
    iterator = aws.streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard_id, ShardIteratorType="LATEST"
    )["ShardIterator"]

    assert aws.streams.get_records(ShardIterator=iterator)["Records"] == []
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 2))
    records = aws.streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in records] == ["MODIFY"]


def test_an_unknown_shard_is_resource_not_found(aws):
    arn = aws.table()
    with pytest.raises(aws.streams.exceptions.ResourceNotFoundException):
        aws.streams.get_shard_iterator(
            StreamArn=arn,
            ShardId="shardId-00000000000000000000-deadbeef",
            ShardIteratorType="LATEST",
        )


# --- StreamSource (the engine's in-process reader) ----------------------------------------------


def comparable(record: dict) -> dict:
    """A record with its creation time as epoch seconds (botocore parses it to a datetime)."""
    change = dict(record["dynamodb"])
    created = change["ApproximateCreationDateTime"]
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": change}


def test_stream_source_reads_the_same_records_per_shard_as_get_records(aws):
    arn = aws.table()
    write_history(aws)
    aws.ddb.delete_item(
        TableName="contacts", Key={"pk": {"S": "customer-3"}, "sk": {"S": "order-0"}}
    )
    source = StreamSource(arn)

    shards = aws.by_shard(arn)

    assert [shard.shard_id for shard in source.shards()] == list(shards)
    assert all(s.parent_shard_id is None and not s.closed for s in source.shards())
    for shard_id, records in shards.items():
        read = source.records(shard_id, None, 1000)
        assert [comparable(r) for r in read] == [comparable(r) for r in records]
        assert isinstance(read[0]["dynamodb"]["ApproximateCreationDateTime"], float)
        assert source.last_sequence(shard_id) == records[-1]["dynamodb"]["SequenceNumber"]
        middle = records[len(records) // 2]["dynamodb"]["SequenceNumber"]
        after = source.records(shard_id, middle, 1000)
        assert [r["dynamodb"]["SequenceNumber"] for r in after] == [
            r["dynamodb"]["SequenceNumber"]
            for r in records
            if int(r["dynamodb"]["SequenceNumber"]) > int(middle)
        ]


def test_stream_source_of_an_empty_shard_and_an_unknown_one(aws):
    arn = aws.table()
    source = StreamSource(arn)
    shard_id = source.shards()[0].shard_id

    assert source.records(shard_id, None, 10) == []
    assert source.last_sequence(shard_id) is None
    with pytest.raises(LookupError):
        source.records("shardId-unknown", None, 10)


# --- EMULATOR_STREAM_SHARDS ---------------------------------------------------------------------


def test_one_shard_holds_every_record_in_write_order(aws, monkeypatch):
    monkeypatch.setenv(dynamodbstreams.SHARDS_ENV, "1")
    arn = aws.table()
    writes = write_history(aws)

    shards = aws.by_shard(arn)

    assert len(shards) == 1
    (records,) = shards.values()
    assert [
        (
            r["dynamodb"]["Keys"]["pk"]["S"],
            r["dynamodb"]["Keys"]["sk"]["S"],
            int(r["dynamodb"]["NewImage"]["version"]["N"]),
        )
        for r in records
    ] == writes
    assert [shard.shard_id for shard in StreamSource(arn).shards()] == list(shards)


@pytest.mark.parametrize(("value", "count"), [("2", 2), ("7", 7), ("0", 4), ("many", 4), ("", 4)])
def test_the_shard_count_comes_from_the_environment(aws, monkeypatch, value, count):
    monkeypatch.setenv(dynamodbstreams.SHARDS_ENV, value)
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))

    assert len(aws.shard_ids(arn)) == count


def test_the_shard_count_is_fixed_when_the_stream_is_first_used(aws, monkeypatch):
    monkeypatch.setenv(dynamodbstreams.SHARDS_ENV, "2")
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))
    monkeypatch.setenv(dynamodbstreams.SHARDS_ENV, "5")

    assert len(aws.shard_ids(arn)) == 2


def test_a_third_concurrent_reader_of_a_shard_is_throttled_until_a_slot_frees(aws, monkeypatch):
    monkeypatch.setenv(dynamodbstreams.SHARDS_ENV, "1")
    monkeypatch.setattr(dynamodbstreams, "READ_LEASE", 1.0)  # longer than a loaded CI's pauses
    # botocore retries a throttle (LimitExceededException is one of its throttling codes)
    once = boto3.client("dynamodbstreams", region_name=REGION, config=NO_RETRIES)
    arn = aws.table()
    aws.ddb.put_item(TableName="contacts", Item=item("customer-1", "order-1", 1))
    (shard_id,) = aws.shard_ids(arn)

    def iterator() -> str:
        return aws.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]

    first, second, third = iterator(), iterator(), iterator()
    page = aws.streams.get_records(ShardIterator=first)
    aws.streams.get_records(ShardIterator=second)
    with pytest.raises(once.exceptions.LimitExceededException):
        once.get_records(ShardIterator=third)
    # A reader paging on with its NextShardIterator is the same reader: still admitted
    assert aws.streams.get_records(ShardIterator=page["NextShardIterator"])["Records"] == []

    # Once a reader stops, its slot frees after a lease: the third reads everything
    def read_third() -> list[dict] | None:
        try:
            return once.get_records(ShardIterator=third)["Records"]
        except once.exceptions.LimitExceededException:
            return None

    records = eventually(read_third, timeout=10, interval=0.1)
    assert [r["eventName"] for r in records] == ["INSERT"]
