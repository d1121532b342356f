"""The operator's CLI against moto in process: idempotency keys as the functions compute them,
stream failures past retention kept and reported, and bad input refused without a traceback."""

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from shared import keys, notifications

from harness.stack import StackClient
from ops import callers, records, replay
from ops.cli import main
from tests.resources import REGION, client
from tests.unit.conftest import load_handler

TEMPLATE = {
    "Resources": {"StreamFailureQueue": {"Type": "AWS::SQS::Queue"}},
}


@pytest.fixture
def ops_stack(stack, lambda_context) -> StackClient:
    """The unit resources seen through the stack client, with a StreamFailureQueue."""
    cloudformation = client("cloudformation")
    cloudformation.create_stack(StackName="unit", TemplateBody=json.dumps(TEMPLATE))
    [queue] = cloudformation.describe_stack_resources(StackName="unit")["StackResources"]
    failure_url = queue["PhysicalResourceId"]  # a queue's physical id is its URL
    outputs = {
        "ContactsBucketName": stack.bucket,
        "ContactsTableName": stack.contacts_table,
        "IdempotencyTableName": stack.idempotency_table,
        "IngestQueueUrl": stack.ingest_queue_url,
        "NotificationQueueUrl": stack.notification_queue_url,
        "StreamFailureQueueUrl": failure_url,
    }
    return StackClient("unit", boto3.session.Session(region_name=REGION), outputs, {})


def args(**values):
    defaults = dict.fromkeys(("file", "version_id", "notification_id", "kind", "contact_id"))
    return type("Args", (), {**defaults, **values})()


def test_the_notifier_record_is_found_and_purged_by_its_business_key(
    ops_stack, monkeypatch, lambda_context
):
    notifier = load_handler("notifier", monkeypatch)
    notification = notifications.survey(
        {"contact_id": "c-42", "caller": "+15551234567", "email": "a@example.com"}
    )
    event = {
        "Records": [
            {
                "messageId": "m1",
                "receiptHandle": "r1",
                "body": json.dumps(notification),
                "attributes": {},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:notifications",
            }
        ]
    }
    assert notifier.lambda_handler(event, lambda_context) == {"batchItemFailures": []}

    target = args(function="NotifierFunction", kind=keys.SURVEY, contact_id="c-42")
    shown, text, ok = records.show(ops_stack, target)
    [record] = shown["records"]
    assert record["status"] == "COMPLETED" and record["result"] == {
        "notification_id": "SURVEY#c-42"
    }
    assert record["key"].startswith("NotifierFunction#") and "COMPLETED" in text and ok

    by_id = args(function="NotifierFunction", notification_id="SURVEY#c-42")
    assert records.purge(ops_stack, by_id, None)[0]["purged"] == [record["key"]]
    assert records.show(ops_stack, by_id)[0]["records"] == []


def failure_record(stream_arn: str, arrival: datetime) -> str:
    return json.dumps(
        {
            "requestContext": {
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:unit-Goodwill"
            },
            "DDBStreamBatchInfo": {
                "shardId": "shardId-1",
                "startSequenceNumber": "100",
                "endSequenceNumber": "200",
                "approximateArrivalOfFirstRecord": arrival.isoformat(),
                "batchSize": 2,
                "streamArn": stream_arn,
            },
        }
    )


def test_a_batch_past_the_stream_retention_is_reported_and_kept(ops_stack):
    url = ops_stack.outputs["StreamFailureQueueUrl"]
    stream_arn = client("dynamodb").describe_table(TableName=ops_stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]
    old = datetime.now(UTC) - timedelta(hours=25)
    ops_stack.sqs.send_message(QueueUrl=url, MessageBody=failure_record(stream_arn, old))
    ops_stack.sqs.send_message(QueueUrl=url, MessageBody="not a failure record")

    data, text, ok = replay.replay(ops_stack, dry_run=False, function=None)

    outcomes = sorted(batch["outcome"] for batch in data["batches"])
    assert outcomes == ["past retention", "unreadable"] and not ok
    assert "past retention" in text and "unit-Goodwill" in text
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 2  # both kept, visible again


def test_a_range_the_stream_no_longer_returns_is_past_retention(ops_stack):
    stream_arn = client("dynamodb").describe_table(TableName=ops_stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]
    shards = client("dynamodbstreams").describe_stream(StreamArn=stream_arn)["StreamDescription"]
    shard = shards["Shards"][0]
    info = json.loads(failure_record(stream_arn, datetime.now(UTC)))["DDBStreamBatchInfo"]
    info |= {
        "shardId": shard["ShardId"],
        "startSequenceNumber": "1".zfill(21),
        "endSequenceNumber": "2".zfill(21),
    }
    with pytest.raises(replay.PastRetention):
        replay.read_range(ops_stack, info)


def test_emails_and_numbers_are_masked():
    assert callers.mask_email("jane.doe@example.com") == "j***@example.com"
    assert callers.mask_email(None) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "redrive"],
        ["idempotency", "wipe", "NotifierFunction"],
        ["file", "reprocess"],
        ["nonsense"],
    ],
)
def test_malformed_commands_exit_2_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "usage:" in capsys.readouterr().err
