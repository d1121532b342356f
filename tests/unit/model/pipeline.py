"""The whole pipeline in one process for the model-based test: the real handlers, moto for AWS,
and every delivery made one step at a time by the test, the way the event source mappings would
make it: which messages or stream records, in which batch, delivered twice or not, and whether
the invocation crashes after its k-th AWS call or meets a throttled call.

Delivery semantics kept from AWS:
- SQS (IngestQueue, NotificationQueue): a batch of received messages; those the function did not
  report as failed are deleted; the others (or all, on a crash) are received again later. The
  claim a crashed invocation left has expired by then (SQS waits out the visibility timeout,
  longer than the function's timeout: see tests.resources.ShrinkingClock).
- The table's stream, per consumer: records in stream order, filtered by the consumer's
  FilterCriteria from template.yaml; after a batch, the position moves past the records before
  the first reported failure (all of them on success, none on a crash).
Not modelled: DLQ redrive after maxReceiveCount and the stream's retry limits (the harness retries
forever: they bound how many faults in a row page a human, not what the retries converge to), and
two invocations running at the very same time (the local stack's chaos run has those).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import quote_plus

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from emulator.core.filters import FilterCriteria
from emulator.delivery.stream_poller import lambda_record as stream_lambda_record
from emulator.stack import load_template
from tests.faults import CallLog, Crash, Throttle, record_calls, throttle
from tests.resources import REGION, ShrinkingClock, client
from tests.unit.conftest import ROOT, Stack, load_handler

FUNCTION_DIRS = {
    "IngestFunction": "ingest",
    "LastAgentFunction": "last_agent",
    "SurveyFunction": "survey",
    "GoodwillFunction": "goodwill",
    "NotifierFunction": "notifier",
}
STREAM_CONSUMERS = ("LastAgentFunction", "SurveyFunction", "GoodwillFunction")
# What each function calls: the operations a throttle may strike.
OPERATIONS = {
    "IngestFunction": (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:TransactWriteItems",
        "s3:GetObject",
        "s3:PutObject",
        "sqs:SendMessage",
    ),
    "LastAgentFunction": (
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:DeleteItem",
    ),
    "SurveyFunction": ("sqs:SendMessage",),
    "GoodwillFunction": ("dynamodb:PutItem", "sqs:SendMessage"),
    "NotifierFunction": ("dynamodb:PutItem", "dynamodb:UpdateItem", "sns:Publish"),
}


@functools.cache
def stream_filters() -> dict[str, FilterCriteria]:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    # FanOut=lambda: each consumer's stream mapping (the other modes are proven equivalent by
    # tests/unit/fanout/test_change_filters.py)
    return {
        name: FilterCriteria.from_mapping(
            resources[name.removesuffix("Function") + "StreamMapping"]["Properties"][
                "FilterCriteria"
            ]
        )
        for name in STREAM_CONSUMERS
    }


@dataclass
class Upload:
    """One object version put under incoming/ and the S3 event that announces it."""

    bucket: str
    key: str
    rows: list[dict | str]  # a str is a line as it stands (not a contact)
    version_id: str
    sequencer: str
    event_time: str
    event: str  # the S3 notification body

    @property
    def file_id(self) -> str:
        return f"{self.bucket}/{self.key}#{self.version_id}"


@dataclass
class Environment:
    """An execution environment: the handler module, cold until first used and again after a
    crash, and the log of its AWS calls (where crashes are armed)."""

    function: str
    module: ModuleType
    calls: CallLog
    throttles: list[Throttle] = field(default_factory=list)


class Pipeline:
    def __init__(self, stack: Stack, monkeypatch):
        self.stack = stack
        self.monkeypatch = monkeypatch
        self.envs: dict[str, Environment] = {}
        self.filters = stream_filters()
        self.uploads: list[Upload] = []
        self.held: list[str] = []  # S3 events taken out of the queue, to be delivered late
        self.received: Counter = Counter()  # (kind, contact_id) a topic subscriber received
        self.last_failures: list[str] = []  # what failed in the last round of drain()
        self.started_files: set[str] = set()  # file ids with a processing log, seen so far
        self.must_be_stale: set[str] = set()  # started after a newer version of their key
        self.armed: dict[str, int] = {}  # function -> the call its next invocations crash after
        self.calls_made: dict[str, int] = dict.fromkeys(FUNCTION_DIRS, 0)  # most in one call
        self.crashes: list[tuple[str, tuple[str, ...]]] = []  # function, calls it made
        self._sequencers = itertools.count(0x68CA1F3C11A9E200)
        self._seconds = itertools.count()
        stream_arn = stack.dynamodb.describe_table(TableName=stack.contacts_table)["Table"][
            "LatestStreamArn"
        ]
        self._stream_arn = stream_arn
        self._streams = client("dynamodbstreams")
        shards = self._streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
        # Per shard: its iterator and the records read so far; per consumer and shard: the
        # records handled (a consumer's shards advance independently, as Lambda's do).
        self._iterators = {
            shard["ShardId"]: self._streams.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        }
        self._records: dict[str, list[dict[str, Any]]] = {shard: [] for shard in self._iterators}
        self._positions = {
            consumer: dict.fromkeys(self._iterators, 0) for consumer in STREAM_CONSUMERS
        }

    # -- S3 --------------------------------------------------------------------------------------
    def upload(self, key: str, rows: list[dict | str], same_moment: bool = False) -> Upload:
        body = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
        response = self.stack.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body.encode())
        second = next(self._seconds) - (1 if same_moment and self.uploads else 0)
        event_time = f"2026-11-29T12:{second // 60:02d}:{second % 60:02d}.000Z"
        sequencer = f"{next(self._sequencers):018X}"
        record = {
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": REGION,
            "eventTime": event_time,
            "eventName": "ObjectCreated:Put",
            "s3": {
                "bucket": {"name": self.stack.bucket},
                "object": {
                    "key": quote_plus(key, safe="/"),
                    "size": len(body),
                    "eTag": hashlib.md5(body.encode()).hexdigest(),
                    "versionId": response["VersionId"],
                    "sequencer": sequencer,
                },
            },
        }
        upload = Upload(
            self.stack.bucket,
            key,
            rows,
            response["VersionId"],
            sequencer,
            event_time,
            json.dumps({"Records": [record]}),
        )
        self.uploads.append(upload)
        self.send_ingest(upload.event)
        return upload

    def send_ingest(self, body: str) -> None:
        self.stack.sqs.send_message(QueueUrl=self.stack.ingest_queue_url, MessageBody=body)

    def hold_ingest_message(self) -> bool:
        """Take one message out of IngestQueue, to deliver it later (S3 delivered it late)."""
        messages = self.stack.sqs.receive_message(
            QueueUrl=self.stack.ingest_queue_url, MaxNumberOfMessages=1, VisibilityTimeout=0
        ).get("Messages", [])
        for message in messages:
            self.stack.sqs.delete_message(
                QueueUrl=self.stack.ingest_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
            self.held.append(message["Body"])
        return bool(messages)

    def release_held(self) -> None:
        while self.held:
            self.send_ingest(self.held.pop(0))

    # -- invocations -----------------------------------------------------------------------------
    def environment(self, function: str) -> Environment:
        env = self.envs.get(function)
        if env is None:
            self.monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", FUNCTION_DIRS[function])
            module = load_handler(FUNCTION_DIRS[function], self.monkeypatch)
            env = self.envs[function] = Environment(function, module, record_calls(module))
        return env

    def throttle(self, function: str, operation: str, times: int) -> None:
        """The environment's next `times` calls of `operation` fail with the throttling error
        (after boto3's own retries)."""
        env = self.environment(function)
        env.throttles.append(throttle(env.module, operation, times))

    def arm_crash(self, function: str, after_call: int) -> None:
        """The function's invocations from now on crash after their `after_call`-th AWS call,
        until one makes that many calls and crashes."""
        self.armed[function] = after_call

    def invoke(self, function: str, event: dict, crash_after: int | None) -> set[str] | None:
        """Run one invocation; the ids of the records it reported as failed (every id of the
        event when all failed), or None when the environment crashed."""
        env = self.environment(function)
        env.calls.calls.clear()
        crash_after = crash_after or self.armed.get(function)
        env.calls.crash_after = crash_after
        try:
            response = env.module.lambda_handler(event, ShrinkingClock(cost_ms=9_000))
        except Crash:
            del self.envs[function]  # the next invocation starts cold
            self.armed.pop(function, None)
            self.crashes.append((function, tuple(env.calls.calls)))
            return None
        except BatchProcessingError as error:  # every record failed
            self.last_failures.append(f"{function}: all failed: {error.child_exceptions[:1]}")
            return {r.get("messageId") or r["dynamodb"]["SequenceNumber"] for r in event["Records"]}
        finally:
            env.calls.crash_after = None
            self.calls_made[function] = max(self.calls_made[function], len(env.calls.calls))
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        if failed:
            self.last_failures.append(f"{function}: {len(failed)} record(s) failed")
        return failed

    # -- SQS mappings ----------------------------------------------------------------------------
    def deliver_queue(
        self, function: str, max_messages: int, crash_after: int | None, twice: bool
    ) -> bool:
        """One batch from the function's queue; False when the queue was empty."""
        url = (
            self.stack.ingest_queue_url
            if function == "IngestFunction"
            else self.stack.notification_queue_url
        )
        messages = self.stack.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=max_messages,
            VisibilityTimeout=0,  # a failed message is received again at once
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return False
        event = {"Records": [sqs_record(m, url) for m in messages]}
        failed: set[str] = set()
        for delivery in range(2 if twice else 1):
            outcome = self.invoke(function, event, crash_after if delivery == 0 else None)
            failed = {m["MessageId"] for m in messages} if outcome is None else outcome
        for message in messages:
            if message["MessageId"] not in failed:
                self.stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if function == "IngestFunction":
            self._watch_new_files()
        return True

    def _watch_new_files(self) -> None:
        """Note each file whose processing began after a newer version of its key had: it must
        end STALE (its event came late). Seen between deliveries, so a file another version
        overtook while it was in progress is not held to it."""
        started = {
            item["file_id"]["S"]
            for item in self.stack.dynamodb.scan(
                TableName=self.stack.contacts_table,
                FilterExpression="#type = :log",
                ExpressionAttributeNames={"#type": "type"},
                ExpressionAttributeValues={":log": {"S": "PROCESSING_LOG"}},
            )["Items"]
        }
        by_id = {upload.file_id: upload for upload in self.uploads}
        for file_id in started - self.started_files:
            upload = by_id[file_id]
            if any(
                by_id[other].key == upload.key and by_id[other].sequencer > upload.sequencer
                for other in self.started_files
            ):
                self.must_be_stale.add(file_id)
        self.started_files |= started

    # -- stream mappings -------------------------------------------------------------------------
    def _read_stream(self) -> None:
        for shard in self._iterators:
            while True:
                page = self._streams.get_records(ShardIterator=self._iterators[shard], Limit=1000)
                self._iterators[shard] = page["NextShardIterator"]
                if not page["Records"]:
                    break
                self._records[shard] += [
                    stream_lambda_record(raw, self._stream_arn, REGION) for raw in page["Records"]
                ]

    def deliver_stream(
        self, consumer: str, max_records: int, crash_after: int | None, twice: bool
    ) -> bool:
        """One batch of the consumer's first shard with records left; False when it is caught
        up on every shard."""
        self._read_stream()
        positions = self._positions[consumer]
        pending = [shard for shard in self._records if positions[shard] < len(self._records[shard])]
        if not pending:
            return False
        shard = pending[0]
        records = self._records[shard]
        position, batch = positions[shard], []
        for record in records[position:]:
            if len(batch) == max_records:
                break
            if self.filters[consumer].matches(record):
                batch.append(record)
            elif not batch:
                position += 1  # filtered out before the batch: skipped without an invocation
        positions[shard] = position
        if not batch:
            return True
        failed: set[str] | None = set()
        for delivery in range(2 if twice else 1):
            failed = self.invoke(
                consumer, {"Records": batch}, crash_after if delivery == 0 else None
            )
        if failed is None:
            return True
        done = next(
            (i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed),
            len(batch),
        )
        if done:
            positions[shard] = records.index(batch[done - 1], position) + 1
        return True

    def stream_caught_up(self) -> bool:
        self._read_stream()
        return all(
            position == len(self._records[shard])
            for positions in self._positions.values()
            for shard, position in positions.items()
        )

    def received_by_subscriber(self) -> Counter:
        """(kind, contact_id) of every message a FIFO queue subscribed to the topic received."""
        url = self.stack.topic_capture_url
        while messages := self.stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in messages:
                body = json.loads(message["Body"])
                self.received[(body["kind"], body["contact_id"])] += 1
                self.stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return self.received

    def deliver(
        self, function: str, max_records: int, crash_after: int | None, twice: bool
    ) -> bool:
        """One batch of the function's event source; False when there was nothing to deliver."""
        if function in STREAM_CONSUMERS:
            return self.deliver_stream(function, max_records, crash_after, twice)
        return self.deliver_queue(function, max_records, crash_after, twice)

    def flow(self, crash_function: str | None = None, crash_after: int | None = None) -> bool:
        """A batch of every function in the pipeline's order, the first of `crash_function`'s
        invocations crashing after its `crash_after`-th call; False when nothing moved."""
        moved = False
        for function in FUNCTION_DIRS:
            crash = crash_after if function == crash_function else None
            moved |= self.deliver(function, 10, crash, twice=False)
        return moved

    def settle(self, max_rounds: int = 50) -> None:
        """Flow until nothing moves (armed crashes and throttles strike on the way)."""
        for _ in range(max_rounds):
            if not self.flow():
                return

    # -- the end -----------------------------------------------------------------------------------
    def drain(self, max_rounds: int = 200) -> None:
        """Deliver everything left, without faults, until nothing moves."""
        self.release_held()
        self.armed.clear()
        for env in self.envs.values():
            for throttled in env.throttles:
                throttled.clear()
        for _ in range(max_rounds):
            self.last_failures.clear()
            if not self.flow():
                return
        raise AssertionError(
            f"the pipeline did not settle in {max_rounds} rounds; still failing: "
            f"{self.last_failures}"
        )


def sqs_record(message: dict[str, Any], queue_url: str) -> dict[str, Any]:
    name = queue_url.rsplit("/", 1)[-1]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:{name}",
        "awsRegion": REGION,
    }
