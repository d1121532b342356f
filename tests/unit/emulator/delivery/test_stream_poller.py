"""The stream pollers (emulator/delivery/stream_poller.py) against a real moto server or a
scripted stream, with a scripted runtime: shard order, partial failures, bisection, retries and
the OnFailure record, maximum record age, starting positions, shards that split, lanes, 6 MB."""

import base64
import copy
import json
import logging
import re
import threading
import time
import uuid

import pytest
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamLambdaOnFailureDestinationModel,
    DynamoDBStreamModel,
)

from emulator.core import wakeups
from emulator.core.faults import Faults
from emulator.delivery import stream_poller
from emulator.delivery.mappings import (
    MAX_EVENT_BYTES,
    EngineContext,
    MappingConfig,
    MappingStats,
    Shard,
)
from emulator.delivery.sources import StreamSource
from emulator.delivery.stream_poller import StreamMappingPoller
from emulator.process import REGION
from emulator.services.dynamodbstreams import shard_source
from tests.unit.emulator.delivery.support import (
    Aws,
    event_counts,
    failures,
    runtime_keys,
    stats_of,
    wait_for,
)


def sequence_numbers(records: list[dict]) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def on_failure(aws: Aws) -> tuple[str, dict]:
    url, arn = aws.queue("stream-failures")
    return url, {"OnFailure": {"Destination": arn}}


def test_stream_records_carry_source_arn_and_unmatched_ones_are_never_invoked(aws, runtime, engine):
    stream = aws.table("contacts")
    aws.put("contacts", "1", type="CONTACT", disposition="RESOLVED")
    aws.put("contacts", "2", type="GIFT_CARD")
    aws.put("contacts", "3", type="CONTACT", disposition="ABANDONED")
    pattern = {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["CONTACT"]}}}}
    mapping = aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        BatchSize=10,
        FilterCriteria={"Filters": [{"Pattern": json.dumps(pattern)}]},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and runtime.calls)
    records = [r for batch in runtime.batches for r in batch]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["1", "3"]
    parse(event=runtime.calls[0][1], model=DynamoDBStreamModel)
    for record in records:
        assert record["eventSourceARN"] == stream
        assert record["awsRegion"] == REGION
        assert record["eventSource"] == "aws:dynamodb"
        created = record["dynamodb"]["ApproximateCreationDateTime"]
        assert isinstance(created, float)
        assert abs(created - time.time()) < 60
    stats = stats_of(esm, mapping)
    assert stats["records_filtered"] == 1
    assert stats["records_delivered"] == 2


def test_a_stream_mapping_is_logged_with_its_table_and_stream(aws, runtime, engine, caplog):
    """The stream's label is a timestamp with colons: the log names the whole resource."""
    caplog.set_level(logging.INFO, logger="emulator.esm")
    stream = aws.table("logged")
    mapping = aws.mapping(stream, StartingPosition="TRIM_HORIZON")
    esm = engine()
    assert wait_for(esm.idle)
    resource = stream.split(":", 5)[5]
    assert resource.startswith("table/logged/stream/")
    lines = [r.getMessage() for r in caplog.records if r.name == "emulator.esm"]
    assert f"esm {mapping[:8]}: {resource} -> consumer (enabled)" in lines


def test_stream_batches_preserve_shard_order(aws, runtime, engine):
    stream = aws.table("ordered")
    for n in range(10):
        aws.put("ordered", f"{n:02d}")
    runtime.delay = 0.02
    aws.mapping(stream, StartingPosition="TRIM_HORIZON", BatchSize=3)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 4)
    keys = [r["dynamodb"]["Keys"]["pk"]["S"] for b in runtime.batches for r in b]
    assert keys == [f"{n:02d}" for n in range(10)]
    assert [len(b) for b in runtime.batches] == [3, 3, 3, 1]
    assert runtime.max_active == 1


def test_stream_partial_failure_retries_from_the_lowest_failed_sequence_number(
    aws, runtime, engine
):
    stream = aws.table("partial")
    for n in range(5):
        aws.put("partial", str(n))
    aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        BatchSize=5,
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )

    def behaviour(records, index):
        if index == 0:  # the 4th and the 2nd failed: the checkpoint is the 2nd
            return failures(sequence_numbers(records)[3], sequence_numbers(records)[1])
        return {"batchItemFailures": []}

    runtime.behaviour = behaviour
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 2)
    first, second = (sequence_numbers(b) for b in runtime.batches)
    assert len(first) == 5
    assert second == first[1:]


def test_stream_bisects_a_failing_batch_down_to_the_poison_record(aws, runtime, engine):
    failure_url, destination = on_failure(aws)
    stream = aws.table("bisect")
    for n in range(4):
        aws.put("bisect", str(n), poison="yes" if n == 2 else "no")

    def behaviour(records, index):
        if any(r["dynamodb"]["NewImage"]["poison"]["S"] == "yes" for r in records):
            raise RuntimeError("poison")

    runtime.behaviour = behaviour
    mapping = aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        BatchSize=4,
        BisectBatchOnFunctionError=True,
        MaximumRetryAttempts=1,
        DestinationConfig=destination,
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 6)
    keys = [[r["dynamodb"]["Keys"]["pk"]["S"] for r in b] for b in runtime.batches]
    assert keys == [["0", "1", "2", "3"], ["0", "1"], ["2", "3"], ["2"], ["2"], ["3"]]
    (message,) = aws.drain(failure_url)
    record = json.loads(message["Body"])
    info = record["DDBStreamBatchInfo"]
    poison_sequence = runtime.batches[3][0]["dynamodb"]["SequenceNumber"]
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == poison_sequence
    assert info["batchSize"] == 1
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2
    stats = stats_of(esm, mapping)
    assert stats["bisections"] == 2
    assert stats["sent_to_on_failure"] == 1


def test_stream_retries_exhausted_sends_the_batch_info_to_the_on_failure_queue(
    aws, runtime, engine
):
    failure_url, destination = on_failure(aws)
    stream = aws.table("exhausted")
    for n in range(3):
        aws.put("exhausted", str(n))

    def behaviour(records, index):
        if any(r["dynamodb"]["Keys"]["pk"]["S"] == "later" for r in records):
            return None
        raise RuntimeError("always")

    runtime.behaviour = behaviour
    mapping = aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        BatchSize=10,
        MaximumRetryAttempts=2,
        DestinationConfig=destination,
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 3)
    assert all(b == runtime.batches[0] for b in runtime.batches)
    sequences = sequence_numbers(runtime.batches[0])

    (message,) = aws.drain(failure_url)
    record = json.loads(message["Body"])
    parsed = parse(event=record, model=DynamoDBStreamLambdaOnFailureDestinationModel)
    assert parsed.request_context.condition == "RetryAttemptsExhausted"
    assert parsed.request_context.approximate_invoke_count == 3
    assert parsed.request_context.function_arn == aws.function_arn
    assert parsed.response_context.function_error == "Unhandled"
    assert record["version"] == "1.0"
    info = record["DDBStreamBatchInfo"]
    assert info["shardId"].startswith("shardId-")
    assert info["startSequenceNumber"] == sequences[0]
    assert info["endSequenceNumber"] == sequences[-1]
    assert info["batchSize"] == 3
    assert info["streamArn"] == stream
    assert info["approximateArrivalOfFirstRecord"].endswith("Z")
    assert stats_of(esm, mapping)["sent_to_on_failure"] == 3
    assert "OnFailureDestinationDeliveredEventCount" not in event_counts(aws, mapping)

    # The shard moved past the discarded batch: the next record is delivered on its own.
    aws.put("exhausted", "later")
    wait_for(lambda: len(runtime.calls) == 4)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in runtime.batches[3]] == ["later"]


def test_a_stream_mapping_with_event_count_metrics_counts_what_it_gave_up(aws, runtime, engine):
    """MetricsConfig EventCount: the records sent to the OnFailure destination, and those that
    invoked the function (each attempt) and failed (Lambda developer guide, "Event source mapping
    metrics")."""
    _, destination = on_failure(aws)
    stream = aws.table("counted")
    for n in range(2):
        aws.put("counted", str(n))
    runtime.behaviour = lambda records, index: (_ for _ in ()).throw(RuntimeError("always"))
    mapping = aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        MaximumRetryAttempts=1,
        DestinationConfig=destination,
        MetricsConfig={"Metrics": ["EventCount"]},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 2)
    counts = event_counts(aws, mapping)
    assert counts["PolledEventCount"] == 2
    assert counts["InvokedEventCount"] == counts["FailedInvokeEventCount"] == 4
    assert counts["OnFailureDestinationDeliveredEventCount"] == 2
    assert "DroppedEventCount" not in counts


def test_stream_on_failure_destination_can_be_an_sns_topic(aws, runtime, engine):
    sns = aws.client("sns")
    topic = sns.create_topic(Name="stream-failures")["TopicArn"]
    capture_url, capture_arn = aws.queue("capture")
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=capture_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    stream = aws.table("to-sns")
    aws.put("to-sns", "x")

    def behaviour(records, index):
        raise RuntimeError("fails")

    runtime.behaviour = behaviour
    aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        MaximumRetryAttempts=0,
        DestinationConfig={"OnFailure": {"Destination": topic}},
    )
    engine()
    (message,) = wait_for(lambda: aws.drain(capture_url))
    record = json.loads(message["Body"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 1
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1


def test_stream_records_older_than_maximum_age_are_discarded(aws, runtime, engine, monkeypatch):
    failure_url, destination = on_failure(aws)
    stream = aws.table("aged")
    aws.put("aged", "old")
    # Two minutes later (Lambda's smallest MaximumRecordAgeInSeconds is 60).
    monkeypatch.setattr(stream_poller, "wall_clock", lambda: time.time() + 120)

    def behaviour(records, index):
        raise RuntimeError("keeps failing")

    runtime.behaviour = behaviour
    aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        BatchSize=10,
        MaximumRetryAttempts=-1,
        MaximumRecordAgeInSeconds=60,
        DestinationConfig=destination,
    )
    esm = engine()
    messages = wait_for(lambda: aws.drain(failure_url))
    record = json.loads(messages[0]["Body"])
    assert record["requestContext"]["condition"] == "RecordAgeExceeded"
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1
    assert wait_for(esm.idle)


def test_stream_duplicate_deliveries_invoke_each_batch_twice(aws, runtime, faults, engine):
    faults.duplicate_deliveries = 2
    stream = aws.table("dupes")
    aws.put("dupes", "a")
    aws.put("dupes", "b")
    aws.mapping(stream, StartingPosition="TRIM_HORIZON", BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 2)
    assert runtime.batches[0] == runtime.batches[1]
    assert len(runtime.batches[0]) == 2


def test_stream_latest_skips_existing_records_and_disable_pauses_the_shard(aws, runtime, engine):
    stream = aws.table("latest")
    aws.put("latest", "before")
    mapping = aws.mapping(stream, StartingPosition="LATEST", BatchSize=10)
    esm = engine()
    assert wait_for(esm.all_enabled)
    aws.put("latest", "after")
    wait_for(lambda: runtime.calls)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in runtime.batches[0]] == ["after"]

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    wait_for(lambda: esm.stats()[mapping]["pollers"] == 0)
    aws.put("latest", "while-disabled")
    time.sleep(0.5)
    assert len(runtime.calls) == 1
    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=True)
    wait_for(lambda: len(runtime.calls) == 2)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in runtime.batches[1]] == ["while-disabled"]


def test_stream_latest_starting_position_is_held_once_all_enabled(aws, runtime, engine):
    """all_enabled() means every shard worker holds its starting position: a record written
    right after it reads True is delivered, one written before is not (several shards)."""
    stream = aws.table("latest-held", shards=4)
    for n in range(8):
        aws.put("latest-held", f"before-{n}")
    aws.mapping(stream, StartingPosition="LATEST", BatchSize=100)
    esm = engine()
    assert esm.all_enabled()  # start() read the mappings and placed every shard worker
    for n in range(8):
        aws.put("latest-held", f"after-{n}")
    assert wait_for(lambda: esm.idle() and len(runtime_keys(runtime)) == 8)
    assert sorted(runtime_keys(runtime)) == [f"after-{n}" for n in range(8)]


def test_stream_with_several_shards_has_a_worker_per_shard_and_keeps_each_keys_order(
    aws, runtime, engine
):
    stream = aws.table("sharded", shards=4)
    keys = [f"k{n:02d}" for n in range(12)]
    for version in range(3):
        for key in keys:
            aws.put("sharded", key, v=str(version))
    source = StreamSource(stream)
    shard_of = {
        r["dynamodb"]["SequenceNumber"]: shard.shard_id
        for shard in source.shards()
        for r in source.records(shard.shard_id, None, 1000)
    }
    assert len(set(shard_of.values())) > 1
    runtime.delay = 0.05
    mapping = aws.mapping(stream, StartingPosition="TRIM_HORIZON", BatchSize=4)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 4
    assert wait_for(lambda: esm.idle() and sum(len(b) for b in runtime.batches) == 36)
    for batch in runtime.batches:  # a batch comes from one shard
        assert len({shard_of[r["dynamodb"]["SequenceNumber"]] for r in batch}) == 1
    versions: dict[str, list[str]] = {}
    for batch in runtime.batches:
        for record in batch:
            image = record["dynamodb"]["NewImage"]
            versions.setdefault(image["pk"]["S"], []).append(image["v"]["S"])
    assert versions == {key: ["0", "1", "2"] for key in keys}
    assert 1 < runtime.max_active <= 4  # shards run concurrently, one batch in flight each


def test_stream_records_keep_event_version_and_size_bytes_as_the_stream_gives_them(
    aws, runtime, engine
):
    stream = aws.table("shape")
    aws.put("shape", "x", payload="y" * 100)
    source = StreamSource(stream)
    (shard,) = source.shards()
    (raw,) = source.records(shard.shard_id, None, 10)
    aws.mapping(stream, StartingPosition="TRIM_HORIZON")
    esm = engine()
    assert wait_for(lambda: esm.idle() and runtime.calls)
    (record,) = runtime.batches[0]
    assert record["eventVersion"] == raw["eventVersion"]
    assert record["dynamodb"]["SizeBytes"] == raw["dynamodb"]["SizeBytes"]
    assert record["dynamodb"]["ApproximateCreationDateTime"] == float(
        int(raw["dynamodb"]["ApproximateCreationDateTime"])
    )


def test_stream_records_carry_binary_values_base64_and_every_type_as_the_event_json_does(
    aws, runtime, engine
):
    stream = aws.table("types")
    image = {
        "pk": {"S": "k"},
        "b": {"B": b"\x00\xffbin"},
        "bs": {"BS": [b"\x01", b"\x02"]},
        "n": {"N": "1.5"},
        "m": {"M": {"deep": {"L": [{"B": b"\x10"}, {"BOOL": True}, {"NULL": True}]}}},
        "s": {"S": "héllo"},
    }
    aws.ddb.put_item(TableName="types", Item=image)
    aws.mapping(stream, StartingPosition="TRIM_HORIZON")
    engine()
    assert wait_for(lambda: runtime.calls)
    (record,) = runtime.batches[0]
    new_image = record["dynamodb"]["NewImage"]
    assert new_image["b"] == {"B": base64.b64encode(b"\x00\xffbin").decode()}
    assert new_image["bs"] == {"BS": ["AQ==", "Ag=="]}
    assert new_image["m"]["M"]["deep"]["L"] == [{"B": "EA=="}, {"BOOL": True}, {"NULL": True}]
    assert (new_image["n"], new_image["s"]) == ({"N": "1.5"}, {"S": "héllo"})
    assert (record["awsRegion"], record["eventSourceARN"]) == (REGION, stream)


FAKE_STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/fake/stream/2026-11-30T00:00:00.000"


class FakeStream:
    """An in-memory stream with shards the test scripts (parents, closed shards)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.shard_list: list[Shard] = []
        self.items: dict[str, list[dict]] = {}
        self.sequence = 100

    def add_shard(self, shard_id: str, parent: str | None = None, closed: bool = False) -> None:
        with self.lock:
            self.shard_list.append(Shard(shard_id, parent, closed))
            self.items[shard_id] = []

    def close(self, shard_id: str) -> None:
        with self.lock:
            self.shard_list = [
                s._replace(closed=True) if s.shard_id == shard_id else s for s in self.shard_list
            ]

    def put(self, shard_id: str, key: str, **image: str) -> None:
        with self.lock:
            self.sequence += 1
            self.items[shard_id].append(
                {
                    "eventID": uuid.uuid4().hex,  # random, as DynamoDB Streams' ids
                    "eventName": "INSERT",
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": REGION,
                    "dynamodb": {
                        "ApproximateCreationDateTime": time.time(),
                        "Keys": {"pk": {"S": key}},
                        "NewImage": {"pk": {"S": key}, **{k: {"S": v} for k, v in image.items()}},
                        "SequenceNumber": str(self.sequence),
                        "SizeBytes": 10,
                        "StreamViewType": "NEW_IMAGE",
                    },
                }
            )
        wakeups.notify(shard_source(FAKE_STREAM, shard_id))

    def shards(self) -> list[Shard]:
        with self.lock:
            return list(self.shard_list)

    def records(self, shard_id: str, after: str | None, limit: int) -> list[dict]:
        with self.lock:
            items = self.items[shard_id]
            start = (
                0
                if after is None
                else 1
                + next(i for i, r in enumerate(items) if r["dynamodb"]["SequenceNumber"] == after)
            )
            return copy.deepcopy(items[start : start + limit])

    def last_sequence(self, shard_id: str) -> str | None:
        with self.lock:
            items = self.items[shard_id]
            return items[-1]["dynamodb"]["SequenceNumber"] if items else None


@pytest.fixture
def fake_stream_poller(runtime):
    pollers = []

    def start(stream: FakeStream, **settings) -> StreamMappingPoller:
        ctx = EngineContext(
            runtime,
            Faults(),
            region=REGION,
            endpoint_url=None,
            retry_delay=0.01,
            max_sqs_pollers=10,
        )
        config = MappingConfig.from_api(
            {
                "UUID": "fake-mapping-0001",
                "EventSourceArn": FAKE_STREAM,
                "FunctionArn": f"arn:aws:lambda:{REGION}:123456789012:function:consumer",
                "State": "Enabled",
                "StartingPosition": "TRIM_HORIZON",
                **settings,
            }
        )
        poller = StreamMappingPoller(
            ctx, config, MappingStats(config), lambda arn: stream, lambda arn: "pk"
        )
        poller.reconcile()
        pollers.append(poller)
        return poller

    yield start
    for poller in pollers:
        poller.stop()
        poller.join(3)


def test_a_child_shard_starts_once_its_parent_is_fully_handled(runtime, fake_stream_poller):
    stream = FakeStream()
    stream.add_shard("shardId-parent")
    stream.add_shard("shardId-child", parent="shardId-parent")
    stream.add_shard("shardId-other")
    for n in range(3):
        stream.put("shardId-parent", "k", n=f"p{n}")
    stream.put("shardId-child", "k", n="c0")
    stream.put("shardId-other", "o", n="o0")
    runtime.delay = 0.05
    poller = fake_stream_poller(stream, BatchSize=2)
    assert wait_for(lambda: sum(len(b) for b in runtime.batches) == 4)  # parent's and other's
    assert poller.active_pollers() == 2  # the child waits for its parent
    stream.close("shardId-parent")  # the parent's last record is in: the split is done
    stream.put("shardId-child", "k", n="c1")
    assert wait_for(lambda: poller.idle() and sum(len(b) for b in runtime.batches) == 6)
    order = [
        r["dynamodb"]["NewImage"]["n"]["S"]
        for b in runtime.batches
        for r in b
        if r["dynamodb"]["Keys"]["pk"]["S"] == "k"
    ]
    assert order == ["p0", "p1", "p2", "c0", "c1"]


def test_parallelization_factor_runs_lanes_concurrently_and_keeps_each_keys_order(
    runtime, fake_stream_poller
):
    stream = FakeStream()
    stream.add_shard("shardId-one")
    keys = [f"key-{n}" for n in range(8)]
    for version in range(5):
        for key in keys:
            stream.put("shardId-one", key, v=str(version))
    runtime.delay = 0.5  # long enough for lanes to overlap on a loaded machine
    poller = fake_stream_poller(stream, BatchSize=3, ParallelizationFactor=4)
    assert wait_for(lambda: poller.idle() and sum(len(b) for b in runtime.batches) == 40)
    assert 1 < runtime.max_active <= 4
    versions: dict[str, list[str]] = {}
    for batch in runtime.batches:
        for record in batch:
            versions.setdefault(record["dynamodb"]["Keys"]["pk"]["S"], []).append(
                record["dynamodb"]["NewImage"]["v"]["S"]
            )
    assert versions == {key: ["0", "1", "2", "3", "4"] for key in keys}
    assert poller.positions["shardId-one"] == stream.last_sequence("shardId-one")


def test_stream_batches_are_cut_before_six_megabytes_of_event(runtime, fake_stream_poller):
    stream = FakeStream()
    stream.add_shard("shardId-big")
    for n in range(14):
        stream.put("shardId-big", f"big-{n:02d}", blob="x" * 1_000_000)
    poller = fake_stream_poller(stream, BatchSize=100)
    assert wait_for(lambda: poller.idle() and sum(len(b) for b in runtime.batches) == 14)
    sizes = [len(json.dumps(event).encode()) for _, event in runtime.calls]
    assert all(size <= MAX_EVENT_BYTES for size in sizes)
    assert [len(b) for b in runtime.batches] == [6, 6, 2]  # each as many as fit
    keys = [r["dynamodb"]["Keys"]["pk"]["S"] for b in runtime.batches for r in b]
    assert keys == [f"big-{n:02d}" for n in range(14)]


def test_an_s3_on_failure_destination_gets_an_object_per_discarded_batch(aws, runtime, engine):
    """Lambda developer guide, "Retaining discarded batches": an S3 bucket destination keeps the
    invocation record with the batch's payload under
    aws/lambda/<mapping UUID>/<shard ID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<UUID>."""
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="discarded")
    stream = aws.table("to-s3")
    aws.put("to-s3", "0")
    runtime.behaviour = lambda records, index: (_ for _ in ()).throw(RuntimeError("always"))
    mapping = aws.mapping(
        stream,
        StartingPosition="TRIM_HORIZON",
        MaximumRetryAttempts=0,
        DestinationConfig={"OnFailure": {"Destination": "arn:aws:s3:::discarded"}},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and runtime.calls)
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket="discarded")["Contents"]]
    assert re.fullmatch(
        rf"aws/lambda/{mapping}/shardId-[^/]+/\d{{4}}/\d{{2}}/\d{{2}}/"
        r"\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}-[0-9a-f-]{36}",
        key,
    ), key
    record = json.loads(s3.get_object(Bucket="discarded", Key=key)["Body"].read())
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    [change] = json.loads(record["payload"])["Records"]
    assert change["dynamodb"]["Keys"] == {"pk": {"S": "0"}}


def test_a_ttl_deletes_identity_reaches_the_function_as_lambda_spells_it():
    # GetRecords' Record.userIdentity is an Identity {PrincipalId, Type}; Lambda's event, as
    # Powertools' model of it reads it, {type, principalId}
    removed = {
        "eventID": "1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": 1700000000.0,
            "Keys": {"pk": {"S": "customer-1"}},
            "OldImage": {"pk": {"S": "customer-1"}},
            "SequenceNumber": "100",
            "SizeBytes": 20,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "userIdentity": {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
    }
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/t/stream/2026-01-01T00:00:00.000"

    record = stream_poller.lambda_record(removed, arn, REGION)

    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    [parsed] = parse(event={"Records": [record]}, model=DynamoDBStreamModel).Records
    assert parsed.userIdentity.type == "Service"
