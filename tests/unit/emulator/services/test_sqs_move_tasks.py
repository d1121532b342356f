"""emulator/services/sqs_move_tasks.py: StartMessageMoveTask, ListMessageMoveTasks and
CancelMessageMoveTask as SQS answers them, through boto3 against moto in process."""

import json

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.process import REGION
from emulator.services import sqs_move_tasks
from harness.polling import eventually
from tests.unit.emulator.support import fake_credentials, new_queue

pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture
def sqs(monkeypatch):
    fake_credentials(monkeypatch)
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)
    sqs_move_tasks.reset()  # the tasks outlive the mock


def with_dlq(sqs, name: str, dlq_arn: str) -> tuple[str, str]:
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    return new_queue(sqs, name, RedrivePolicy=policy, VisibilityTimeout="0")


def dead_letter(sqs, url: str, bodies: list[str]) -> None:
    """Each body received once (maxReceiveCount 1), so the next receive moves it to the DLQ."""
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=ATTRIBUTES)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert not sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages")


ATTRIBUTES = {"origin": {"DataType": "String", "StringValue": "test"}}


def bodies(sqs, url: str) -> list[str]:
    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", [])
    assert all(m["MessageAttributes"] == ATTRIBUTES for m in messages)
    return sorted(m["Body"] for m in messages)


def finished(sqs, source_arn: str) -> dict:
    def done():
        [task] = sqs.list_message_move_tasks(SourceArn=source_arn)["Results"]
        assert task["Status"] != "RUNNING", task
        return task

    return eventually(done, timeout=60, interval=0.05)


def test_messages_go_back_to_the_queue_each_came_from(sqs):
    dlq_url, dlq_arn = new_queue(sqs, "dlq")
    a_url, _ = with_dlq(sqs, "a", dlq_arn)
    b_url, _ = with_dlq(sqs, "b", dlq_arn)
    dead_letter(sqs, a_url, ["a1", "a2"])
    dead_letter(sqs, b_url, ["b1"])

    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]

    task = finished(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert task["ApproximateNumberOfMessagesToMove"] == 3
    assert "TaskHandle" not in task and "DestinationArn" not in task and handle
    assert bodies(sqs, a_url) == ["a1", "a2"]
    assert bodies(sqs, b_url) == ["b1"]
    assert not sqs.receive_message(QueueUrl=dlq_url).get("Messages")


def test_a_destination_and_a_rate_are_kept(sqs):
    _, dlq_arn = new_queue(sqs, "dlq")
    source_url, _ = with_dlq(sqs, "source", dlq_arn)
    other_url, other_arn = new_queue(sqs, "other")
    dead_letter(sqs, source_url, ["m1", "m2", "m3"])

    handle = sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=other_arn, MaxNumberOfMessagesPerSecond=20
    )["TaskHandle"]
    [running] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert running["Status"] == "RUNNING" and running["TaskHandle"] == handle

    task = finished(sqs, dlq_arn)
    assert (task["DestinationArn"], task["MaxNumberOfMessagesPerSecond"]) == (other_arn, 20)
    assert bodies(sqs, other_url) == ["m1", "m2", "m3"]


def test_cancel_stops_a_running_task(sqs):
    dlq_url, dlq_arn = new_queue(sqs, "dlq")
    source_url, _ = with_dlq(sqs, "source", dlq_arn)
    dead_letter(sqs, source_url, [f"m{i}" for i in range(10)])

    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=2)[
        "TaskHandle"
    ]
    with pytest.raises(ClientError, match="UnsupportedOperation"):  # one running task per queue
        sqs.start_message_move_task(SourceArn=dlq_arn)
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]

    task = finished(sqs, dlq_arn)
    assert task["Status"] == "CANCELLED"
    assert moved < 10
    with pytest.raises(ClientError, match="UnsupportedOperation"):
        sqs.cancel_message_move_task(TaskHandle=handle)
    attributes = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    left = int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )
    assert left + task["ApproximateNumberOfMessagesMoved"] == 10


def test_newest_task_first_and_max_results(sqs):
    _, dlq_arn = new_queue(sqs, "dlq")
    with_dlq(sqs, "source", dlq_arn)
    for _ in range(3):
        sqs.start_message_move_task(SourceArn=dlq_arn)
        finished(sqs, dlq_arn)
    assert len(sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]) == 3
    with pytest.raises(ClientError, match="InvalidParameterValue"):
        sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=11)


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"SourceArn": "arn:aws:sqs:us-east-1:123456789012:missing"}, "ResourceNotFound"),
        ({"SourceArn": "plain"}, "InvalidParameterValue"),
        ({"SourceArn": "{dlq}", "DestinationArn": "{dlq}-x"}, "ResourceNotFound"),
        ({"SourceArn": "{dlq}", "MaxNumberOfMessagesPerSecond": 501}, "InvalidParameterValue"),
        ({"SourceArn": "{plain}"}, "UnsupportedOperation"),  # not a dead-letter queue
    ],
)
def test_invalid_requests_are_refused(sqs, request_, error):
    _, dlq_arn = new_queue(sqs, "dlq")
    with_dlq(sqs, "source", dlq_arn)
    _, plain_arn = new_queue(sqs, "plain")
    values = {
        name: value.format(dlq=dlq_arn, plain=plain_arn) if isinstance(value, str) else value
        for name, value in request_.items()
    }
    with pytest.raises(ClientError, match=error):
        sqs.start_message_move_task(**values)


def test_unknown_task_handle(sqs):
    with pytest.raises(ClientError, match="ResourceNotFound"):
        sqs.cancel_message_move_task(TaskHandle="nope")
