"""What must not be retried is not, and what keeps failing ends where the design says."""

import contextlib
import json
import time
import uuid
from datetime import UTC, datetime

import pytest
from shared import keys

from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import quick_redelivery, wait_until_drained

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


@pytest.mark.fan_out_independent
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
    wait_until_drained(stack, "IngestQueueUrl")
    assert_no_dead_letters(stack, request_id)
    # Locally also seen directly: no IngestFunction invocation failed (none was retried).
    assert stack.failed_invocations("IngestFunction") == failures_before


@pytest.mark.fan_out_independent
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
    wait_until_drained(stack, "IngestQueueUrl")
    assert_no_dead_letters(stack, key)
    assert stack.failed_invocations("IngestFunction") == failures_before
    assert not stack.contacts_of(caller)
    assert not files.report_exists(key)


@pytest.mark.fan_out_independent
def test_poison_notification_ends_in_the_dead_letter_queue(stack: StackClient):
    marker = f"it-poison-{uuid.uuid4().hex}"
    poison = [
        f"not json {marker}",
        json.dumps({"kind": keys.SURVEY, "contact_id": marker}),  # no notification_id, caller
    ]

    def both_dead_lettered():
        found = dead_letters_mentioning(stack, "NotificationDeadLetterQueueUrl", marker)
        assert len(found) == 2, f"{len(found)} of 2 poison messages in the DLQ"
        return found

    try:
        with quick_redelivery(stack, "NotificationQueueUrl"):
            for body in poison:
                stack.sqs.send_message(
                    QueueUrl=stack.outputs["NotificationQueueUrl"], MessageBody=body
                )
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


def test_change_a_consumer_keeps_failing_on_ends_where_its_mode_says_and_the_rest_flows(
    stack: StackClient,
):
    """A CONTACT item the ingest would never write (a caller and an agent, but no contact_id or
    ended_at) passes LastAgentFunction's filter and fails it on every attempt, on AWS as locally
    (without a caller it would set no last agent: skipped, as a chat is). Once the
    retries are spent it ends where the stack's fan-out mode puts a consumer's failures
    (StackClient.failure_route): lambda, the mapping's failure record (the batch's shard and
    sequence numbers) in StreamFailureQueue, and the mapping's LastAgentStreamMappingGaveUpAlarm
    fires; pipe and router, the stream record itself in
    LastAgentDeadLetterQueue. Either way the changes after it still flow."""
    failures_before = stack.failed_invocations("LastAgentFunction")
    started = time.time()
    caller = new_caller()
    marker = f"poison-{uuid.uuid4().hex}"
    poison_key = {"pk": keys.caller_pk(caller), "sk": f"CONTACT#{marker}"}
    with stack.failing_consumer("LastAgentFunction") as route:

        def reported(count: int = 1) -> list[dict]:
            found = stack.failed_changes(route, marker, started)
            assert len(found) >= count, f"{len(found)} of LastAgentFunction's in {route.queue}"
            return found

        try:
            stack.dynamodb.put_item(
                TableName=stack.contacts_table,
                Item={
                    **{name: {"S": value} for name, value in poison_key.items()},
                    "type": {"S": keys.CONTACT},
                    "caller": {"S": caller},
                    "agent_id": {"S": "agent-poison"},
                    "disposition": {"S": "ESCALATED"},
                },
            )
            reports = eventually(reported, timeout=route.bound_seconds, interval=1)
            body = json.loads(reports[0]["Body"])
            stream = f"table/{stack.contacts_table}/stream/"
            if route.holds_records:  # the change itself, as the stream has it
                assert body["eventName"] == "INSERT", body
                assert body["dynamodb"]["Keys"] == {k: {"S": v} for k, v in poison_key.items()}
                assert body["dynamodb"]["NewImage"]["agent_id"] == {"S": "agent-poison"}
                assert stream in body["eventSourceARN"], body
            else:  # the failed batch: where it is in the stream, not what it holds
                info = body["DDBStreamBatchInfo"]
                assert info["batchSize"] >= 1
                assert stream in info["streamArn"], info
                assert "LastAgentFunction" in body["requestContext"]["functionArn"]
                # the mapping counts what it gave up (MetricsConfig EventCount) and its alarm
                # names the reader
                # names the reader (in its history: on the local stack a 60 s period lasts a
                # second, so the state itself may be OK again by the time it is read)
                gave_up = f"{stack.name}-LastAgentStreamMappingGaveUpAlarm-"
                cloudwatch = stack.client("cloudwatch")
                [alarm] = cloudwatch.describe_alarms(AlarmNamePrefix=gave_up)["MetricAlarms"]

                def fired() -> bool:
                    history = cloudwatch.describe_alarm_history(
                        AlarmName=alarm["AlarmName"], HistoryItemType="StateUpdate"
                    )["AlarmHistoryItems"]
                    return any(
                        item["HistorySummary"].endswith("to ALARM")
                        and item["Timestamp"].timestamp() >= started - 1
                        for item in history
                    )

                assert eventually(fired, timeout=150, interval=2)
            if stack.is_local:  # the failures the other tests count are seen when they happen
                assert stack.failed_invocations("LastAgentFunction") > failures_before
            # The changes after it still flow: a good contact sets its caller's last agent.
            good = contact(new_caller(), agent_id="agent-after-poison")
            good_key = {
                "pk": keys.caller_pk(good["caller"]),
                "sk": f"CONTACT#2026-11-02T09:00:00.000Z#{good['contact_id']}",
            }
            stack.dynamodb.put_item(
                TableName=stack.contacts_table,
                Item={
                    **{name: {"S": value} for name, value in good_key.items()},
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
            stack.delete_items([keys.last_agent_key(good["caller"]), good_key])
        finally:
            # Its removal fails LastAgentFunction too (the old image has an agent). Where the
            # failures hold the records (pipe, router), both are waited for and removed; a
            # failure record (lambda) cannot be told from others', and stays.
            stack.delete_items([poison_key])
            if route.holds_records:
                with contextlib.suppress(AssertionError):
                    eventually(lambda: reported(2), timeout=route.bound_seconds, interval=1)
            stack.delete_failed_changes(route, marker, started)
