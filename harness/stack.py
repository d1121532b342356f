"""The stack as the tooling drives it (the demo, the bench, the integration tests):
ops.stack.Stack, with the local stack's controls when the tooling started it
(``StackClient.local_stack``: a `python -m emulator up` process, dummy credentials, its
endpoint; faults, status, the failed invocations its engine logged), where a consumer's failed
changes end up (``failure_route``), the test helpers on the table and the queues, Firehose puts
and RouteFunction's answer. A deployed stack is ``StackClient.deployed`` (ops.stack.Stack's).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Self

import boto3
from shared import keys

from emulator.process import FailedInvocation, LocalStackProcess
from harness.builders import connect_event
from harness.polling import eventually
from ops import fan_out
from ops.stack import CONSUMERS, Stack

# A failure record of a stream mapping reaches StreamFailureQueue within this (the mapping's
# retries of a batch that fails at once, with a margin).
STREAM_FAILURE_SECONDS = 120
# What one Firehose PutRecordBatch call takes (the API reference): 500 records, 4 MiB of them.
FIREHOSE_BATCH_RECORDS = 500
FIREHOSE_BATCH_BYTES = 4 * 1024 * 1024
# Rounds of putting again the entries a call reports failed (FailedPutCount), with backoff.
FIREHOSE_ATTEMPTS = 8


def fan_out_args(mode: str | None) -> list[str]:
    """The `emulator up` arguments that deploy the stack in fan-out mode ``mode``; none for None
    or "" (samconfig's parameter_overrides decide, else the template's default, lambda).
    ValueError for a mode the template does not have."""
    if not mode:
        return []
    return ["--parameter-overrides", f"FanOut={fan_out.mode(mode).name}"]


@dataclass(frozen=True)
class FailureRoute:
    """Where the changes a stream consumer keeps failing on end up, in the stack's fan-out mode,
    and how an operator delivers them again (docs/design.md, "Fan-out modes").

    - lambda: StreamFailureQueue gets the mapping's failure record (DDBStreamBatchInfo: shard and
      sequence numbers, not the records; requestContext.functionArn names the consumer), once
      the retries are spent; ``python -m ops stream replay`` reads the batch back and invokes
      the consumer with it.
    - pipe, router, pipe-topic, pipe-sfn: the consumer's own <X>DeadLetterQueue gets the message
      itself (its body is the stream record) after maxReceiveCount receives; ``python -m ops dlq
      redrive <X>DeadLetterQueue`` moves it back to the consumer's queue.
    """

    function: str  # the consumer's LogicalId
    output: str  # the stack output of the queue the failures end in
    holds_records: bool  # True: each message is a stream record; False: a batch's failure record
    bound_seconds: float  # how long a change that fails every time takes to get there (margin)
    recover: tuple[str, ...]  # `python -m ops` arguments that deliver them again
    dry_run: tuple[str, ...] | None  # the same, showing only what it would do (None: no dry run)

    @property
    def queue(self) -> str:
        """The queue's name as ops and the docs call it (StreamFailureQueue, <X>DeadLetterQueue)."""
        return self.output.removesuffix("Url")


@dataclass
class StackClient(Stack):
    """ops' Stack, and what the demo, the bench and the tests do to it: the local stack's controls
    (``local``, a `python -m emulator up` process the tooling started), where a consumer's
    failures end up, the table's and the queues' test helpers, Firehose puts, the route."""

    local: LocalStackProcess | None = None

    @classmethod
    def local_stack(cls, process: LocalStackProcess) -> Self:
        """The stack a started `emulator up` process deployed (its name from the `ready` line)."""
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (the local stack's dummy credentials)
            region_name=process.region,
        )
        assert process.stack_name, "the local stack is not ready"
        return cls._described(
            process.stack_name, session, process.endpoint, process.ca_bundle, local=process
        )

    @property
    def is_local(self) -> bool:
        return self.local is not None

    def failure_route(self, function: str) -> FailureRoute:
        """Where ``function``'s (a consumer's) failed changes end up, and how to recover them."""
        assert function in CONSUMERS, f"{function} is not a stream consumer ({CONSUMERS})"
        if not self.consumers_read_queues:
            return FailureRoute(
                function,
                "StreamFailureQueueUrl",
                holds_records=False,
                bound_seconds=STREAM_FAILURE_SECONDS,
                recover=("stream", "replay", "--function", function),
                dry_run=("stream", "replay", "--dry-run", "--function", function),
            )
        queue = self.consumer_queue(function)
        attributes = self.queue_attributes(queue, "VisibilityTimeout", "RedrivePolicy")
        receives = int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])
        dead_letters = self.consumer_dead_letter_queue(function)
        return FailureRoute(
            function,
            dead_letters,
            holds_records=True,
            bound_seconds=int(attributes["VisibilityTimeout"]) * receives + 60,
            recover=("dlq", "redrive", dead_letters.removesuffix("Url")),
            dry_run=None,
        )

    @contextlib.contextmanager
    def failing_consumer(self, function: str) -> Iterator[FailureRoute]:
        """The failure route of a consumer a test is about to make fail. On the local stack in
        pipe/router mode the consumer's queue redelivers after 1 s meanwhile (its visibility
        timeout is set back at the end), so the receives that dead-letter a message take
        seconds rather than maxReceiveCount x the visibility timeout."""
        if not (self.is_local and self.consumers_read_queues):
            yield self.failure_route(function)
            return
        with self.redelivering_at_once(self.consumer_queue(function)):
            yield self.failure_route(function)

    @contextlib.contextmanager
    def redelivering_at_once(self, queue: str) -> Iterator[None]:
        """The queue (a stack output) redelivers a message 1 s after a failed receive while the
        block runs, its visibility timeout set back at the end: the receives that dead-letter a
        message take seconds rather than maxReceiveCount x its visibility timeout."""
        visibility = self.queue_attributes(queue, "VisibilityTimeout")
        self.sqs.set_queue_attributes(
            QueueUrl=self.outputs[queue], Attributes={"VisibilityTimeout": "1"}
        )
        try:
            yield
        finally:
            self.sqs.set_queue_attributes(QueueUrl=self.outputs[queue], Attributes=visibility)

    @contextlib.contextmanager
    def refusing_sends(self, queue: str) -> Iterator[None]:
        """The queue (a stack output) refuses every sender while the block runs (a Deny on
        sqs:SendMessage in its policy, set back at the end): a policy gone wrong, so what a topic
        or a bus delivers to it goes to the subscription's or the target's dead-letter queue."""
        policy = self.queue_attributes(queue, "Policy")
        refusing = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "sqs:SendMessage",
                    "Resource": self.queue_arn(queue),
                }
            ],
        }
        url = self.outputs[queue]
        self.sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(refusing)})
        try:
            yield
        finally:
            self.sqs.set_queue_attributes(QueueUrl=url, Attributes=policy)

    def failed_changes(self, route: FailureRoute, marker: str, since: float) -> list[dict]:
        """The messages (peeked, not consumed) at ``route``'s queue that stand for a test's
        failed change: the stream record itself, holding ``marker`` (every mode but lambda), or
        a failure record of the consumer's mapping sent since ``since`` (lambda: it names a
        batch, not the records)."""
        found = []
        for message in self.peek(route.output):
            if route.holds_records:
                mine = marker in message["Body"]
            else:
                try:
                    body = json.loads(message["Body"])
                    function_arn = body["requestContext"]["functionArn"]
                except (ValueError, KeyError, TypeError):
                    continue
                mine = (
                    "DDBStreamBatchInfo" in body
                    and route.function in function_arn
                    and int(message["Attributes"]["SentTimestamp"]) / 1000 >= since - 5
                )
            if mine:
                found.append(message)
        return found

    def delete_failed_changes(self, route: FailureRoute, marker: str, since: float) -> None:
        """Remove a test's failed changes from ``route``'s queue (see ``failed_changes``)."""
        ids = {m["MessageId"] for m in self.failed_changes(route, marker, since)}
        self.delete_where(route.output, lambda message: message["MessageId"] in ids)

    def _local(self) -> LocalStackProcess:
        assert self.local, "the local stack's controls exist only on the local stack"
        return self.local

    def faults(self, **switches: Any) -> dict:
        """Set fault switches (docs/local-stack.md); the switches and what struck so far."""
        return self._local().control("/_emulator/faults", switches)

    def age_deduplication(self, seconds: float) -> dict:
        """The FIFO topics' and queues' 5-minute deduplication ``seconds`` further on
        (docs/local-stack.md): an id accepted longer ago than 5 minutes by then is delivered
        again. Their counts of ids aged and expired."""
        return self._local().control("/_emulator/age-deduplication", {"seconds": seconds})

    def reset_faults(self) -> None:
        """Every switch back to what the local stack started with."""
        self._local().control("/_emulator/faults/reset", {})

    def failures(self) -> list[FailedInvocation]:
        """Every invocation the local engine reported failed so far, by logical id; [] on AWS."""
        if not self.local:
            return []
        return [
            failure._replace(function=_logical_id(failure.function))
            for failure in list(self.local.failed_invocations)
        ]

    def failed_invocations(self, logical_id: str | None = None) -> int:
        """How many invocations (of one function) failed so far: 0 on AWS."""
        return sum(logical_id in (None, f.function) for f in self.failures())

    def idle(self) -> bool:
        """Nothing left to do: the work queues empty (in flight included) and, on the local
        stack, its engine idle (no batch being delivered). The engine is asked first: one cheap
        call, where the queues' depths are one GetQueueAttributes each, polled several times a
        second while a run waits."""
        if self.local and not self._local().control("/_emulator/status").get("idle"):
            return False
        return not any(self.queue_depth(output) for output in self.work_queues)

    def longest_redelivery(self) -> int:
        """Seconds a failed receive keeps a message out of sight: the longest visibility timeout
        of the work queues (2-12 s locally, minutes in a deployed environment)."""
        return max(
            int(self.queue_attributes(output, "VisibilityTimeout")["VisibilityTimeout"])
            for output in self.work_queues
        )

    def inbox(self) -> list[dict]:
        """Every e-mail the local stack's SES accepted, oldest first (GET /_emulator/inbox)."""
        return self._local().control("/_emulator/inbox")["messages"]

    def mail_sent(self, notification_ids: Iterable[str]) -> dict[str, dict]:
        """SES's Send events recorded by MailEventsFunction (MAIL_SENT items), by notification
        id: on AWS as locally, SES's own word on what it sent."""
        items = self.get_items(
            [{"pk": f"MAIL_SENT#{n}", "sk": "MAIL_SENT"} for n in notification_ids]
        )
        return {item["notification_id"]["S"]: item for item in items}

    def delete_where(self, output: str, predicate: Callable[[dict], bool], rounds: int = 5):
        """Remove a client's own messages (those ``predicate`` picks) from a queue that nothing
        else consumes (DLQs, failure queues); the others become visible again at once."""
        url = self.outputs[output]
        for _ in range(rounds):
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=5, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return
            for message in messages:
                if predicate(message):
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    self.sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )

    def delete_items(self, item_keys: Iterable[dict[str, str]]) -> None:
        for key in item_keys:
            self.dynamodb.delete_item(
                TableName=self.contacts_table,
                Key={name: {"S": value} for name, value in key.items()},
            )

    def items_of_type(self, item_type: str) -> list[dict]:
        """Every item of one type (a Scan: for small tables and the end of a run)."""
        return self._scan(item_type, count=False)

    def count_of_type(self, item_type: str) -> int:
        return self._scan(item_type, count=True)

    def _scan(self, item_type: str, *, count: bool) -> Any:
        request: dict[str, Any] = {
            "TableName": self.contacts_table,
            "FilterExpression": "#t = :t",
            "ExpressionAttributeNames": {"#t": "type"},
            "ExpressionAttributeValues": {":t": {"S": item_type}},
            "ConsistentRead": True,
        }
        if count:
            request["Select"] = "COUNT"
        total, found = 0, []
        while True:
            page = self.dynamodb.scan(**request)
            total += page["Count"]
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return total if count else found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def file_outcome(self, key: str, version: str | None, run: int | None = None) -> dict | None:
        """A file's processing log once its outcome is final (with ``run``: that reprocess run's
        outcome; until the run's first step starts, the log is still the earlier run's); None
        before (a file is IN_PROGRESS from its first step's start, and longer when it takes
        more than one)."""
        if version is None:  # unversioned bucket: the file id ends in the (unknown) sequencer
            logs = [
                log for log in self.items_of_type(keys.PROCESSING_LOG) if log["key"]["S"] == key
            ]
            log = logs[0] if logs else None
        else:
            log = self.file_log(self.file_id(key, version))
        if run is not None and log and log.get("run", {}).get("N") != str(run):
            return None
        return log if log and log["outcome"]["S"] != "IN_PROGRESS" else None

    def file_id(self, key: str, version: str) -> str:
        """A file's id as the ingest names it (shared.s3_events.S3Object): bucket/key#version."""
        return f"{self.bucket}/{key}#{version}"

    @property
    def delivery_stream(self) -> str:
        return self.outputs["ContactRecordsDeliveryStreamName"]

    def put_contact_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Put contact records into the stack's delivery stream as Amazon Connect does: each
        record's compact JSON on its own (the stream appends the delimiter), in PutRecordBatch
        calls of at most FIREHOSE_BATCH_RECORDS records and FIREHOSE_BATCH_BYTES, in order;
        the entries a call reports failed (FailedPutCount: throttled, service errors) are put
        again until they are in. Returns the number of calls (the local stack writes one object
        each; Firehose on AWS buffers them into fewer)."""
        batch: list[bytes] = []
        size, calls = 0, 0
        for record in records:
            data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
            if batch and (
                len(batch) == FIREHOSE_BATCH_RECORDS or size + len(data) > FIREHOSE_BATCH_BYTES
            ):
                calls += self._put_record_batch(batch)
                batch, size = [], 0
            batch.append(data)
            size += len(data)
        if batch:
            calls += self._put_record_batch(batch)
        return calls

    def _put_record_batch(self, batch: list[bytes]) -> int:
        firehose = self.client("firehose")
        for attempt in range(FIREHOSE_ATTEMPTS):
            answer = firehose.put_record_batch(
                DeliveryStreamName=self.delivery_stream, Records=[{"Data": d} for d in batch]
            )
            if not answer["FailedPutCount"]:
                return attempt + 1
            batch = [
                data
                for data, entry in zip(batch, answer["RequestResponses"], strict=True)
                if entry.get("ErrorCode")
            ]
            time.sleep(min(0.1 * 2**attempt, 5))
        raise RuntimeError(
            f"{len(batch)} contact records not accepted by {self.delivery_stream} "
            f"after {FIREHOSE_ATTEMPTS} calls"
        )

    def route(self, caller: str) -> dict[str, str]:
        """RouteFunction's answer for a caller, invoked as Amazon Connect invokes it."""
        response = self.client("lambda").invoke(
            FunctionName=self.outputs["RouteFunctionName"],
            Payload=json.dumps(connect_event(caller)).encode(),
        )
        payload = json.loads(response["Payload"].read() or b"null")
        assert "FunctionError" not in response, f"RouteFunction failed: {payload}"
        return payload

    def set_mapping_enabled(self, output: str, enabled: bool, timeout: float = 120.0) -> None:
        mapping = self.mapping_of(output)
        self.client("lambda").update_event_source_mapping(UUID=mapping["UUID"], Enabled=enabled)
        wanted = "Enabled" if enabled else "Disabled"

        def reached():
            state = self.client("lambda").get_event_source_mapping(UUID=mapping["UUID"])["State"]
            assert state == wanted, f"mapping state {state}, waiting for {wanted}"
            return True

        eventually(reached, timeout=timeout, interval=0.5 if self.is_local else 3)

    def pause_ingest(self) -> None:
        """Disable the IngestFunction mapping and wait until delivery has stopped: Lambda reports
        the mapping "Disabling" until its pollers have stopped, "Disabled" after (the local stack
        too), so a message sent then stays in the queue until delivery resumes."""
        self.set_mapping_enabled("IngestQueueUrl", False)


def _logical_id(physical_name: str) -> str:
    """<stack>-<LogicalId>-<suffix>, the name CloudFormation gives a function -> LogicalId."""
    found = re.search(r"-([A-Za-z0-9]+)-[A-Za-z0-9]+$", physical_name)
    return found[1] if found else physical_name
