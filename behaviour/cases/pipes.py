"""EventBridge Pipes."""

from __future__ import annotations

import json
from typing import Any

from behaviour.case import case
from behaviour.session import Session, wait_for


def _pipe(session: Session, role_arn: str, source: str, target: str, **settings: Any) -> str:
    pipes = session.client("pipes")
    name = f"{session.prefix}-pipe"[:64]
    pipes.create_pipe(Name=name, RoleArn=role_arn, Source=source, Target=target, **settings)
    wait_for(
        lambda: pipes.describe_pipe(Name=name)["CurrentState"] == "RUNNING",
        "the pipe to be RUNNING",
        timeout=60,
    )
    return name


def _texts(batch: list[dict[str, Any]]) -> list[str]:
    return [r["dynamodb"]["NewImage"]["body"]["S"] for r in batch]


@case("Pipes")
def pipe_filter_drops_unmatched_events(session: Session) -> None:
    """A pipe's source filter passes only the matching events to the target (here an SNS
    topic); the others never reach it.
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-pipes-event-filtering.html
    "With EventBridge Pipes, you can filter a given source's events and process only a subset
    of them"."""
    role = session.role()
    table, stream = session.table_with_stream()
    sns = session.client("sns")
    topic = sns.create_topic(Name=f"{session.prefix}-target")["TopicArn"]
    inbox, inbox_arn = session.queue("inbox")
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=inbox_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    pattern = json.dumps({"dynamodb": {"NewImage": {"body": {"S": [{"prefix": "keep"}]}}}})
    _pipe(
        session,
        role,
        stream,
        topic,
        SourceParameters={
            "FilterCriteria": {"Filters": [{"Pattern": pattern}]},
            "DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON"},
        },
    )
    session.put_items(table, "skip-0", "keep-1", "skip-2", "keep-3")
    got = session.messages(inbox, 2, "the matching events", settle=3)
    texts = [json.loads(m["Body"])["dynamodb"]["NewImage"]["body"]["S"] for m in got]
    assert texts == ["keep-1", "keep-3"], texts


@case("Pipes")
def pipe_batch_size_bounds_each_invocation(session: Session) -> None:
    """A source's BatchSize caps how many records one target invocation gets; a Lambda target
    gets the batch as a JSON array.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-pipes-pipe-pipesourcedynamodbstreamparameters.html
    BatchSize: "The maximum number of records to include in each batch"."""
    function = session.function()
    table, stream = session.table_with_stream()
    session.put_items(table, *(f"m{n}" for n in range(5)))
    _pipe(
        session,
        function.role_arn,
        stream,
        function.arn,
        SourceParameters={
            "DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON", "BatchSize": 2}
        },
    )
    events = session.observed(
        function, lambda e: sum(len(b) for b in e) >= 5, "the five records", settle=1
    )
    assert all(isinstance(batch, list) and 1 <= len(batch) <= 2 for batch in events), events
    assert [t for batch in events for t in _texts(batch)] == [f"m{n}" for n in range(5)]


@case("Pipes")
def pipe_stream_retries_then_dead_letter_queue(session: Session) -> None:
    """A stream source retries a failing target MaximumRetryAttempts times, then sends the
    batch's record to the pipe's dead-letter queue.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-pipes-pipe-pipesourcedynamodbstreamparameters.html
    MaximumRetryAttempts: "Discard records after the specified number of retries";
    DeadLetterConfig: "Define the target queue to send dead-letter queue events to"."""
    function = session.function()
    table, stream = session.table_with_stream()
    dlq, dlq_arn = session.queue("dlq")
    _pipe(
        session,
        function.role_arn,
        stream,
        function.arn,
        SourceParameters={
            "DynamoDBStreamParameters": {
                "StartingPosition": "TRIM_HORIZON",
                "MaximumRetryAttempts": 1,
                "DeadLetterConfig": {"Arn": dlq_arn},
            }
        },
    )
    session.put_items(table, "raise-0")
    dead = session.messages(dlq, 1, "the record in the dead-letter queue", timeout=45, settle=2)
    assert len(dead) == 1, dead
    events = session.observed(function, lambda e: len(e) >= 2, "two invocations", settle=1)
    assert len(events) == 2, events
