"""The promise under faults inside the functions: no contact gets a survey or gift card twice, no
good row is lost. Crashes and throttles strike in the middle of a function (after a call took
effect, before the function saw its answer), hostile rows sit between good ones, S3 delivers a
version's event late, a file outlasts a function timeout, a later export corrects a contact."""

import json

import pytest
from shared import keys

from harness.builders import contact, jsonl, new_caller
from harness.expected import notifications
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import LONG_WAIT, wait_for_notifications

pytestmark = pytest.mark.integration


def due_rows(callers: list[str]) -> list[dict]:
    rows = []
    for n, caller in enumerate(callers):
        rows += [
            contact(
                caller,
                minutes=n,
                agent_id=f"agent-{n}",
                disposition="RESOLVED",
                email=f"c{n}@example.com",
                survey_opt_in=True,
            ),
            contact(caller, minutes=10 + n, agent_id=None, disposition="ABANDONED"),
            contact(caller, minutes=5 + n, agent_id=f"agent-{n}-last", wait_seconds=LONG_WAIT),
        ]
    return rows


def test_crashes_inside_every_function_and_a_throttled_completion_give_one_effect_each(
    local_stack: StackClient, files, topic, contact_cleanup
):
    stack = local_stack
    callers = [new_caller() for _ in range(2)]
    contact_cleanup.extend(callers)
    rows = due_rows(callers)
    expected = notifications(rows, stack.goodwill_wait_seconds)
    assert sum(expected.values()) == 6

    crashes = [
        # the ingest dies after its first transaction of contacts took effect
        {"function": "IngestFunction", "operation": "dynamodb:TransactWriteItems", "times": 1},
        # the consumers die after their effect, before they could report success
        {"function": "SurveyFunction", "operation": "sqs:SendMessageBatch", "times": 1},
        {"function": "GoodwillFunction", "operation": "dynamodb:PutItem", "times": 1},
        # the notifier dies after the publish, before Powertools records it
        {"function": "NotifierFunction", "operation": "sns:PublishBatch", "times": 1},
    ]
    # ...and its completion is throttled past boto3's retries: the publish is repeated
    throttles = [{"function": "NotifierFunction", "operation": "dynamodb:UpdateItem", "times": 12}]
    stack.faults(crash_after_call=crashes, throttle=throttles)

    key, version = files.put_jsonl("crashed inside.jsonl", rows)
    # The crashed ingest and notifier come back after their queues' visibility timeouts.
    bound = sum(
        int(stack.queue_attributes(queue, "VisibilityTimeout")["VisibilityTimeout"])
        for queue in ("IngestQueueUrl", "NotificationQueueUrl")
    )
    counts = wait_for_notifications(stack, topic, expected, timeout=bound + 120)

    faults = stack.local.control("/_emulator/faults")
    assert faults["crash_after_call"] == [] and faults["throttle"] == []  # every fault struck
    assert counts == expected
    log = eventually(lambda: stack.file_outcome(key, version), timeout=30)
    assert (log["outcome"], log["rows_ok"]) == ({"S": "PROCESSED"}, {"N": str(len(rows))})
    for caller, n in zip(callers, range(2), strict=True):
        assert len(stack.contacts_of(caller)) == 3
        assert stack.route(caller)["agent_id"] == f"agent-{n}-last"
    for kind, contact_id in expected:
        if kind == keys.GIFT_CARD:
            assert stack.get_item(keys.gift_card_key(contact_id)), contact_id
    assert stack.queue_depth("NotificationDeadLetterQueueUrl") == 0
    assert stack.queue_depth("IngestDeadLetterQueueUrl") == 0


@pytest.mark.fan_out_independent
def test_hostile_rows_are_reported_and_never_fail_their_file(
    stack: StackClient, files, contact_cleanup
):
    caller = new_caller()
    contact_cleanup.append(caller)
    good = [contact(caller, minutes=n) for n in range(3)]
    template = contact(caller, minutes=9)
    hostile = [
        json.dumps(
            template
            | {"started_at": "0001-01-01T00:00:00+01:00", "ended_at": "0001-01-01T00:30:00+01:00"}
        ),
        json.dumps(template | {"ended_at": "0999-06-01T00:00:00Z"}),
        json.dumps(template | {"ended_at": "9999-12-31T23:30:00-01:00"}),
        json.dumps(template | {"queue": "\ud800"}),
        '{"contact_id": "x", "wait_seconds": ' + "9" * 5000 + "}",
        "\x00" * 100,
        "x" * (2 << 20),  # past the line bound
    ]
    key, version = files.put_jsonl("hostile.jsonl", [good[0], *hostile, good[1], good[2]])

    log = eventually(lambda: stack.file_outcome(key, version), timeout=90)
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert (log["rows_ok"], log["rows_rejected"]) == ({"N": "3"}, {"N": str(len(hostile))})
    stored = {item["contact_id"]["S"] for item in stack.contacts_of(caller)}
    assert stored == {row["contact_id"] for row in good}
    assert [entry["line"] for entry in files.read_report(key)] == list(range(2, 2 + len(hostile)))
    assert all(key not in m["Body"] for m in stack.peek("IngestDeadLetterQueueUrl"))


def test_a_late_event_for_an_older_version_changes_nothing(
    stack: StackClient, files, contact_cleanup
):
    caller = new_caller()
    contact_cleanup.append(caller)
    first = contact(caller, minutes=1, agent_id="agent-v1")
    only_in_v1 = contact(caller, minutes=2, agent_id="agent-only-v1")
    # Hold delivery, upload two versions, and take v1's event out of the queue: S3 delivers it
    # after v2's.
    stack.pause_ingest()
    try:
        key, v1 = files.put_jsonl("versions.jsonl", [first, only_in_v1])
        newer = contact(caller, minutes=1, contact_id=first["contact_id"], updated_seconds=120)
        v2_row = first | {"agent_id": "agent-v2", "updated_at": newer["updated_at"]}
        _, v2 = files.put_jsonl("versions.jsonl", [v2_row])
        late = held_event(stack, key, v1)
    finally:
        stack.set_mapping_enabled("IngestQueueUrl", True)
    eventually(lambda: stack.file_outcome(key, v2), timeout=60)
    stack.sqs.send_message(QueueUrl=stack.outputs["IngestQueueUrl"], MessageBody=late)

    log = eventually(lambda: stack.file_outcome(key, v1), timeout=60)
    assert log["outcome"] == {"S": "STALE"}, log
    assert log["superseded_by"] == {"S": f"{stack.bucket}/{key}#{v2}"}
    [item] = stack.contacts_of(caller)
    assert item["agent_id"] == {"S": "agent-v2"}
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-v2", timeout=60)


def held_event(stack: StackClient, key: str, version: str) -> str:
    """Receive the queued S3 event of one object version and delete it; return its body. Every
    other message received with it is made visible again at once (v2's event must not wait out
    this receive's visibility timeout)."""
    url = stack.outputs["IngestQueueUrl"]

    def take():
        found = None
        for message in stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30
        ).get("Messages", []):
            record = (json.loads(message["Body"]).get("Records") or [{}])[0]
            if record.get("s3", {}).get("object", {}).get("versionId") == version:
                stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                found = message["Body"]
            else:
                stack.sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        return found

    return eventually(take, timeout=30, interval=0.2)


def test_a_correction_moves_the_contact_and_its_callers_last_agent(
    stack: StackClient, files, contact_cleanup
):
    caller = new_caller()
    contact_cleanup.append(caller)
    earlier = contact(caller, minutes=1, agent_id="agent-earlier")
    latest = contact(caller, minutes=5, agent_id="agent-latest")
    files.put_jsonl("export.jsonl", [earlier, latest])
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-latest", timeout=60)

    # A later copy (a newer updated_at) corrects the latest contact: it ended before the other.
    moved = {
        "started_at": "2026-11-02T07:55:00Z",
        "ended_at": "2026-11-02T08:00:00Z",
        "updated_at": "2026-11-02T09:10:00Z",
    }
    files.put_jsonl("correction.jsonl", [latest | moved])

    def corrected():
        ends = sorted(item["ended_at"]["S"] for item in stack.contacts_of(caller))
        assert ends == ["2026-11-02T08:00:00.000Z", "2026-11-02T09:01:00.000Z"], ends
        return True

    eventually(corrected, timeout=60)
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-earlier", timeout=60)


@pytest.mark.fan_out_independent
def test_a_file_longer_than_a_function_timeout_is_completed_by_continuations(
    local_stack: StackClient, files
):
    """Locally IngestFunction times out after 2 s. This file takes several times that to read
    (150,000 lines, all but 1,000 of them junk, which costs reading, not writing, so the test
    does not depend on how fast the local table is): every invocation stops in time, saves its
    progress and continues in a new one. (A step re-reads the lines before its own: with five
    suites on two cores a 400,000-line file's later steps could spend the whole 2 s skipping.)
    No contact_cleanup: local only, the stack goes away."""
    stack = local_stack
    failures_before = len(stack.failures())
    caller = new_caller()
    valid = [contact(caller, minutes=n % 600, disposition="TRANSFERRED") for n in range(1000)]
    junk_per_row = 149
    body = b"".join(jsonl([row]) + b"[]\n" * junk_per_row for row in valid)
    key, version = files.put("long.jsonl", body)

    log = eventually(lambda: stack.file_outcome(key, version), timeout=300, interval=2)
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert (log["rows_ok"], log["rows_rejected"]) == (
        {"N": "1000"},
        {"N": str(1000 * junk_per_row)},
    )
    assert int(log["steps"]["N"]) > 1  # it took more than one invocation...
    # ...and none timed out. (On a loaded machine a step's message can wait out its visibility
    # timeout before a worker is free and be delivered twice: the second delivery fails on the
    # first's claim and is retried, which is at-least-once delivery, not a timeout.)
    timeouts = [
        f
        for f in stack.failures()[failures_before:]
        if f.function == "IngestFunction" and f.outcome == "timeout"
    ]
    assert timeouts == []
    report = files.read_report(key)
    assert len(report) == 1001 and report[-1] == {
        "level": "summary",
        "rows_not_listed": 1000 * junk_per_row - 1000,
    }
    assert len(stack.contacts_of(caller)) == 1000
