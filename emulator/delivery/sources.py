"""In-process access to the local stack's AWS side for the event-source-mapping engine.

The engine runs in the process that serves moto; instead of boto3 over HTTP (a request, moto's
routing, parser and response serializer, botocore's parser: ~1.8 ms per record) it reads queues
and streams through moto's backend objects here (~0.05 ms per record). Everything is
thread-safe with moto's own server threads: a queue is read and changed under its own lock (the
one moto's SQS request handlers take, emulator/services/sqs.py), stream shards are append-only
lists. Both classes need the emulator's moto patches installed (``moto_patches.install()``).

API (what the engine codes against; keep it stable):

``SqsSource(queue_arn)``: account, region and name from the ARN (resolved on every call: a queue
deleted and created again is found again; a missing one raises moto's ``QueueDoesNotExist``).

- ``arn``; ``visibility_timeout`` (the queue's, seconds); ``max_receive_count`` (the redrive
  policy's maxReceiveCount, None without one; read on every access).
- ``receive(max_messages) -> list[dict]``: up to ``max_messages`` (>= 1, no upper limit here)
  messages as ReceiveMessage returns them to boto3 with every attribute asked for:
  ``MessageId``, ``ReceiptHandle``, ``MD5OfBody``, ``Body``, ``Attributes`` (SenderId,
  SentTimestamp, ApproximateReceiveCount, ApproximateFirstReceiveTimestamp, and
  MessageDeduplicationId, MessageGroupId, SequenceNumber, AWSTraceHeader when the message has
  them; string values), ``MessageAttributes`` + ``MD5OfMessageAttributes`` when it has any
  (``BinaryValue`` as bytes). The queue's own visibility timeout applies; messages whose receive
  count reached maxReceiveCount move to the DLQ instead, as moto does at receive time. Never
  waits (use ``emulator.core.wakeups``: every message added to the queue notifies its ARN).
- ``delete(receipt_handles)``: deletes the messages; invalid, stale or repeated handles are
  ignored.
- ``counts() -> (visible, in_flight, delayed)``: ApproximateNumberOfMessages,
  ...NotVisible, ...Delayed.
- ``next_visible_at() -> float | None``: epoch seconds at which the earliest in-flight or
  delayed message becomes visible (None when there is none): how long a poller may sleep when
  ``counts()[0]`` is 0 (nothing notifies a visibility timeout running out).

``StreamSource(stream_arn)``: a DynamoDB stream (the table's current one; raises
``LookupError`` once the table or that stream is gone).

- ``shards() -> list[Shard]``: ``Shard(shard_id, parent_shard_id, closed)``; shards are never
  split or closed locally (parent None, closed False).
- ``records(shard_id, after, limit) -> list[dict]``: the shard's records after sequence number
  ``after`` (None: from the trim horizon), at most ``limit``, as botocore parses GetRecords:
  ``eventID``, ``eventName``, ``eventVersion``, ``eventSource``, ``awsRegion``, ``dynamodb``:
  {``ApproximateCreationDateTime`` (epoch seconds, a float), ``Keys``, ``NewImage``,
  ``OldImage``, ``SequenceNumber``, ``SizeBytes``, ``StreamViewType``}; binary values are bytes.
  Each record and its ``dynamodb`` map are fresh dicts; the images are shared with the stream:
  copy before changing them. An unknown shard raises ``LookupError``.
- ``last_sequence(shard_id) -> str | None``: the shard's newest sequence number (where
  StartingPosition LATEST starts: read the records after it), None for an empty shard.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.sqs.models import Message, Queue, sqs_backends

from emulator.core.arns import parse_arn
from emulator.delivery.mappings import Shard
from emulator.services import dynamodbstreams, sqs


def message_dict(message: Message) -> dict[str, Any]:
    """A received message as boto3's ReceiveMessage returns it (every attribute asked for)."""
    attributes = {
        "SenderId": message.sender_id,
        "SentTimestamp": str(message.sent_timestamp),
        "ApproximateReceiveCount": str(message.approximate_receive_count),
        "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
    }
    if message.deduplication_id is not None:
        attributes["MessageDeduplicationId"] = message.deduplication_id
    if message.group_id is not None:
        attributes["MessageGroupId"] = message.group_id
    trace = (message.system_attributes or {}).get("AWSTraceHeader")
    if trace and trace.get("StringValue"):
        attributes["AWSTraceHeader"] = trace["StringValue"]
    if message.sequence_number is not None:
        attributes["SequenceNumber"] = message.sequence_number
    shaped: dict[str, Any] = {
        "MessageId": message.id,
        "ReceiptHandle": message.receipt_handle,
        "MD5OfBody": message.body_md5,
        "Body": message.body,
        "Attributes": attributes,
    }
    if message.message_attributes:
        shaped["MD5OfMessageAttributes"] = message.attribute_md5
        shaped["MessageAttributes"] = {
            name: dict(value) for name, value in message.message_attributes.items()
        }
    return shaped


class SqsSource:
    """One SQS queue, read and changed in process (see the module docstring)."""

    def __init__(self, queue_arn: str) -> None:
        self.arn = queue_arn
        queue = parse_arn(queue_arn)
        self._account, self._region, self._name = queue.account, queue.region, queue.resource

    def _queue(self) -> Queue:
        return sqs_backends[self._account][self._region].get_queue(self._name)

    @property
    def visibility_timeout(self) -> int:
        return int(self._queue().visibility_timeout)  # type: ignore[attr-defined]

    @property
    def max_receive_count(self) -> int | None:
        queue = self._queue()
        policy = queue.redrive_policy  # type: ignore[attr-defined]
        if isinstance(policy, str):
            policy = json.loads(policy or "{}")
        value = (policy or {}).get("maxReceiveCount")
        return int(value) if value is not None else None

    def receive(self, max_messages: int) -> list[dict[str, Any]]:
        queue = self._queue()
        return sqs.receive(
            queue,
            max(1, int(max_messages)),
            int(queue.visibility_timeout),  # type: ignore[attr-defined]
            message_dict,
        )

    def delete(self, receipt_handles: list[str]) -> None:
        queue = self._queue()
        index = sqs.index(queue)
        with index.lock:
            removed = False
            for handle in receipt_handles:
                message = index.find(handle)
                if message is None:
                    continue
                index.remove(message)
                queue.deleted_messages.update(
                    h for h in message.all_receipt_handles if h is not None
                )
                removed = True
            if removed:
                index.lock.notify_all()

    def counts(self) -> tuple[int, int, int]:
        index = sqs.index(self._queue())
        with index.lock:
            index.advance(sqs.now_ms())
            visible, in_flight, delayed = index.counts
            return visible, in_flight, delayed

    def next_visible_at(self) -> float | None:
        index = sqs.index(self._queue())
        with index.lock:
            index.advance(sqs.now_ms())
            due = index.next_due()
        return None if due is None else due / 1000.0


class StreamSource:
    """One DynamoDB stream, read in process (see the module docstring)."""

    def __init__(self, stream_arn: str) -> None:
        self.arn = stream_arn
        stream = parse_arn(stream_arn)
        self._account, self._region, resource = stream.account, stream.region, stream.resource
        parts = resource.split("/")  # table/<name>/stream/<label>
        if len(parts) != 4 or parts[0] != "table" or parts[2] != "stream":
            raise ValueError(f"not a DynamoDB stream ARN: {stream_arn!r}")
        self._table_name, self._label = parts[1], parts[3]

    def _stream(self) -> dynamodbstreams.Stream:
        tables = dynamodb_backends[self._account][self._region].tables
        table = tables.get(self._table_name)
        if table is None or table.latest_stream_label != self._label:
            raise LookupError(f"stream not found: {self.arn}")
        stream = dynamodbstreams.stream_of(table)
        if stream is None:
            raise LookupError(f"stream not found: {self.arn}")
        return stream

    def shards(self) -> list[Shard]:
        return [Shard(shard.id, None, False) for shard in self._stream().shards]

    def _shard(self, shard_id: str) -> Any:
        shard = self._stream().by_id.get(shard_id)
        if shard is None:
            raise LookupError(f"no shard {shard_id} in {self.arn}")
        return shard

    def records(self, shard_id: str, after: str | None, limit: int) -> list[dict[str, Any]]:
        shard = self._shard(shard_id)
        sequences = shard._q_sequences
        first = 0 if after is None else bisect.bisect_right(sequences, int(after))
        items = shard.items[first : first + max(0, int(limit))]
        return [{**r.record, "dynamodb": dict(r.record["dynamodb"])} for r in items]

    def last_sequence(self, shard_id: str) -> str | None:
        sequences = self._shard(shard_id)._q_sequences
        return str(sequences[-1]) if sequences else None
