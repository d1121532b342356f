"""ContactsTable changes as the fan-out consumers receive them, in every fan-out mode.

Mode lambda hands a consumer its stream records directly (a DynamoDB stream event); modes pipe
and router hand it the same records through its queue (an SQS event whose every body is one
stream record as JSON). ``TableChanges`` takes either event and gives the consumer's
``record_handler`` the same ``DynamoDBRecord`` each time, so the domain code does not know the
mode, and returns the partial batch response its event source expects (sequence numbers for a
stream, message ids for a queue), through Powertools' own batch processing.

A queue message whose body is not a stream record fails alone: it is retried, then kept whole in
the consumer's dead-letter queue. Its log line names the message id only (bodies carry contact
data).
"""

import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from shared.batches.sends import BatchSends, SendBatch

STREAM_SOURCE = "aws:dynamodb"
QUEUE_SOURCE = "aws:sqs"
_EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")


class NotAStreamRecord(ValueError):
    """A queue message whose body is not a DynamoDB stream record."""


class TableChanges:
    """Build once per execution environment (module level), after the handler's Logger."""

    def __init__(
        self,
        record_handler: Callable[[DynamoDBRecord], Any],
        send_batch: SendBatch | None = None,
    ):
        """With `send_batch`, what the handler returns for its records is sent in batch calls
        after them (shared.batches.sends)."""
        self._record_handler = record_handler
        self._stream = _processor(EventType.DynamoDBStreams, send_batch)
        self._queue = _processor(EventType.SQS, send_batch)
        # A child of the handler's Logger: the same service, its JSON format and context keys.
        self._logger = Logger(child=True)

    def process(self, event: dict, context) -> dict:
        """The partial batch response to a stream event or to a queue event of stream records."""
        source = event_source(event)
        if source == STREAM_SOURCE:
            handler, processor = self._record_handler, self._stream
        else:
            handler, processor = self._from_queue, self._queue
        return process_partial_response(
            event=event, record_handler=handler, processor=processor, context=context
        )

    def _from_queue(self, record: SQSRecord) -> Any:  # Powertools passes it as record=
        try:
            change = stream_record(record.body)
        except NotAStreamRecord as poison:
            self._logger.error(
                "queue message is not a stream record",
                message_id=record.message_id,
                reason=str(poison),
            )
            raise
        return self._record_handler(change)


def _processor(event_type: EventType, send_batch: SendBatch | None) -> BatchProcessor:
    if send_batch is None:
        return BatchProcessor(event_type=event_type)
    return BatchSends(event_type, send_batch)


def event_source(event: Any) -> str:
    """``aws:dynamodb`` or ``aws:sqs``, the one source of all the event's records. Anything else
    (no records, mixed or unknown sources) is a ValueError: no event source mapping sends it."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        raise ValueError("not a batch event: expected a non-empty Records list")
    sources = {r.get("eventSource") if isinstance(r, dict) else None for r in records}
    if len(sources) != 1 or not sources <= {STREAM_SOURCE, QUEUE_SOURCE}:
        raise ValueError(
            f"expected records all from {STREAM_SOURCE} or all from {QUEUE_SOURCE}, "
            f"got eventSource {sorted(map(str, sources))}"
        )
    return sources.pop()


def stream_record(body: str | None) -> DynamoDBRecord:
    """A queue message's body as the stream record it carries. The reason of a refusal names
    what is wrong, never a value of the body."""
    try:
        data = json.loads(body or "")
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise NotAStreamRecord("body is not JSON") from None
    if not isinstance(data, dict):
        raise NotAStreamRecord("body is not a JSON object")
    if data.get("eventName") not in _EVENT_NAMES:
        raise NotAStreamRecord(f"eventName is not one of {', '.join(_EVENT_NAMES)}")
    if not isinstance(data.get("dynamodb"), dict):
        raise NotAStreamRecord("dynamodb is not an object")
    return DynamoDBRecord(data)
