"""The event source mapping engine against a real moto server, with a scripted runtime.

The runtime is the boundary double here: it records every event the engine sends and returns the
result a function would. Queues, tables, streams and the mappings themselves are moto's, created
through the AWS APIs exactly as a deployment creates them.
"""

import base64
import collections
import copy
import functools
import hashlib
import io
import json
import logging
import socket
import sys
import threading
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Callable
from types import SimpleNamespace

import boto3
import pytest
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import (
    DynamoDBStreamLambdaOnFailureDestinationModel,
    DynamoDBStreamModel,
    SqsModel,
)
from botocore.config import Config
from moto.server import ThreadedMotoServer

from emulator.core import wakeups
from emulator.core.faults import Faults
from emulator.delivery import engine as esm_module
from emulator.delivery import sqs_poller, stream_poller
from emulator.delivery.engine import EventSourceMappingEngine
from emulator.delivery.mappings import (
    MAX_EVENT_BYTES,
    EngineContext,
    MappingConfig,
    MappingStats,
    Shard,
    read_outcome,
)
from emulator.delivery.sources import StreamSource
from emulator.delivery.stream_poller import StreamMappingPoller
from emulator.lambda_.workers import InvokeResult
from emulator.services import dynamodbstreams, moto_patches
from emulator.services.dynamodbstreams import shard_source
from harness.polling import eventually, stable
from tests.unit.emulator.support import REGION, STREAM_OF_BOTH_IMAGES, pk_table

CLIENT_CONFIG = Config(account_id_endpoint_mode="disabled", retries={"max_attempts": 2})


def _free_port() -> int:
    for port in range(4700, 4800):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 4700-4799")


# Returns as soon as the condition holds; the bound is for a loaded CI machine, where the unit
# run shares two cores with the integration suites (a 10 s bound timed out there).
wait_for = functools.partial(eventually, timeout=60.0, interval=0.05)


# --- the runtime double ------------------------------------------------------------------------


class FakeRuntime:
    """Records each invocation; ``behaviour(records, call_index)`` scripts the result:
    return a payload (the function's response) or raise to make the invocation fail."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[tuple[str, dict]] = []
        self.behaviour: Callable[[list[dict], int], object] = lambda records, n: None
        self.active = 0
        self.max_active = 0
        self.delay = 0.0
        self.unregistered: set[str] = set()  # functions whose code is not on the runtime yet

    def runnable(self, function_name: str) -> bool:
        return function_name not in self.unregistered

    def invoke(self, function_name: str, event: dict | bytes) -> InvokeResult:
        if isinstance(event, bytes):  # the engine sends the event JSON, encoded once
            event = json.loads(event)
        with self.lock:
            index = len(self.calls)
            self.calls.append((function_name, copy.deepcopy(event)))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            try:
                payload = self.behaviour(event["Records"], index)
            except Exception as error:
                return InvokeResult(
                    False, None, {"errorType": type(error).__name__, "errorMessage": str(error)}
                )
            return InvokeResult(True, json.loads(json.dumps(payload)), None)
        finally:
            with self.lock:
                self.active -= 1

    @property
    def batches(self) -> list[list[dict]]:
        with self.lock:
            return [event["Records"] for _, event in self.calls]


def failures(*identifiers: str) -> dict:
    return {"batchItemFailures": [{"itemIdentifier": i} for i in identifiers]}


# --- moto server and resources ------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint():
    moto_patches.install()  # the local stack's patches: moto's own ESM delivery switched off
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        moto_patches.uninstall()  # other test modules use plain moto in this process


class Aws:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        kwargs = {
            "endpoint_url": endpoint,
            "region_name": REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "config": CLIENT_CONFIG,
        }
        self.sqs = boto3.client("sqs", **kwargs)
        self.ddb = boto3.client("dynamodb", **kwargs)
        self.streams = boto3.client("dynamodbstreams", **kwargs)
        self.lam = boto3.client("lambda", **kwargs)
        self.iam = boto3.client("iam", **kwargs)
        role = self.iam.create_role(RoleName="esm-test", AssumeRolePolicyDocument="{}")
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("app.py", "def lambda_handler(event, context):\n    return None\n")
        self.function_arn = self.lam.create_function(
            FunctionName="consumer",
            Runtime="python3.13",
            Role=role["Role"]["Arn"],
            Handler="app.lambda_handler",
            Code={"ZipFile": archive.getvalue()},
            Timeout=1,  # Lambda refuses a queue whose visibility timeout is below it
        )["FunctionArn"]

    def queue(self, name: str, visibility: int = 1, **attributes: str) -> tuple[str, str]:
        url = self.sqs.create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": str(visibility), **attributes}
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return url, arn["Attributes"]["QueueArn"]

    def table(self, name: str, shards: int = 1) -> str:
        """A table with a stream of ``shards`` shards (the local stack's default is 4; most tests
        here look at one shard's order)."""
        description = self.ddb.create_table(
            **pk_table(name, StreamSpecification=STREAM_OF_BOTH_IMAGES)
        )
        arn = description["TableDescription"]["LatestStreamArn"]
        with pytest.MonkeyPatch.context() as patch:  # the shard count is read once, here
            patch.setenv(dynamodbstreams.SHARDS_ENV, str(shards))
            self.streams.describe_stream(StreamArn=arn)
        return arn

    def put(self, table: str, pk: str, **attrs: str) -> None:
        item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
        self.ddb.put_item(TableName=table, Item=item)

    def mapping(self, source_arn: str, **settings) -> str:
        return self.lam.create_event_source_mapping(
            EventSourceArn=source_arn, FunctionName="consumer", **settings
        )["UUID"]

    def send(self, url: str, *bodies: str) -> list[str]:
        return [self.sqs.send_message(QueueUrl=url, MessageBody=b)["MessageId"] for b in bodies]

    def drain(self, url: str) -> list[dict]:
        messages = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return messages
            messages.extend(got)

    def counts(self, url: str) -> tuple[int, int]:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )["Attributes"]
        return (
            int(attrs["ApproximateNumberOfMessages"]),
            int(attrs["ApproximateNumberOfMessagesNotVisible"]),
        )


@pytest.fixture
def aws(endpoint):
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    return Aws(endpoint)


@pytest.fixture
def runtime():
    return FakeRuntime()


@pytest.fixture
def faults():
    return Faults()


@pytest.fixture
def engine(endpoint, aws, runtime, faults):
    engines = []

    def start() -> EventSourceMappingEngine:
        # In process, as `up` runs it: the pollers read moto's backends and wait on wake-ups.
        esm = EventSourceMappingEngine(
            runtime,
            faults,
            region=REGION,
            endpoint_url=endpoint,
            refresh_interval=0.2,
            retry_delay=0.05,
        )
        esm.start()
        engines.append(esm)
        return esm

    yield start
    for esm in engines:
        started = time.monotonic()
        esm.stop()
        # promptly: well inside the pollers' 20 s idle wait, with room for a loaded machine
        assert time.monotonic() - started < 10, "stop() must return promptly"


def stats_of(esm: EventSourceMappingEngine, mapping: str) -> dict:
    return esm.stats()[mapping]


# --- read_outcome: Lambda's success and failure conditions ---------------------------------------


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (None, "ok"),
        ({}, "ok"),
        ({"statusCode": 200}, "ok"),
        ({"batchItemFailures": None}, "ok"),
        ({"batchItemFailures": []}, "ok"),
        (failures("a"), "partial"),
        (failures("a", "b", "a"), "partial"),
        ({"batchItemFailures": "a"}, "malformed"),
        ({"batchItemFailures": {"itemIdentifier": "a"}}, "malformed"),
        (failures(""), "malformed"),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, "malformed"),
        ({"batchItemFailures": [{"id": "a"}]}, "malformed"),
        ({"batchItemFailures": ["a"]}, "malformed"),
        (failures("a", "zz"), "malformed"),
        ("a string", "malformed"),
        ([failures("a")], "malformed"),
    ],
)
def test_partial_batch_response_conditions(payload, kind):
    outcome = read_outcome(InvokeResult(True, payload, None), ["a", "b", "c"], True)
    assert outcome.kind == kind
    if kind == "partial":
        assert outcome.failed == {i["itemIdentifier"] for i in payload["batchItemFailures"]}
    if kind == "malformed":
        assert outcome.failed is None  # the whole batch


def test_without_report_batch_item_failures_any_response_is_success():
    assert read_outcome(InvokeResult(True, failures("a"), None), ["a"], False).kind == "ok"
    assert read_outcome(InvokeResult(True, "junk", None), ["a"], False).kind == "ok"
    error = read_outcome(InvokeResult(False, None, {"errorType": "X"}), ["a"], False)
    assert error.kind == "error"
    assert error.failed is None


# --- SQS --------------------------------------------------------------------------------------


def test_sqs_event_has_lambdas_record_shape_and_batch_is_deleted(aws, runtime, engine):
    url, arn = aws.queue("shape")
    message_id = aws.sqs.send_message(
        QueueUrl=url,
        MessageBody='{"kind": "A"}',
        MessageAttributes={
            "kind": {"DataType": "String", "StringValue": "SURVEY"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
            "count": {"DataType": "Number", "StringValue": "5"},
        },
    )["MessageId"]
    mapping = aws.mapping(arn, BatchSize=10)
    esm = engine()

    wait_for(lambda: runtime.calls)
    function, event = runtime.calls[0]
    assert function == "consumer"
    parse(event=event, model=SqsModel)  # Powertools' model of Lambda's SQS event validates it
    (record,) = event["Records"]
    assert record["messageId"] == message_id
    assert record["body"] == '{"kind": "A"}'
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == arn
    assert record["awsRegion"] == REGION
    assert record["md5OfBody"] == hashlib.md5(b'{"kind": "A"}').hexdigest()
    assert len(record["md5OfMessageAttributes"]) == 32
    assert record["receiptHandle"]
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(
        record["attributes"]
    )
    assert record["messageAttributes"] == {
        "kind": {
            "stringValue": "SURVEY",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "blob": {
            "binaryValue": "AAE=",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
        "count": {
            "stringValue": "5",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
    }
    assert wait_for(esm.idle)
    assert aws.counts(url) == (0, 0)
    assert len(runtime.calls) == 1
    stats = stats_of(esm, mapping)
    assert stats["invocations"] == 1
    assert stats["records_delivered"] == 1
    assert stats["failures"] == 0


def test_sqs_partial_failure_keeps_exactly_the_failed_messages(aws, runtime, engine, caplog):
    caplog.set_level(logging.INFO, logger="emulator.esm")
    url, arn = aws.queue("partial")
    ids = aws.send(url, *(json.dumps({"caller": f"+1555000000{n}"}) for n in range(4)))
    failed = {ids[1], ids[3]}

    def behaviour(records, index):
        if index == 0:
            return failures(*sorted(failed))
        return None

    runtime.behaviour = behaviour
    mapping = aws.mapping(arn, BatchSize=4, FunctionResponseTypes=["ReportBatchItemFailures"])
    esm = engine()

    wait_for(lambda: runtime.calls)
    assert {r["messageId"] for r in runtime.batches[0]} == set(ids)
    # Right after the first invocation: the two successes are gone, the failures wait for their
    # visibility timeout (they are not made visible early).
    assert wait_for(lambda: aws.counts(url) == (0, 2), timeout=0.9)
    assert not esm.idle()  # the failed messages are still to be retried
    wait_for(lambda: len(runtime.calls) >= 2)
    retried = runtime.batches[1]
    assert {r["messageId"] for r in retried} == failed
    assert {r["attributes"]["ApproximateReceiveCount"] for r in retried} == {"2"}
    assert wait_for(esm.idle)
    assert len(runtime.calls) == 2
    assert aws.counts(url) == (0, 0)
    stats = stats_of(esm, mapping)
    assert stats["failures"] == 1
    assert stats["records_failed"] == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "emulator.esm"]
    assert any(
        line.startswith(f"esm {mapping[:8]} fn=consumer records=4 outcome=partial failed=2")
        for line in lines
    )
    assert any(f"esm {mapping[:8]} fn=consumer records=2 outcome=ok" in line for line in lines)
    assert not any("+1555" in line for line in lines)  # record contents are never logged


@pytest.mark.parametrize(
    "response",
    [
        {"batchItemFailures": "oops"},
        {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]},
        {"batchItemFailures": [{"itemIdentifier": ""}]},
    ],
)
def test_sqs_malformed_partial_response_fails_the_whole_batch(aws, runtime, engine, response):
    url, arn = aws.queue("malformed")
    ids = aws.send(url, "a", "b", "c")
    runtime.behaviour = lambda records, index: response if index == 0 else None
    aws.mapping(arn, BatchSize=3, FunctionResponseTypes=["ReportBatchItemFailures"])
    esm = engine()

    wait_for(lambda: len(runtime.calls) >= 2)
    assert {r["messageId"] for r in runtime.batches[0]} == set(ids)
    assert {r["messageId"] for r in runtime.batches[1]} == set(ids)
    assert wait_for(esm.idle)


def test_sqs_function_error_without_partial_reporting_leaves_every_message(aws, runtime, engine):
    url, arn = aws.queue("error")
    ids = aws.send(url, "a", "b")

    def behaviour(records, index):
        if index == 0:
            raise RuntimeError("boom")
        return failures(records[0]["messageId"])  # ignored: not ReportBatchItemFailures

    runtime.behaviour = behaviour
    aws.mapping(arn, BatchSize=2)
    esm = engine()
    wait_for(lambda: len(runtime.calls) >= 2)
    assert {r["messageId"] for r in runtime.batches[1]} == set(ids)
    assert wait_for(esm.idle)
    assert len(runtime.calls) == 2
    assert aws.counts(url) == (0, 0)


def test_sqs_messages_matching_no_filter_are_deleted_without_invoking(aws, runtime, engine):
    url, arn = aws.queue("filtered")
    wanted = aws.send(url, json.dumps({"kind": "SURVEY", "n": 1}))[0]
    aws.send(url, json.dumps({"kind": "GIFT_CARD"}), "SURVEY as plain text")
    mapping = aws.mapping(
        arn,
        BatchSize=10,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"kind": ["SURVEY"]}})}]},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and runtime.calls)
    assert [r["messageId"] for batch in runtime.batches for r in batch] == [wanted]
    assert aws.counts(url) == (0, 0)
    assert stats_of(esm, mapping)["records_filtered"] == 2


def test_sqs_message_is_redriven_to_the_dlq_after_max_receive_count(aws, runtime, engine):
    dlq_url, dlq_arn = aws.queue("ingest-dlq")
    url, arn = aws.queue(
        "ingest",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
    )
    (message_id,) = aws.send(url, '{"poison": true}')

    def behaviour(records, index):
        raise ValueError("cannot process")

    runtime.behaviour = behaviour
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()

    assert wait_for(esm.idle)
    in_dlq = aws.drain(dlq_url)
    assert [m["MessageId"] for m in in_dlq] == [message_id]
    assert in_dlq[0]["Body"] == '{"poison": true}'
    counts = [
        r["attributes"]["ApproximateReceiveCount"] for batch in runtime.batches for r in batch
    ]
    assert counts == ["1", "2"]
    assert aws.counts(url) == (0, 0)
    stats = stats_of(esm, mapping)
    assert stats["sent_to_dlq"] == 1
    assert stats["failures"] == 2


def test_sqs_duplicate_deliveries_invoke_each_batch_twice(aws, runtime, faults, engine):
    faults.duplicate_deliveries = 2
    url, arn = aws.queue("dupes")
    ids = aws.send(url, "a", "b")
    mapping = aws.mapping(arn, BatchSize=2)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) >= 2)
    assert len(runtime.calls) == 2
    assert [{r["messageId"] for r in b} for b in runtime.batches] == [set(ids), set(ids)]
    assert runtime.batches[0] == runtime.batches[1]
    assert aws.counts(url) == (0, 0)
    assert stats_of(esm, mapping)["invocations"] == 2


def test_sqs_reorder_shuffles_batches_and_holds_messages_back_to_later_ones(
    aws, runtime, faults, engine
):
    faults.update({"reorder_rate": 0.5, "seed": 4, "sqs_pollers": 1})
    url, arn = aws.queue("reordered", visibility=30)
    bodies = [str(n) for n in range(40)]
    aws.send(url, *bodies)
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and aws.counts(url) == (0, 0))
    delivered = [r["body"] for batch in runtime.batches for r in batch]
    assert sorted(delivered, key=int) == bodies  # each message once: none lost or repeated
    # Held back: a message goes out in a later batch than one sent after it (not only
    # shuffled within its batch).
    batch_of = {r["body"]: n for n, batch in enumerate(runtime.batches) for r in batch}
    assert any(batch_of[str(m)] > batch_of[str(m + k)] for m in range(40) for k in range(1, 40 - m))


def test_sqs_reorder_keeps_a_fifo_queues_order(aws, runtime, faults, engine):
    faults.update({"reorder_rate": 0.5, "seed": 4, "sqs_pollers": 1})
    url, arn = aws.queue("reordered.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    bodies = [str(n) for n in range(20)]
    for body in bodies:
        aws.sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and aws.counts(url) == (0, 0))
    assert [r["body"] for batch in runtime.batches for r in batch] == bodies


def test_sqs_batching_window_gathers_up_to_batch_size(aws, runtime, faults, engine):
    # One poller: with Lambda's five, a poller that starts late on a loaded machine can receive
    # the later two and wait out a window of its own, as a split batch on AWS would.
    faults.update({"sqs_pollers": 1})
    url, arn = aws.queue("window")
    # A window far longer than a loaded machine's stalls (CI saw one outlast a 2 s window): the
    # batch goes as soon as it is full, so the test waits for the third message, not the window.
    aws.mapping(arn, BatchSize=3, MaximumBatchingWindowInSeconds=30)
    esm = engine()
    first = aws.send(url, "1")
    time.sleep(0.3)  # later arrivals within the window join the same batch
    rest = aws.send(url, "2", "3")
    started = time.monotonic()
    wait_for(lambda: runtime.calls)
    assert time.monotonic() - started < 20  # delivered full, well before the window closes
    assert {r["messageId"] for r in runtime.batches[0]} == set(first + rest)
    assert wait_for(esm.idle)


def test_sqs_pollers_fault_processes_batches_concurrently(aws, runtime, faults, engine):
    faults.sqs_pollers = 3
    runtime.delay = 1.0  # long enough to overlap however late a loaded machine's receives run
    url, arn = aws.queue("scaled", visibility=5)
    aws.send(url, *[str(n) for n in range(6)])
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 6)
    assert runtime.max_active >= 2
    assert esm.stats()[mapping]["pollers"] == 3
    assert sorted(r["body"] for b in runtime.batches for r in b) == [str(n) for n in range(6)]


def test_disabling_a_mapping_stops_delivery_and_enabling_resumes_it(aws, runtime, engine):
    url, arn = aws.queue("toggle")
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert wait_for(esm.all_enabled)
    aws.send(url, "before")
    wait_for(lambda: runtime.calls)

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    wait_for(lambda: not esm.all_enabled())
    wait_for(lambda: esm.stats()[mapping]["pollers"] == 0)
    assert esm.stats()[mapping]["state"] == "Disabled"
    aws.send(url, "while disabled")
    time.sleep(0.5)  # several poll and refresh intervals
    assert len(runtime.calls) == 1
    assert aws.counts(url) == (1, 0)
    assert esm.idle()  # a disabled mapping is not waited for

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=True)
    wait_for(lambda: len(runtime.calls) == 2)
    assert runtime.batches[1][0]["body"] == "while disabled"
    assert esm.all_enabled()


def test_a_mapping_reads_disabling_until_its_last_poller_has_ended(aws, runtime, engine):
    """GetEventSourceMapping's State follows the pollers, as Lambda's does: Disabled only once
    none is left to receive, so a message sent then stays in the queue."""
    runtime.delay = 3.0  # an invocation in progress when the mapping is disabled
    url, arn = aws.queue("states", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()

    def state() -> str:
        return aws.lam.get_event_source_mapping(UUID=mapping)["State"]

    assert wait_for(lambda: state() == "Enabled") and esm.all_enabled()
    aws.send(url, "in progress")
    wait_for(lambda: runtime.active)
    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    assert state() == "Disabling"  # its invocation finishes first
    assert wait_for(lambda: state() == "Disabled")
    assert esm.stats()[mapping]["pollers"] == 0 and len(runtime.calls) == 1
    aws.send(url, "after")
    # over several refresh intervals: still visible, no poller took it
    assert stable(lambda: aws.counts(url), polls=5, interval=0.1) == (1, 0)

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=True)
    assert state() in ("Enabling", "Enabled")
    assert wait_for(lambda: state() == "Enabled") and esm.all_enabled()
    wait_for(lambda: len(runtime.calls) == 2)


def test_disabling_a_mapping_in_its_batching_window_delivers_what_it_received(aws, runtime, engine):
    """Nothing received is stranded by a disable: the window closes early and the batch goes out
    (else the message stays out of sight for the queue's whole visibility timeout)."""
    url, arn = aws.queue("window-stop", visibility=300)
    mapping = aws.mapping(arn, BatchSize=10, MaximumBatchingWindowInSeconds=60)
    esm = engine()
    assert wait_for(esm.all_enabled)
    aws.send(url, "gathered")
    assert wait_for(lambda: aws.counts(url) == (0, 1))  # received: the window is open
    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    started = time.monotonic()
    assert wait_for(lambda: aws.lam.get_event_source_mapping(UUID=mapping)["State"] == "Disabled")
    assert time.monotonic() - started < 30  # not the 60 s window
    assert [r["body"] for b in runtime.batches for r in b] == ["gathered"]
    assert aws.counts(url) == (0, 0)  # delivered and deleted


def test_a_mapping_to_a_function_not_yet_registered_is_creating_and_receives_nothing(
    aws, runtime, engine
):
    """CloudFormation makes a stack's mappings before `up` registers its functions: the mapping
    waits ("Creating") instead of invoking a function the runtime cannot run, which would leave
    the message out of sight for the queue's visibility timeout."""
    url, arn = aws.queue("unregistered", visibility=300)
    mapping = aws.mapping(arn, BatchSize=1)
    function_arn = aws.lam.get_event_source_mapping(UUID=mapping)["FunctionArn"]
    runtime.unregistered.add(function_arn)
    aws.send(url, "early")
    esm = engine()

    def seen() -> tuple:
        state = aws.lam.get_event_source_mapping(UUID=mapping)["State"]
        return state, aws.counts(url), len(runtime.calls)

    # over several refresh intervals: still visible, never received
    assert stable(seen, polls=5, interval=0.1) == ("Creating", (1, 0), 0)

    runtime.unregistered.clear()
    assert wait_for(lambda: [r["body"] for b in runtime.batches for r in b] == ["early"])
    assert wait_for(lambda: aws.lam.get_event_source_mapping(UUID=mapping)["State"] == "Enabled")
    assert esm.all_enabled()


def test_updated_batch_size_and_filter_take_effect(aws, runtime, engine):
    url, arn = aws.queue("update", visibility=10)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    aws.send(url, '{"k": 1}')
    wait_for(lambda: runtime.calls)
    aws.lam.update_event_source_mapping(
        UUID=mapping,
        BatchSize=5,
        MaximumBatchingWindowInSeconds=1,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"k": [2]}})}]},
    )
    esm.refresh()  # what the engine does on its own every refresh interval
    aws.send(url, '{"k": 2}', '{"k": 3}', '{"k": 2}')
    assert wait_for(lambda: esm.idle() and len(runtime.calls) >= 2)
    assert [r["body"] for b in runtime.batches[1:] for r in b] == ['{"k": 2}', '{"k": 2}']


# --- DynamoDB streams ----------------------------------------------------------------------------


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

    # The shard moved past the discarded batch: the next record is delivered on its own.
    aws.put("exhausted", "later")
    wait_for(lambda: len(runtime.calls) == 4)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in runtime.batches[3]] == ["later"]


def test_stream_on_failure_destination_can_be_an_sns_topic(aws, runtime, engine):
    sns = boto3.client(
        "sns",
        endpoint_url=aws.endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
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


def runtime_keys(runtime: FakeRuntime) -> list[str]:
    return [r["dynamodb"]["Keys"]["pk"]["S"] for b in runtime.batches for r in b]


# --- pollers: how many, and waiting without polling ----------------------------------------------


def test_sqs_mapping_starts_five_pollers_and_scales_with_the_backlog(aws, runtime, engine):
    # Each invocation holds its poller 1 s, five times the 0.2 s between added pollers: the
    # invocations overlap however slowly a loaded machine schedules the pollers' receives.
    runtime.delay = 1.0
    url, arn = aws.queue("backlog", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 5  # Lambda starts with five
    aws.send(url, *[str(n) for n in range(60)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 60)
    assert 5 < runtime.max_active <= 10  # more pollers while messages wait, up to the bound
    assert sorted(int(r["body"]) for b in runtime.batches for r in b) == list(range(60))
    assert wait_for(lambda: esm.stats()[mapping]["pollers"] == 5)  # back down once drained


def test_sqs_scaling_stops_at_the_mappings_maximum_concurrency(aws, runtime, engine):
    runtime.delay = 0.2
    url, arn = aws.queue("capped", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1, ScalingConfig={"MaximumConcurrency": 2})
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 2
    aws.send(url, *[str(n) for n in range(10)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 10)
    assert runtime.max_active == 2


def test_sqs_pollers_switch_sets_a_fixed_number_and_null_restores_scaling(
    aws, runtime, faults, engine
):
    faults.sqs_pollers = 1
    runtime.delay = 0.1
    url, arn = aws.queue("fixed", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 1
    aws.send(url, *[str(n) for n in range(8)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 8)
    assert runtime.max_active == 1
    faults.update({"sqs_pollers": None})
    esm.refresh()
    assert esm.stats()[mapping]["pollers"] == 5


class CountingSource:
    """A source wrapper counting the reads the engine makes."""

    def __init__(self, inner, counter: dict[str, int]):
        self._inner = inner
        self._counter = counter

    def __getattr__(self, name):
        attribute = getattr(self._inner, name)
        if name in ("receive", "records") and callable(attribute):

            def counted(*args, **kwargs):
                self._counter[name] = self._counter.get(name, 0) + 1
                return attribute(*args, **kwargs)

            return counted
        return attribute


def test_caught_up_pollers_wait_for_a_signal_instead_of_polling(aws, runtime, engine, monkeypatch):
    reads: dict[str, int] = {}
    monkeypatch.setattr(
        esm_module, "open_queue", lambda arn: CountingSource(esm_module.SqsSource(arn), reads)
    )
    monkeypatch.setattr(
        esm_module,
        "open_stream",
        lambda arn: CountingSource(esm_module.StreamSource(arn), reads),
    )
    url, arn = aws.queue("quiet")
    stream = aws.table("quiet", shards=4)
    aws.mapping(arn, BatchSize=10)
    aws.mapping(stream, StartingPosition="TRIM_HORIZON", BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and reads.get("receive") == 5 and reads.get("records") == 4)
    time.sleep(0.2)
    before = dict(reads)
    time.sleep(1.5)
    # Nothing arrived: no receive and no read at all (a 10 Hz poller would have made dozens).
    assert reads == before
    started = time.monotonic()
    aws.send(url, "wake up")
    aws.put("quiet", "wake up")
    # Woken by the arrival, not by a timer: the idle waits run IDLE_WAIT (20 s) without a signal;
    # a bound far below it and far above a loaded machine's scheduling delays.
    woken_within = min(sqs_poller.IDLE_WAIT, stream_poller.IDLE_WAIT) / 4
    assert wait_for(lambda: len(runtime.calls) == 2, timeout=woken_within)
    assert time.monotonic() - started < woken_within


def blocked_in(function: str, threads: list[threading.Thread]) -> bool:
    """Every thread waits (threading's Condition.wait is its newest frame) inside ``function``."""
    frames = sys._current_frames()
    for thread in threads:
        frame = frames.get(thread.ident)
        if frame is None or frame.f_code.co_name != "wait":
            return False
        while frame is not None and frame.f_code.co_name != function:
            frame = frame.f_back
        if frame is None:
            return False
    return True


def sqs_poller_threads(*, but: str = "") -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith("esm-sqs-") and not (but and t.name.endswith(but))
    ]


class LastToWatchSource:
    """A queue read by five pollers where poller 5 becomes the watcher: the others' first
    receive waits until it watches. ``receives`` counts each poller's receives."""

    def __init__(self, inner, watching: threading.Event):
        self._inner = inner
        self._watching = watching
        self.receives: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def receive(self, count: int):
        thread = threading.current_thread().name
        self.receives[thread] += 1
        if not thread.endswith("-5") and self.receives[thread] == 1:
            self._watching.wait(10)
        return self._inner.receive(count)


def test_a_stopped_watcher_leaves_the_watch_to_a_poller_that_keeps_running(
    aws, runtime, faults, engine, monkeypatch
):
    """The sqs_pollers switch stops the poller watching the queue, and it is scheduled after the
    pollers woken with it (a loaded machine may): one of those watches from then on, so a message
    sent next is delivered at once, not when the other pollers' FOLLOWER_WAIT (60 s) runs out."""
    watching = threading.Event()
    sources: list[LastToWatchSource] = []

    def open_queue(arn: str) -> LastToWatchSource:
        sources.append(LastToWatchSource(esm_module.SqsSource(arn), watching))
        return sources[-1]

    monkeypatch.setattr(esm_module, "open_queue", open_queue)

    def rechecked(others: list[threading.Thread]) -> bool:
        """Woken by the stop, each of the others received again and waits again."""
        again = all(sources[0].receives[t.name] >= 2 for t in others)
        return again and blocked_in("_wait_for_work", others)

    def leaving_late(source_arn: str, seen: int, timeout: float) -> bool:
        last = threading.current_thread().name.endswith("-5")
        if last:
            watching.set()
        notified = wakeups.wait(source_arn, seen, timeout)
        if last:  # stopped: it leaves once the four others wait again, as a follower or watcher
            wait_for(lambda: rechecked(sqs_poller_threads(but="-5")))
        return notified

    monkeypatch.setattr(
        sqs_poller,
        "wakeups",
        SimpleNamespace(notify=wakeups.notify, version=wakeups.version, wait=leaving_late),
    )
    url, arn = aws.queue("handover")
    mapping = aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 5
    # poller 5 watches, the other four wait as followers
    assert wait_for(lambda: blocked_in("_wait_for_work", sqs_poller_threads()))
    faults.sqs_pollers = 4
    esm.refresh()
    assert wait_for(lambda: esm.stats()[mapping]["pollers"] == 4)
    aws.send(url, "after the watcher left")
    assert wait_for(lambda: len(runtime.calls) == 1, timeout=sqs_poller.FOLLOWER_WAIT / 6)


def test_a_message_is_received_again_when_its_visibility_timeout_ends(aws, runtime, engine):
    """Nothing signals a visibility timeout running out: the idle poller sleeps until then."""
    url, arn = aws.queue("reappears", visibility=1)
    aws.send(url, "retry me")
    moments: list[float] = []
    first_received: list[float] = []

    def behaviour(records, index):
        moments.append(time.time())
        first_received.append(int(records[0]["attributes"]["ApproximateFirstReceiveTimestamp"]))
        if index == 0:
            raise RuntimeError("first attempt fails")

    runtime.behaviour = behaviour
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(moments) == 2)
    # Not before the timeout ends, counted from the first receive (the invocation starts later on
    # a loaded machine); and woken by it, not by the idle wait (IDLE_WAIT, 20 s): a bound far
    # below that and far above a loaded machine's scheduling delays.
    assert first_received[0] == first_received[1]
    assert moments[1] - first_received[0] / 1000 >= 1.0 - 0.001  # the timestamp is in whole ms
    assert moments[1] - moments[0] < sqs_poller.IDLE_WAIT / 4


def test_status_idle_waits_for_records_held_in_a_batching_window(aws, runtime, engine):
    url, arn = aws.queue("windowed")
    stream = aws.table("windowed")
    # 5 s windows: far longer than the 0.3 s look, whatever a loaded machine's stalls.
    aws.mapping(arn, BatchSize=10, MaximumBatchingWindowInSeconds=5)
    aws.mapping(
        stream, StartingPosition="TRIM_HORIZON", BatchSize=10, MaximumBatchingWindowInSeconds=5
    )
    esm = engine()
    assert wait_for(esm.idle)
    aws.send(url, "held")
    aws.put("windowed", "held")
    time.sleep(0.3)  # received / read, and held until the window closes
    assert not runtime.calls
    assert not esm.idle()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 2)


# --- streams: shards, lanes, payload size --------------------------------------------------------


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


# --- duplicate_rate ------------------------------------------------------------------------------


def test_duplicate_rate_delivers_a_batch_once_more(aws, runtime, faults, engine):
    faults.update({"duplicate_rate": 1.0})  # every batch: the rate's draw always wins
    url, arn = aws.queue("dup-rate")
    stream = aws.table("dup-rate")
    aws.send(url, "a")
    aws.put("dup-rate", "a")
    sqs_mapping = aws.mapping(arn, BatchSize=10)
    stream_mapping = aws.mapping(stream, StartingPosition="TRIM_HORIZON")
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 4)
    for mapping in (sqs_mapping, stream_mapping):
        stats = stats_of(esm, mapping)
        assert (stats["invocations"], stats["duplicates"]) == (2, 1)
    assert aws.counts(url) == (0, 0)


def test_duplicate_rate_draws_from_the_seeded_random():
    def draws(seed: int) -> list[bool]:
        switches = Faults()
        switches.update({"duplicate_rate": 0.3, "seed": seed})
        return [switches.draw_duplicate() for _ in range(200)]

    first = draws(7)
    assert first == draws(7)
    assert 30 <= sum(first) <= 90  # about 30%
    assert not any(Faults().draw_duplicate() for _ in range(100))  # off by default
    with pytest.raises(ValueError, match="duplicate_rate"):
        Faults().update({"duplicate_rate": 1.5})


# --- stream pollers against a scripted stream (shards that split, lanes, 6 MB) -------------------

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
