"""Event source mappings on SQS queues."""

from __future__ import annotations

import json
import time

from behaviour.case import case
from behaviour.session import Session, queue_depth

REPORT = ["ReportBatchItemFailures"]


def _bodies(events: list) -> list[str]:
    return [record["body"] for event in events for record in event["Records"]]


def _send(session: Session, url: str, *bodies: str) -> None:
    entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies)]
    session.client("sqs").send_message_batch(QueueUrl=url, Entries=entries)


@case("SQS mapping")
def sqs_partial_batch_response_returns_only_failed_messages(session: Session) -> None:
    """With ReportBatchItemFailures, only the messages the function reports go back to the
    queue (and on to its dead-letter queue); the others are deleted.
    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html
    "Implementing partial batch responses": "you can configure your event source mapping to
    make only the failed messages visible again. This is called a partial batch response"."""
    function = session.function()
    url, arn, dlq = session.queue_with_dlq(max_receive_count=2)
    _send(session, url, "ok-1", "fail-2", "ok-3")
    session.mapping(function, EventSourceArn=arn, BatchSize=10, FunctionResponseTypes=REPORT)
    dead = session.messages(
        dlq, 1, "the failed message in the dead-letter queue", timeout=45, settle=3
    )
    assert [m["Body"] for m in dead] == ["fail-2"], dead
    bodies = _bodies(session.observed(function, lambda e: True, "the deliveries"))
    assert bodies.count("ok-1") == 1 and bodies.count("ok-3") == 1, bodies
    assert bodies.count("fail-2") == 2, bodies


@case("SQS mapping")
def sqs_batch_item_failures_ignored_without_report_setting(session: Session) -> None:
    """Without ReportBatchItemFailures in FunctionResponseTypes, a returned batchItemFailures
    list means nothing: the invocation succeeded, so the whole batch is deleted.
    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html
    ("To turn on partial batch responses, specify ReportBatchItemFailures for the
    FunctionResponseTypes action"), and as the streams' page says it
    (https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html):
    "these responses will not be processed by Lambda unless the ReportBatchItemFailures
    feature is explicitly turned on for your event source mapping"."""
    function = session.function()
    url, arn, dlq = session.queue_with_dlq(max_receive_count=2)
    _send(session, url, "fail-1")
    session.mapping(function, EventSourceArn=arn, BatchSize=10)
    events = session.observed(function, lambda e: len(e) >= 1, "the delivery", settle=5)
    assert _bodies(events) == ["fail-1"], events
    sqs = session.client("sqs")
    assert queue_depth(sqs, url) == 0 and queue_depth(sqs, dlq) == 0


@case("SQS mapping")
def sqs_filter_deletes_unmatched_messages(session: Session) -> None:
    """A message that matches no filter is never delivered, and it leaves the queue.
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html
    "If none of your filters are satisfied, Lambda discards the record"."""
    function = session.function()
    url, arn, dlq = session.queue_with_dlq(max_receive_count=2)
    keep, drop = json.dumps({"kind": "keep"}), json.dumps({"kind": "drop"})
    _send(session, url, keep, drop)
    pattern = json.dumps({"body": {"kind": ["keep"]}})
    session.mapping(
        function, EventSourceArn=arn, FilterCriteria={"Filters": [{"Pattern": pattern}]}
    )
    events = session.observed(function, lambda e: len(e) >= 1, "the matching message", settle=4)
    assert _bodies(events) == [keep], events
    sqs = session.client("sqs")
    assert queue_depth(sqs, url) == 0 and queue_depth(sqs, dlq) == 0


@case("SQS mapping")
def sqs_partial_batch_response_with_filter(session: Session) -> None:
    """Filtering and partial batch responses together: the unmatched message is deleted
    unseen, the reported one is retried until the queue's redrive policy moves it.
    https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html
    "If none of your filters are satisfied, Lambda discards the record" (the unmatched one),
    with https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html for the
    failed one."""
    function = session.function()
    url, arn, dlq = session.queue_with_dlq(max_receive_count=2)
    keep_ok, keep_fail = json.dumps({"kind": "keep", "n": 1}), json.dumps({"kind": "keep-fail"})
    drop = json.dumps({"kind": "drop"})
    _send(session, url, keep_ok, keep_fail, drop)
    pattern = json.dumps({"body": {"kind": ["keep", "keep-fail"]}})
    session.mapping(
        function,
        EventSourceArn=arn,
        FunctionResponseTypes=REPORT,
        FilterCriteria={"Filters": [{"Pattern": pattern}]},
    )
    dead = session.messages(
        dlq, 1, "the failed message in the dead-letter queue", timeout=45, settle=3
    )
    assert [m["Body"] for m in dead] == [keep_fail], dead
    bodies = _bodies(session.observed(function, lambda e: True, "the deliveries"))
    assert drop not in bodies and bodies.count(keep_ok) == 1, bodies
    assert queue_depth(session.client("sqs"), url) == 0


@case("SQS mapping")
def sqs_batching_window_gathers_one_batch(session: Session) -> None:
    """With MaximumBatchingWindowInSeconds, Lambda gathers records for up to that long before
    it invokes: messages sent a moment apart arrive in one batch.
    https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html
    MaximumBatchingWindowInSeconds: the maximum amount of time, in seconds, that Lambda spends
    gathering records before invoking the function."""
    function = session.function()
    url, arn = session.queue("src")
    session.mapping(function, EventSourceArn=arn, BatchSize=10, MaximumBatchingWindowInSeconds=4)
    sqs = session.client("sqs")
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        time.sleep(0.3)
    events = session.observed(
        function, lambda e: len(_bodies(e)) >= 3, "the three messages", settle=1
    )
    batches = [sorted(r["body"] for r in event["Records"]) for event in events]
    assert batches == [["m0", "m1", "m2"]], batches
