"""What must not be retried is not, and what keeps failing ends where the design says."""

import json
import time
import uuid
from datetime import UTC, datetime

import pytest
from shared import keys

from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient

pytestmark = pytest.mark.integration


def redrive_bound(stack: StackClient, output: str) -> float:
    """Seconds a message that always fails needs to reach the queue's DLQ, with a margin."""
    attributes = stack.queue_attributes(output, "VisibilityTimeout", "RedrivePolicy")
    max_receives = int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])
    return int(attributes["VisibilityTimeout"]) * max_receives + 60


def dead_letters_mentioning(stack: StackClient, output: str, marker: str) -> list[dict]:
    return [m for m in stack.peek(output) if marker in m["Body"]]


def assert_no_dead_letters(stack: StackClient, marker: str) -> None:
    assert not dead_letters_mentioning(stack, "IngestDeadLetterQueueUrl", marker)
    if stack.is_local:  # a fresh stack: nothing at all may have been dead-lettered
        assert stack.queue_depth("IngestDeadLetterQueueUrl") == 0


def test_s3_test_event_is_acknowledged_without_retry(stack: StackClient):
    failures_before = stack.failed_invocations("IngestFunction")
    request_id = f"it-{uuid.uuid4().hex}"
    stack.sqs.send_message(
        QueueUrl=stack.outputs["IngestQueueUrl"],
        MessageBody=json.dumps(
            {
                "Service": "Amazon S3",
                "Event": "s3:TestEvent",
                "Time": datetime.now(UTC).isoformat(),
                "Bucket": stack.bucket,
                "RequestId": request_id,
                "HostId": request_id,
            }
        ),
    )
    # A failing message stays in the queue (in flight, then visible again) until it reaches the
    # DLQ: an empty queue with nothing of ours in the DLQ means it was acknowledged.
    eventually(lambda: stack.queue_depth("IngestQueueUrl") == 0, timeout=60)
    assert_no_dead_letters(stack, request_id)
    # Locally also seen directly: no IngestFunction invocation failed (none was retried).
    assert stack.failed_invocations("IngestFunction") == failures_before


def test_object_deleted_before_read_is_a_terminal_skip(stack: StackClient, files):
    failures_before = stack.failed_invocations("IngestFunction")
    caller = new_caller()
    # Hold delivery so that the object is gone, every version of it, before ingest reads it.
    stack.pause_ingest()
    try:
        key, version = files.put_jsonl("deleted before read.jsonl", [contact(caller)])
        files.delete_objects()
        assert not stack.s3.list_object_versions(Bucket=stack.bucket, Prefix=files.prefix).get(
            "Versions"
        )
    finally:
        stack.set_mapping_enabled("IngestQueueUrl", True)

    log = eventually(lambda: stack.file_outcome(key, version), timeout=90)
    assert log["outcome"] == {"S": "SKIPPED_MISSING"}, log
    eventually(lambda: stack.queue_depth("IngestQueueUrl") == 0, timeout=60)
    assert_no_dead_letters(stack, key)
    assert stack.failed_invocations("IngestFunction") == failures_before
    assert not stack.contacts_of(caller)
    assert not files.report_exists(key)


def test_poison_notification_ends_in_the_dead_letter_queue(stack: StackClient):
    marker = f"it-poison-{uuid.uuid4().hex}"
    poison = [
        f"not json {marker}",
        json.dumps({"kind": keys.SURVEY, "contact_id": marker}),  # no notification_id, caller
    ]
    for body in poison:
        stack.sqs.send_message(QueueUrl=stack.outputs["NotificationQueueUrl"], MessageBody=body)

    def both_dead_lettered():
        found = dead_letters_mentioning(stack, "NotificationDeadLetterQueueUrl", marker)
        assert len(found) == 2, f"{len(found)} of 2 poison messages in the DLQ"
        return found

    try:
        dead = eventually(
            both_dead_lettered, timeout=redrive_bound(stack, "NotificationQueueUrl"), interval=1
        )
        assert sorted(m["Body"] for m in dead) == sorted(poison)
        max_receives = json.loads(
            stack.queue_attributes("NotificationQueueUrl", "RedrivePolicy")["RedrivePolicy"]
        )["maxReceiveCount"]
        for message in dead:
            # received maxReceiveCount times in the source queue, once more by the peek
            assert int(message["Attributes"]["ApproximateReceiveCount"]) >= int(max_receives)
    finally:
        stack.delete_where("NotificationDeadLetterQueueUrl", lambda m: marker in m["Body"])


def test_stream_consumer_that_keeps_failing_reports_to_stream_failure_queue(stack: StackClient):
    """A CONTACT item the ingest would never write (no caller, contact_id or ended_at) passes
    LastAgentFunction's filter and fails it on every attempt, on AWS as locally: the batch info
    goes to StreamFailureQueue once the retries are spent, and the stream moves on."""
    before = {m["MessageId"] for m in stack.peek("StreamFailureQueueUrl")}
    failures_before = stack.failed_invocations("LastAgentFunction")
    started = time.time()
    caller = new_caller()
    poison_key = {"pk": keys.caller_pk(caller), "sk": f"CONTACT#poison-{uuid.uuid4().hex}"}
    stack.dynamodb.put_item(
        TableName=stack.contacts_table,
        Item={
            **{name: {"S": value} for name, value in poison_key.items()},
            "type": {"S": keys.CONTACT},
            "agent_id": {"S": "agent-poison"},
            "disposition": {"S": "ESCALATED"},
        },
    )

    def reported():
        new = [
            m
            for m in stack.peek("StreamFailureQueueUrl")
            if m["MessageId"] not in before and "LastAgent" in m["Body"]
        ]
        assert new, "no failure report from LastAgentFunction yet"
        return new

    try:
        reports = eventually(reported, timeout=120, interval=1)
        body = json.loads(reports[0]["Body"])
        assert "DDBStreamBatchInfo" in body, body
        info = body["DDBStreamBatchInfo"]
        assert info["batchSize"] >= 1
        assert info["streamArn"].split("/stream/")[0].endswith(f"table/{stack.contacts_table}")
        assert "LastAgentFunction" in body["requestContext"]["functionArn"]
        if stack.is_local:  # the failures the other tests count are seen when they happen
            assert stack.failed_invocations("LastAgentFunction") > failures_before
        # The stream moved on: a good contact after the poison one still sets a last agent.
        good = contact(new_caller(), agent_id="agent-after-poison")
        stack.dynamodb.put_item(
            TableName=stack.contacts_table,
            Item={
                "pk": {"S": keys.caller_pk(good["caller"])},
                "sk": {"S": f"CONTACT#2026-11-02T09:00:00.000Z#{good['contact_id']}"},
                "type": {"S": keys.CONTACT},
                "contact_id": {"S": good["contact_id"]},
                "caller": {"S": good["caller"]},
                "agent_id": {"S": good["agent_id"]},
                "ended_at": {"S": "2026-11-02T09:00:00.000Z"},
                "disposition": {"S": good["disposition"]},
            },
        )
        assert eventually(
            lambda: stack.route(good["caller"]).get("agent_id") == "agent-after-poison", 60
        )
        stack.delete_items(
            [
                {"pk": keys.caller_pk(good["caller"]), "sk": "LAST_AGENT"},
                {
                    "pk": keys.caller_pk(good["caller"]),
                    "sk": f"CONTACT#2026-11-02T09:00:00.000Z#{good['contact_id']}",
                },
            ]
        )
    finally:
        stack.delete_items([poison_key])
        stack.delete_where(
            "StreamFailureQueueUrl",
            lambda m: (
                m["MessageId"] not in before
                and "LastAgent" in m["Body"]
                and int(m["Attributes"]["SentTimestamp"]) / 1000 >= started - 5
            ),
        )
