"""`ops stream replay`: each failed stream batch of StreamFailureQueue delivered again.

A failure record (Lambda's OnFailure invocation record) names the consumer
(requestContext.functionArn) and the batch (DDBStreamBatchInfo: stream, shard, first and last
sequence number), not the records. They are read back from the stream (GetShardIterator
AT_SEQUENCE_NUMBER, GetRecords up to the last sequence number), shaped as Lambda delivers them
(eventSourceARN added, times as epoch seconds). The range holds every change between the
batch's first and last record, and the batch only those the reader's filter admitted (a survey
batch of 100 spans thousands of changes at a 2% survey rate, several MiB over Invoke's 6 MiB):
so the reader's own FilterCriteria (its event source mapping's, or the pipe's) are applied first
(ops.stream_filter), and what passes is delivered in chunks of at most the mapping's BatchSize
and under Invoke's 6 MiB request limit. A chunk that fails is reported and the next is
delivered; the failure record is deleted only when every chunk succeeded with no batch item
failure, else kept for another replay (the consumers are idempotent: chunks that succeeded
repeat nothing).

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
  unites); `--function ChangePipe` (its LogicalId) picks them. In pipe-topic mode the records
  are published to the pipe's target topic, each record the body, and each consumer's
  subscription filter picks its own. In pipe-sfn mode each batch of 10 is the input of one
  synchronous execution of the pipe's target machine (StartSyncExecution, as the pipe starts it),
  which sends every record to each consumer's queue, where the consumer's queue filter picks its
  own; an execution that does not succeed is reported with its error and the record kept.
A failure record of any other shape is reported `unreadable` and kept. In every mode but lambda
a consumer's own failures are not here but in its <X>DeadLetterQueue: `ops dlq redrive`.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError, ParamValidationError

from ops import table
from ops.errors import OpsError
from ops.stack import CONSUMERS, Stack, lambda_function_name, parse_arn
from ops.stream_filter import StreamFilter, UnsupportedFilter

RETENTION = timedelta(hours=24)  # DynamoDB Streams keeps records this long
VISIBILITY_SECONDS = 120  # a failure record is hidden while its batch is replayed
EMPTY_READS = 5  # empty GetRecords pages in a row before a range counts as unreadable


class PastRetention(Exception):
    """The stream no longer holds the batch's records."""


PIPE_BATCH = 10  # records a pipe delivers at once to a bus or a topic (PutEvents, PublishBatch)
INVOKE_LIMIT = 6 * 1024 * 1024  # bytes of a synchronous Invoke's request payload (6,291,456)


@dataclass(frozen=True)
class Reader:
    """What the failed batch's reader is given: the records its filter admits, so many a
    delivery (its BatchSize; a pipe's: what one PutEvents or PublishBatch takes)."""

    filter: StreamFilter
    batch_size: int


class NoReader(Exception):
    """The reader no longer reads the batch's stream (its mapping or pipe is gone)."""


def replay(
    stack: Stack, *, dry_run: bool, function: str | None
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
        dead_letters = stack.consumer_dead_letter_queue(function).removesuffix("Url")
        text += (
            f"\n(fan-out mode {stack.fan_out}: {function}'s own failures are in {dead_letters}, "
            f"not here: python -m ops dlq redrive {dead_letters})"
        )
    return {"dry_run": dry_run, "batches": shown}, text, ok


def release(stack: Stack, url: str, results: list[dict[str, Any]]) -> None:
    for result in results:
        if result["outcome"] != "replayed":
            stack.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=result.pop("receipt_handle"), VisibilityTimeout=0
            )
        else:
            result.pop("receipt_handle")


def handle(
    stack: Stack,
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
        function_name = pipe or lambda_function_name(reader)
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
    return result | deliver(stack, info, pipe, function_name, dry_run)


def deliver(
    stack: Stack, info: dict, pipe: str | None, function_name: str, dry_run: bool
) -> dict[str, Any]:
    """The batch read back, filtered as its reader filters, and delivered to the reader."""
    try:
        records = read_range(stack, info)
    except PastRetention as gone:
        return {"outcome": "past retention", "detail": str(gone)}
    except ParamValidationError:
        return {"outcome": "unreadable", "detail": "malformed shard or sequence number"}
    try:
        reader = reader_of(stack, pipe, function_name, info["streamArn"])
    except (NoReader, UnsupportedFilter) as error:
        return {"outcome": "failed", "detail": str(error), "read": len(records)}
    admitted = [record for record in records if reader.filter.admits(record)]
    counts = {"read": len(records), "records": len(admitted)}
    if dry_run:
        return counts | {"outcome": "would replay"}
    if pipe:
        return counts | deliver_as_the_pipe(stack, pipe, admitted)
    return counts | invoke_chunks(stack, function_name, chunks(admitted, reader.batch_size))


def reader_of(stack: Stack, pipe: str | None, function_name: str, stream_arn: str) -> Reader:
    """The reader's filter and batch size, as deployed: the pipe's, or the function's mapping
    on the batch's stream."""
    if pipe:
        try:
            source = stack.client("pipes").describe_pipe(Name=pipe).get("SourceParameters") or {}
        except ClientError as error:
            raise NoReader(f"pipe {pipe}: {error.response['Error']['Code']}") from None
        return Reader(StreamFilter.of(source.get("FilterCriteria")), PIPE_BATCH)
    mappings = stack.client("lambda").list_event_source_mappings(
        FunctionName=function_name, EventSourceArn=stream_arn
    )["EventSourceMappings"]
    if not mappings:
        raise NoReader(f"{function_name} has no event source mapping on the batch's stream")
    mapping = mappings[0]
    return Reader(StreamFilter.of(mapping.get("FilterCriteria")), mapping["BatchSize"])


def chunks(records: list[dict], batch_size: int, limit: int = INVOKE_LIMIT) -> list[bytes]:
    """The Invoke payloads ({"Records": [...]}) of the records, in order: each of at most
    ``batch_size`` records and ``limit`` bytes (a record bigger than that alone, refused by
    Invoke and reported as its chunk's failure)."""
    head, separator, tail = b'{"Records": [', b", ", b"]}"
    payloads: list[bytes] = []
    current: list[bytes] = []
    size = len(head) + len(tail)
    for record in records:
        encoded = json.dumps(record).encode()
        grown = size + len(encoded) + (len(separator) if current else 0)
        if current and (len(current) == batch_size or grown > limit):
            payloads.append(head + separator.join(current) + tail)
            current, size = [], len(head) + len(tail)
            grown = size + len(encoded)
        current.append(encoded)
        size = grown
    if current:
        payloads.append(head + separator.join(current) + tail)
    return payloads


def pipe_name(arn: str) -> str | None:
    """arn:aws:pipes:<region>:<account>:pipe/<name> -> name; None for any other ARN."""
    parts = parse_arn(arn)
    if parts["service"] == "pipes" and parts["resource"].startswith("pipe/"):
        return parts["resource"].removeprefix("pipe/")
    return None


def check_retention(info: dict) -> None:
    """PastRetention when the batch's first record arrived longer ago than the stream keeps
    records."""
    arrival = info.get("approximateArrivalOfFirstRecord")
    if arrival and datetime.fromisoformat(arrival) < datetime.now(UTC) - RETENTION:
        raise PastRetention(f"first record arrived {arrival}, more than 24 h ago")


def read_range(stack: Stack, info: dict) -> list[dict]:
    first, last = int(info["startSequenceNumber"]), int(info["endSequenceNumber"])
    check_retention(info)
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


def invoke_chunks(stack: Stack, function_name: str, payloads: list[bytes]) -> dict[str, Any]:
    """Each payload invoked in turn, a failed one reported and the next invoked all the same."""
    outcomes = [invoke(stack, function_name, payload) for payload in payloads]
    failed = [
        f"chunk {n} of {len(payloads)}: {detail}"
        for n, detail in enumerate(outcomes, start=1)
        if detail is not None
    ]
    result: dict[str, Any] = {"chunks": len(payloads), "chunks_failed": len(failed)}
    if failed:
        return result | {"outcome": "failed", "detail": "; ".join(failed)}
    return result | {"outcome": "replayed"}


def invoke(stack: Stack, function_name: str, payload: bytes) -> str | None:
    """What went wrong with one Invoke of the reader, or None when it took every record."""
    try:
        response = stack.client("lambda").invoke(FunctionName=function_name, Payload=payload)
    except ClientError as error:  # e.g. 413 RequestEntityTooLargeException, throttling
        return f"Invoke refused: {error.response['Error']['Code']}"
    answer = json.loads(response["Payload"].read() or b"null")
    if "FunctionError" in response:
        error = answer.get("errorType") if isinstance(answer, dict) else None
        return f"function error {error or ''}".strip()
    failures = answer.get("batchItemFailures") if isinstance(answer, dict) else None
    if failures:
        return f"{len(failures)} record(s) failed again"
    return None


def deliver_as_the_pipe(stack: Stack, pipe: str, records: list[dict]) -> dict[str, Any]:
    """The records to the pipe's target as the pipe sends them, 10 at a time: one event per
    record on a bus, one message per record on a topic, the batch as one execution's input on a
    state machine."""
    described = stack.client("pipes").describe_pipe(Name=pipe)
    target = described["Target"]
    batches = [records[i : i + PIPE_BATCH] for i in range(0, len(records), PIPE_BATCH)]
    service = parse_arn(target)["service"]
    if service == "events":
        bus = (described.get("TargetParameters") or {}).get("EventBridgeEventBusParameters") or {}
        failed = [code for batch in batches for code in put_events(stack, pipe, target, bus, batch)]
    elif service == "sns":
        failed = [code for batch in batches for code in publish(stack, target, batch)]
    elif service == "states":
        failed = [code for batch in batches for code in execute(stack, target, batch)]
    else:
        return {"outcome": "failed", "detail": f"the pipe's target {target} is not replayable"}
    if failed:
        codes = ", ".join(sorted(set(failed)))
        detail = f"{service}: {len(failed)} of {len(records)} record(s) not delivered ({codes})"
        return {"outcome": "failed", "detail": detail}
    return {"outcome": "replayed"}


def put_events(stack: Stack, pipe: str, bus_arn: str, bus: dict, records: list[dict]) -> list[str]:
    """One event per record, with the pipe's Source and DetailType; a reason per record not put."""
    entries = [
        {
            "Source": bus.get("Source") or f"Pipe {pipe}",
            "DetailType": bus.get("DetailType") or "Event from aws:dynamodb",
            "Resources": bus.get("Resources") or [],
            "Detail": json.dumps(record),
            "EventBusName": bus_arn,
        }
        for record in records
    ]
    try:
        response = stack.client("events").put_events(Entries=entries)
    except ClientError as error:
        return [error.response["Error"]["Code"]] * len(entries)
    return [e["ErrorCode"] for e in response["Entries"] if e.get("ErrorCode")]


def publish(stack: Stack, topic_arn: str, records: list[dict]) -> list[str]:
    """One message per record, the record itself as the body; a reason per record not published."""
    entries = [{"Id": str(n), "Message": json.dumps(r)} for n, r in enumerate(records)]
    try:
        response = stack.client("sns").publish_batch(
            TopicArn=topic_arn, PublishBatchRequestEntries=entries
        )
    except ClientError as error:
        return [error.response["Error"]["Code"]] * len(entries)
    return [f["Code"] for f in response.get("Failed", [])]


def execute(stack: Stack, machine_arn: str, records: list[dict]) -> list[str]:
    """The batch as one synchronous execution, as the pipe starts it; the execution's error
    for each record when it did not succeed."""
    try:
        response = stack.client("stepfunctions").start_sync_execution(
            stateMachineArn=machine_arn, input=json.dumps(records)
        )
    except ClientError as error:
        return [error.response["Error"]["Code"]] * len(records)
    if response["status"] == "SUCCEEDED":
        return []
    return [response.get("error") or response["status"]] * len(records)


def render(results: list[dict[str, Any]], dry_run: bool) -> str:
    if not results:
        return "StreamFailureQueue: no failed batch to replay"
    rows = [
        (
            r.get("function"),
            r.get("shard"),
            f"{r.get('first_sequence')}..{r.get('last_sequence')}",
            f"{r['records']} of {r['read']}" if "records" in r else r.get("read"),
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
        ("READER", "SHARD", "SEQUENCE NUMBERS", "RECORDS (FILTERED OF READ)", "AGE", "OUTCOME"),
        rows,
    )
