"""Event source mappings on DynamoDB streams."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from botocore.exceptions import ClientError

from behaviour.case import case
from behaviour.session import Function, Session

REPORT = ["ReportBatchItemFailures"]
# services-dynamodb-errors.html, "Example invocation record".
BATCH_INFO_KEYS = {
    "shardId",
    "startSequenceNumber",
    "endSequenceNumber",
    "approximateArrivalOfFirstRecord",
    "approximateArrivalOfLastRecord",
    "batchSize",
    "streamArn",
}


def _texts(event: dict[str, Any]) -> list[str]:
    return [r["dynamodb"]["NewImage"]["body"]["S"] for r in event["Records"]]


def _sequences(event: dict[str, Any]) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]


def _stream_mapping(
    session: Session, function: Function, stream_arn: str, destination: str | None, **settings
) -> str:
    if destination is not None:
        settings["DestinationConfig"] = {"OnFailure": {"Destination": destination}}
    return session.mapping(
        function, EventSourceArn=stream_arn, StartingPosition="TRIM_HORIZON", **settings
    )


def _one_record(session: Session, url: str) -> dict[str, Any]:
    messages = session.messages(url, 1, "the OnFailure record", timeout=45, settle=2)
    assert len(messages) == 1, messages
    return json.loads(messages[0]["Body"])


@case("stream mapping")
def stream_partial_failure_resumes_at_failed_record(session: Session) -> None:
    """With ReportBatchItemFailures, a stream batch is retried from the reported record on:
    the records before it are not sent again.
    https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html
    "Lambda uses the record with the lowest sequence number as the checkpoint. Lambda then
    retries all records starting from that checkpoint"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "ok-0", "fail-1", "ok-2")
    dlq, dlq_arn = session.queue("onfailure")
    _stream_mapping(
        session, function, stream, dlq_arn, FunctionResponseTypes=REPORT, MaximumRetryAttempts=1
    )
    record = _one_record(session, dlq)
    events = session.observed(function, lambda e: len(e) >= 2, "the retry")
    assert _texts(events[0]) == ["ok-0", "fail-1", "ok-2"], events
    assert _texts(events[1])[0] == "fail-1" and "ok-0" not in _texts(events[1]), events
    assert record["DDBStreamBatchInfo"]["startSequenceNumber"] == _sequences(events[0])[1]


@case("stream mapping")
def stream_partial_failures_count_as_retries(session: Session) -> None:
    """A batch the function reports a failure in is retried as a failed invocation is: after
    MaximumRetryAttempts retries it goes to the OnFailure destination.
    https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html
    "Lambda treats all other results as a complete failure and retries processing the batch up
    to the retry limit"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "fail-0")
    dlq, dlq_arn = session.queue("onfailure")
    _stream_mapping(
        session, function, stream, dlq_arn, FunctionResponseTypes=REPORT, MaximumRetryAttempts=2
    )
    record = _one_record(session, dlq)
    events = session.observed(function, lambda e: len(e) >= 3, "three invocations", settle=2)
    assert len(events) == 3, events
    assert record["requestContext"]["approximateInvokeCount"] == 3, record


@case("stream mapping")
def stream_bisect_isolates_the_poison_record(session: Session) -> None:
    """BisectBatchOnFunctionError splits a failing batch in two and retries each half, until
    the bad record is alone; the others are processed.
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html
    "BisectBatchOnFunctionError, which splits a failed batch into two smaller batches,
    isolating bad records"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "ok-0", "ok-1", "raise-2", "ok-3")
    dlq, dlq_arn = session.queue("onfailure")
    _stream_mapping(
        session,
        function,
        stream,
        dlq_arn,
        BisectBatchOnFunctionError=True,
        MaximumRetryAttempts=0,
    )
    record = _one_record(session, dlq)
    events = session.observed(function, lambda e: True, "the halves")
    batches = [_texts(event) for event in events]
    assert batches[0] == ["ok-0", "ok-1", "raise-2", "ok-3"], batches
    assert ["raise-2"] in batches, batches
    clean = {t for batch in batches if "raise-2" not in batch for t in batch}
    assert clean == {"ok-0", "ok-1", "ok-3"}, batches
    info = record["DDBStreamBatchInfo"]
    assert info["batchSize"] == 1 and info["startSequenceNumber"] == info["endSequenceNumber"]


@case("stream mapping")
def stream_on_failure_record_in_sqs(session: Session) -> None:
    """After MaximumRetryAttempts retries of a failing batch, the SQS destination gets an
    invocation record: requestContext (condition RetryAttemptsExhausted, the invoke count),
    responseContext, version and DDBStreamBatchInfo, not the records themselves.
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html
    "Example invocation record"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "raise-0")
    dlq, dlq_arn = session.queue("onfailure")
    _stream_mapping(session, function, stream, dlq_arn, MaximumRetryAttempts=2)
    record = _one_record(session, dlq)
    context = record["requestContext"]
    assert context["condition"] == "RetryAttemptsExhausted", record
    assert context["approximateInvokeCount"] == 3 and context["functionArn"] == function.arn
    assert record["responseContext"]["functionError"] == "Unhandled", record
    assert record["version"] == "1.0" and "timestamp" in record, record
    info = record["DDBStreamBatchInfo"]
    assert set(info) >= BATCH_INFO_KEYS and info["batchSize"] == 1, record
    assert info["streamArn"] == stream, record
    assert "Records" not in record and "payload" not in record, record


@case("stream mapping")
def stream_on_failure_record_in_sns(session: Session) -> None:
    """An SNS topic as the OnFailure destination gets the same invocation record, as the
    notification's Message.
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html
    "you can configure an Amazon SNS topic, Amazon SQS queue, or Amazon S3 bucket as the
    destination"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "raise-0")
    sns = session.client("sns")
    topic = sns.create_topic(Name=f"{session.prefix}-onfailure")["TopicArn"]
    inbox, inbox_arn = session.queue("inbox")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
    _stream_mapping(session, function, stream, topic, MaximumRetryAttempts=0)
    notification = _one_record(session, inbox)
    record = json.loads(notification["Message"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted", record
    assert set(record["DDBStreamBatchInfo"]) >= BATCH_INFO_KEYS, record


@case("stream mapping")
def stream_on_failure_record_in_s3(session: Session) -> None:
    """An S3 bucket as the OnFailure destination gets one object per discarded batch, keyed
    aws/lambda/<mapping UUID>/<shard ID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<random UUID>, holding
    the invocation record and the invocation's payload.
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html
    (the OnFailure destinations: an S3 bucket gets the invocation record with the invocation's
    payload, under the object key above)."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "raise-0")
    s3 = session.client("s3")
    bucket = f"{session.prefix}-onfailure".lower()
    s3.create_bucket(Bucket=bucket)
    mapping = _stream_mapping(
        session, function, stream, f"arn:aws:s3:::{bucket}", MaximumRetryAttempts=0
    )
    session.observed(function, lambda e: len(e) >= 1, "the invocation")
    keys: list[str] = []
    for _ in range(100):
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        if keys:
            break
        session.observed(function, lambda e: True, "a pause", timeout=1)
    assert len(keys) == 1, keys
    shape = (
        rf"aws/lambda/{mapping}/[^/]+/\d{{4}}/\d{{2}}/\d{{2}}/"
        r"\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}-[0-9a-f-]{36}"
    )
    assert re.fullmatch(shape, keys[0]), keys
    record = json.loads(s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read())
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted", record
    assert record["payload"], record


@case("stream mapping")
def stream_maximum_record_age_range(session: Session) -> None:
    """MaximumRecordAgeInSeconds is -1 (records never expire) or 60 to 604800: 30 is refused
    at CreateEventSourceMapping, 60 accepted.
    https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html
    (MaximumRecordAgeInSeconds: -1, infinite, or an age from 60 seconds to 7 days), with
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html for what an
    age past it does (the batch is discarded to the OnFailure destination)."""
    function = session.function(probe=False)  # never invoked: the case is the settings
    _, stream = session.table_with_stream()
    lam = session.client("lambda")
    try:
        lam.create_event_source_mapping(
            FunctionName=function.name,
            EventSourceArn=stream,
            StartingPosition="LATEST",
            MaximumRecordAgeInSeconds=30,
        )
    except ClientError as error:
        assert error.response["Error"]["Code"] == "InvalidParameterValueException", error
    else:
        raise AssertionError("MaximumRecordAgeInSeconds=30 was accepted")
    mapping = _stream_mapping(session, function, stream, None, MaximumRecordAgeInSeconds=60)
    assert lam.get_event_source_mapping(UUID=mapping)["MaximumRecordAgeInSeconds"] == 60


@case("stream mapping")
def stream_filter_with_partial_batch_response(session: Session) -> None:
    """On a stream, records that match no filter are skipped (never delivered, never retried)
    while a matching record the function reports failed is retried.
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html
    "If none of your filters are satisfied, Lambda discards the record", with
    https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html for
    the reported one."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, "skip-0", "keep-fail-1", "keep-2")
    dlq, dlq_arn = session.queue("onfailure")
    pattern = json.dumps({"dynamodb": {"NewImage": {"body": {"S": [{"prefix": "keep"}]}}}})
    _stream_mapping(
        session,
        function,
        stream,
        dlq_arn,
        FunctionResponseTypes=REPORT,
        MaximumRetryAttempts=1,
        FilterCriteria={"Filters": [{"Pattern": pattern}]},
    )
    _one_record(session, dlq)
    events = session.observed(function, lambda e: len(e) >= 2, "the retry", settle=1)
    texts = [t for event in events for t in _texts(event)]
    assert "skip-0" not in texts, texts
    assert texts.count("keep-fail-1") == 2, texts


@case("stream mapping")
def stream_batching_window_gathers_one_batch(session: Session) -> None:
    """On a stream too, MaximumBatchingWindowInSeconds makes Lambda gather records before it
    invokes: records written a moment apart arrive in one batch.
    https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html
    MaximumBatchingWindowInSeconds: the maximum amount of time, in seconds, that Lambda spends
    gathering records before invoking the function."""
    function = session.function()
    table, stream = session.table_with_stream()
    _stream_mapping(session, function, stream, None, BatchSize=10, MaximumBatchingWindowInSeconds=4)
    ddb = session.client("dynamodb")
    for n in range(3):
        item = {"pk": {"S": "p"}, "sk": {"S": f"{n:03d}"}, "body": {"S": f"m{n}"}}
        ddb.put_item(TableName=table, Item=item)
        time.sleep(0.3)
    events = session.observed(
        function, lambda e: sum(len(x["Records"]) for x in e) >= 3, "the three records", settle=1
    )
    assert [_texts(event) for event in events] == [["m0", "m1", "m2"]], events
