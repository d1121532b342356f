"""`ops stream replay`: each failed stream batch of StreamFailureQueue delivered again.

A failure record (Lambda's OnFailure invocation record) names the consumer
(requestContext.functionArn) and the batch (DDBStreamBatchInfo: stream, shard, first and last
sequence number), not the records. They are read back from the stream (GetShardIterator
AT_SEQUENCE_NUMBER, GetRecords up to the last sequence number), shaped as Lambda delivers them
(eventSourceARN added, times as epoch seconds) and the consumer is invoked with exactly those.
The failure record is deleted only when the consumer succeeded with no batch item failure.
Records in the range that the mapping's filter would have left out are delivered too: every
consumer checks what it acts on itself (shared.contacts) and is idempotent, so a replay of
records it already handled repeats nothing.

A batch whose records the stream no longer holds (past its 24 hours, trimmed, or the shard gone)
is reported and its failure record kept: it is never dropped without the operator seeing it.

The stream readers of every fan-out mode send their failures here, and each is replayed through
the reader that failed, so every consumer behind it gets the records again:
- a consumer's mapping (lambda mode) or RouterFunction's (router mode: the router publishes the
  records to ChangeTopic again, and each consumer's subscription filter picks its own);
- ChangePipe (pipe mode; ``requestContext.functionArn`` is the pipe's ARN, as the local stack's
  pipes write it): the records are put on the pipe's target bus as the pipe puts them (its
  Source and DetailType, one event per record, the record as ``detail``), and the rules send
  each to the consumers whose pattern it matches. Records the pipe's filter would have dropped
  match no rule either (every rule's pattern is one of the consumers' filters the pipe's filter
  unites); `--function ChangePipe` (its LogicalId) picks them.
A failure record of any other shape is reported `unreadable` and kept. In pipe and router mode
a consumer's own failures are not here but in its <X>DeadLetterQueue: `ops dlq redrive`.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ParamValidationError
from harness.stack import CONSUMERS, StackClient

from ops import table
from ops.errors import OpsError

RETENTION = timedelta(hours=24)  # DynamoDB Streams keeps records this long
VISIBILITY_SECONDS = 120  # a failure record is hidden while its batch is replayed
EMPTY_READS = 5  # empty GetRecords pages in a row before a range counts as unreadable


class PastRetention(Exception):
    """The stream no longer holds the batch's records."""


PUT_EVENTS_LIMIT = 10  # entries per PutEvents request


def replay(
    stack: StackClient, *, dry_run: bool, function: str | None
) -> tuple[dict[str, Any], str, bool]:
    functions = stack.functions() | stack.resources("AWS::Pipes::Pipe")
    if function is not None and function not in functions:
        raise OpsError(f"unknown function or pipe {function!r}: {' | '.join(sorted(functions))}")
    logical_ids = {name: logical_id for logical_id, name in functions.items()}
    url = stack.outputs["StreamFailureQueueUrl"]
    results: list[dict[str, Any]] = []
    while True:
        messages = stack.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=VISIBILITY_SECONDS,
            WaitTimeSeconds=0 if stack.is_local else 1,
        ).get("Messages", [])
        seen = {r["message_id"] for r in results}
        fresh = [m for m in messages if m["MessageId"] not in seen]
        if not fresh:
            break
        for message in fresh:
            result = handle(stack, message, logical_ids, function, dry_run)
            results.append(result)
            if result["outcome"] == "replayed":
                stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # what stays (skipped, failed, past retention, dry run) is visible again at once
    release(stack, url, results)
    shown = [r for r in results if r["outcome"] != "skipped"]
    ok = all(r["outcome"] in ("replayed", "would replay") for r in shown)
    text = render(shown, dry_run)
    if stack.consumers_read_queues and function in CONSUMERS:
        dead_letters = stack.failure_route(function).queue
        text += (
            f"\n(fan-out mode {stack.fan_out}: {function}'s own failures are in {dead_letters}, "
            f"not here: python -m ops dlq redrive {dead_letters})"
        )
    return {"dry_run": dry_run, "batches": shown}, text, ok


def release(stack: StackClient, url: str, results: list[dict[str, Any]]) -> None:
    for result in results:
        if result["outcome"] != "replayed":
            stack.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=result.pop("receipt_handle"), VisibilityTimeout=0
            )
        else:
            result.pop("receipt_handle")


def handle(
    stack: StackClient,
    message: dict,
    logical_ids: dict[str, str],
    only: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "message_id": message["MessageId"],
        "receipt_handle": message["ReceiptHandle"],
    }
    try:
        body = json.loads(message["Body"])
        info = body["DDBStreamBatchInfo"]
        reader = body["requestContext"]["functionArn"]
        pipe = pipe_name(reader)
        function_name = pipe or reader.split(":")[6]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return result | {"outcome": "unreadable", "detail": "not a stream failure record"}
    function = logical_ids.get(function_name, function_name)
    result |= {
        "function": function,
        "shard": info["shardId"],
        "first_sequence": info["startSequenceNumber"],
        "last_sequence": info["endSequenceNumber"],
        "first_arrival": info.get("approximateArrivalOfFirstRecord"),
    }
    if only is not None and function != only:
        return result | {"outcome": "skipped"}
    try:
        records = read_range(stack, info)
    except PastRetention as gone:
        return result | {"outcome": "past retention", "detail": str(gone)}
    except ParamValidationError:
        return result | {"outcome": "unreadable", "detail": "malformed shard or sequence number"}
    result["records"] = len(records)
    if dry_run:
        return result | {"outcome": "would replay"}
    return result | (
        put_on_bus(stack, pipe, records) if pipe else invoke(stack, function_name, records)
    )


def pipe_name(arn: str) -> str | None:
    """arn:aws:pipes:<region>:<account>:pipe/<name> -> name; None for any other ARN."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[2] == "pipes" and parts[5].startswith("pipe/"):
        return parts[5].removeprefix("pipe/")
    return None


def read_range(stack: StackClient, info: dict) -> list[dict]:
    first, last = int(info["startSequenceNumber"]), int(info["endSequenceNumber"])
    arrival = info.get("approximateArrivalOfFirstRecord")
    if arrival and datetime.fromisoformat(arrival) < datetime.now(UTC) - RETENTION:
        raise PastRetention(f"first record arrived {arrival}, more than 24 h ago")
    streams = stack.client("dynamodbstreams")
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=info["streamArn"],
            ShardId=info["shardId"],
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info["startSequenceNumber"],
        )["ShardIterator"]
    except (
        streams.exceptions.TrimmedDataAccessException,
        streams.exceptions.ResourceNotFoundException,
    ) as error:
        raise PastRetention(error.response["Error"].get("Message", "trimmed")) from None
    records: list[dict] = []
    empty = 0
    while iterator and empty < EMPTY_READS:
        page = streams.get_records(ShardIterator=iterator, Limit=1000)
        iterator = page.get("NextShardIterator")
        empty = 0 if page["Records"] else empty + 1
        for record in page["Records"]:
            number = int(record["dynamodb"]["SequenceNumber"])
            if not records and number != first:
                raise PastRetention("the stream no longer holds the batch's first record")
            if number > last:
                return records
            records.append(lambda_record(record, info["streamArn"]))
            if number == last:
                return records
        if not page["Records"]:
            time.sleep(0.2)
    raise PastRetention(f"the stream ended before the batch's last record ({last})")


def lambda_record(record: dict, stream_arn: str) -> dict:
    """A GetRecords record as Lambda delivers it: with eventSourceARN, times as epoch seconds,
    binary values base64 (boto3 parsed them into datetimes and bytes)."""
    return json.loads(json.dumps({**record, "eventSourceARN": stream_arn}, default=_wire))


def _wire(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def invoke(stack: StackClient, function_name: str, records: list[dict]) -> dict[str, Any]:
    response = stack.client("lambda").invoke(
        FunctionName=function_name, Payload=json.dumps({"Records": records}).encode()
    )
    payload = json.loads(response["Payload"].read() or b"null")
    if "FunctionError" in response:
        error = payload.get("errorType") if isinstance(payload, dict) else None
        return {"outcome": "failed", "detail": f"function error {error or ''}".strip()}
    failures = (payload or {}).get("batchItemFailures") if isinstance(payload, dict) else None
    if failures:
        return {"outcome": "failed", "detail": f"{len(failures)} record(s) failed again"}
    return {"outcome": "replayed"}


def put_on_bus(stack: StackClient, pipe: str, records: list[dict]) -> dict[str, Any]:
    """The records on the pipe's target bus, as the pipe puts them (PutEvents, 10 a request)."""
    described = stack.client("pipes").describe_pipe(Name=pipe)
    target = described["Target"]
    if ":events:" not in target:
        return {"outcome": "failed", "detail": f"the pipe's target {target} is not an event bus"}
    bus = (described.get("TargetParameters") or {}).get("EventBridgeEventBusParameters") or {}
    entries = [
        {
            "Source": bus.get("Source") or f"Pipe {pipe}",
            "DetailType": bus.get("DetailType") or "Event from aws:dynamodb",
            "Resources": bus.get("Resources") or [],
            "Detail": json.dumps(record),
            "EventBusName": target,
        }
        for record in records
    ]
    events = stack.client("events")
    for start in range(0, len(entries), PUT_EVENTS_LIMIT):
        response = events.put_events(Entries=entries[start : start + PUT_EVENTS_LIMIT])
        if response.get("FailedEntryCount"):
            failed = next(e for e in response["Entries"] if e.get("ErrorCode"))
            return {
                "outcome": "failed",
                "detail": f"PutEvents: {failed['ErrorCode']} (records from {start + 1} on not put)",
            }
    return {"outcome": "replayed"}


def render(results: list[dict[str, Any]], dry_run: bool) -> str:
    if not results:
        return "StreamFailureQueue: no failed batch to replay"
    rows = [
        (
            r.get("function"),
            r.get("shard"),
            f"{r.get('first_sequence')}..{r.get('last_sequence')}",
            r.get("records"),
            table.age(
                (datetime.now(UTC) - datetime.fromisoformat(r["first_arrival"])).total_seconds()
                if r.get("first_arrival")
                else None
            ),
            r["outcome"] + (f": {r['detail']}" if r.get("detail") else ""),
        )
        for r in results
    ]
    heading = "dry run: nothing invoked, nothing deleted\n" if dry_run else ""
    return heading + table.render(
        ("READER", "SHARD", "SEQUENCE NUMBERS", "RECORDS", "AGE", "OUTCOME"), rows
    )
