"""The operator's CLI (`python -m ops`) through real failures: a notification dead-lettered while
its consumer was broken, then redriven; a stream consumer failing until fixed, then what it failed
on recovered as the fan-out mode says (its batch replayed, or its DLQ redriven); a file's lost
contacts reprocessed; idempotency records shown and purged. Each ends with the effect happening
exactly once."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from shared import keys, notifications

from harness.builders import contact, new_caller
from harness.polling import eventually, stable
from harness.stack import StackClient
from ops.cli import main
from tests.integration.support import quick_redelivery

pytestmark = pytest.mark.integration


def run_json(ops, *argv: str) -> dict:
    code, out, err = ops("--json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_bad_input_is_a_message_and_exit_2(ops):
    for argv, message in [
        (("dlq", "redrive", "IngestQueue"), "unknown dead-letter queue"),
        (("idempotency", "show", "NoSuchFunction", "--notification-id", "SURVEY#c"), "unknown"),
        (("idempotency", "show", "SurveyFunction", "--notification-id", "SURVEY#c"), "keeps no"),
        (("idempotency", "show", "NotifierFunction", "--notification-id", "PARCEL#c"), "kind"),
        (("idempotency", "show", "IngestFunction", "not-a-url"), "s3://bucket/key"),
        (("file", "status", "s3://some-other-bucket/incoming/x.jsonl"), "contacts bucket"),
        # argparse's own refusal, which lists the stream readers
        (("stream", "replay", "--function", "NoSuchFunction"), "invalid choice: 'NoSuchFunction'"),
        (("caller", "show", "5551234"), "E.164"),
    ]:
        code, out, err = ops(*argv)
        assert (code, out) == (2, ""), (argv, err)
        assert "error: " in err.splitlines()[-1] and message in err, (argv, err)
        assert "Traceback" not in err
    assert main(["--stack", f"no-such-stack-{uuid.uuid4().hex[:6]}", "status"]) == 2


@pytest.mark.fan_out_independent
def test_dead_lettered_notification_is_redriven_and_sent_once(local_stack: StackClient, ops, topic):
    """NotifierFunction crashes on its idempotency claim (as with a broken table permission)
    until fixed: the notification reaches the DLQ unsent; `ops status` flags the DLQ; after the
    fix, `ops dlq redrive` sends it back and it is published exactly once."""
    stack = local_stack
    contact_id = f"it-redrive-{uuid.uuid4().hex[:10]}"
    message = notifications.survey(
        {"contact_id": contact_id, "caller": new_caller(), "email": "it@example.com"}
    )
    stack.faults(
        crash_after_call=[{"function": "NotifierFunction", "operation": "dynamodb:PutItem"}]
    )
    try:
        with quick_redelivery(stack, "NotificationQueueUrl"):
            stack.sqs.send_message(
                QueueUrl=stack.outputs["NotificationQueueUrl"], MessageBody=json.dumps(message)
            )
            eventually(
                lambda: any(
                    contact_id in m["Body"] for m in stack.peek("NotificationDeadLetterQueueUrl")
                ),
                timeout=60,
                interval=1,
            )
    finally:
        stack.reset_faults()
    assert not topic.for_contacts([contact_id])

    status = run_json(ops, "status")
    [dlq] = [q for q in status["queues"] if q["queue"] == "NotificationDeadLetterQueue"]
    assert dlq["flagged"] and dlq["messages"] >= 1 and dlq["oldest_age_seconds"] is not None
    code, out, _ = ops("status")
    assert code == 0 and "NotificationDeadLetterQueue" in out and "needs attention" in out

    # The notifier claimed it before it crashed, seconds ago: published again under that claim,
    # SNS would deduplicate it, so the redrive moves it (a claim older than that window takes
    # --resend: tests/unit/ops/test_notifications.py).
    redriven = run_json(ops, "dlq", "redrive", "NotificationDeadLetterQueue", "--yes")
    assert redriven["status"] == "COMPLETED" and redriven["moved"] >= 1

    eventually(lambda: topic.for_contacts([contact_id]), timeout=30)
    assert stable(lambda: topic.counts([contact_id])) == {(keys.SURVEY, contact_id): 1}
    assert not any(contact_id in m["Body"] for m in stack.peek("NotificationDeadLetterQueueUrl"))


def test_changes_a_consumer_failed_on_are_recovered_once_it_is_fixed(
    local_stack: StackClient, ops, files, topic, contact_cleanup
):
    """GoodwillFunction issues the card, then dies before enqueuing its notification, on every
    retry, until fixed: the change ends where the stack's fan-out mode puts a consumer's
    failures (lambda: the batch's failure record in StreamFailureQueue; pipe, router: the stream
    record in GoodwillDeadLetterQueue). The mode's ops command (`ops stream replay`, `ops dlq
    redrive`) delivers it again, and the customer gets the one gift card notification."""
    stack = local_stack
    caller = new_caller()
    contact_cleanup.append(caller)
    row = contact(caller, disposition="ABANDONED", agent_id=None, wait_seconds=30)
    started = time.time()

    def reported():
        return stack.failed_changes(route, row["contact_id"], started)

    with stack.failing_consumer("GoodwillFunction") as route:
        stack.faults(
            crash_after_call=[{"function": "GoodwillFunction", "operation": "dynamodb:PutItem"}]
        )
        try:
            files.put_jsonl("goodwill.jsonl", [row])
            eventually(reported, timeout=route.bound_seconds, interval=1)
            # a duplicate delivery's copy fails too, and SQS moves it to the DLQ only at its next
            # receive: the redrive below must find every copy there, not race the last one
            stable(lambda: len(reported()), polls=5, interval=1)
        finally:
            stack.reset_faults()
    assert stack.get_item(keys.gift_card_key(row["contact_id"]))  # issued before the crash
    assert not topic.for_contacts([row["contact_id"]])

    if route.dry_run:
        dry = run_json(ops, *route.dry_run)
        assert dry["batches"] and {b["outcome"] for b in dry["batches"]} == {"would replay"}
        assert reported(), "a dry run deletes nothing"

    code, out, err = ops(*route.recover)
    assert code == 0, out + err
    assert re.search(r"replayed|COMPLETED", out), out

    eventually(lambda: topic.for_contacts([row["contact_id"]]), timeout=30)
    assert stable(lambda: topic.counts([row["contact_id"]])) == {
        (keys.GIFT_CARD, row["contact_id"]): 1
    }
    assert not reported()


def test_reprocessed_file_restores_its_contacts_once(
    stack: StackClient, ops, files, topic, contact_cleanup
):
    """A file's contacts are lost after ingest (their items deleted by mistake). `ops file
    reprocess` ingests it again in a new run: one step, each contact stored once,
    and no second survey although the contacts come back as first exports (NotifierFunction's
    record holds until purged)."""
    caller = new_caller()
    contact_cleanup.append(caller)
    surveyed = contact(caller, disposition="RESOLVED", email="it@example.com", survey_opt_in=True)
    other = contact(caller, minutes=5)
    key, version = files.put_jsonl("reprocess.jsonl", [surveyed, other])
    url = f"s3://{stack.bucket}/{key}"
    eventually(lambda: stack.file_outcome(key, version), timeout=60)
    eventually(lambda: topic.for_contacts([surveyed["contact_id"]]), timeout=60)

    [claim] = run_json(ops, "idempotency", "show", "IngestFunction", url)["records"]
    assert claim["status"] == "COMPLETED" and claim["result"]["outcome"] == "PROCESSED"
    stored = stack.contacts_of(caller)
    stack.delete_items(
        [{"pk": i["pk"]["S"], "sk": i["sk"]["S"]} for i in stored]
        + [keys.contact_ref_key(i["contact_id"]["S"]) for i in stored]
    )
    assert not stack.contacts_of(caller)

    if stack.is_local:  # every delivery of the reprocess twice: still one step
        stack.faults(duplicate_deliveries=2)
    try:
        reprocessed = run_json(ops, "file", "reprocess", url, "--version-id", version, "--yes")
        assert reprocessed["previous_outcome"] == "PROCESSED"
        assert reprocessed["run"] == 1  # the file's second run: nothing to release
        log = eventually(lambda: stack.file_outcome(key, version, run=1), timeout=60)
    finally:
        if stack.is_local:
            stack.reset_faults()
    status = run_json(ops, "file", "status", url)["log"]
    assert (status["outcome"], status["steps"], status["rows_ok"]) == ("PROCESSED", 1, 2), log
    assert sorted(i["contact_id"]["S"] for i in stack.contacts_of(caller)) == sorted(
        [surveyed["contact_id"], other["contact_id"]]
    )
    assert stable(lambda: topic.counts([surveyed["contact_id"]])) == {
        (keys.SURVEY, surveyed["contact_id"]): 1
    }

    # Purged, the notifier's record is gone; `show` says so, and so does a purge again.
    notification = keys.notification_id(keys.SURVEY, surveyed["contact_id"])
    [record] = run_json(
        ops, "idempotency", "show", "NotifierFunction", "--notification-id", notification
    )["records"]
    assert record["status"] == "COMPLETED"
    purged = run_json(
        ops,
        "idempotency",
        "purge",
        "NotifierFunction",
        "--kind",
        keys.SURVEY,
        "--contact-id",
        surveyed["contact_id"],
        "--resend",  # a published notification's record: purged on purpose
        "--yes",
    )
    assert purged["purged"] == [record["key"]]
    assert not run_json(
        ops, "idempotency", "show", "NotifierFunction", "--notification-id", notification
    )["records"]


def test_caller_show_masks_personal_data(stack: StackClient, ops, files, contact_cleanup):
    caller = new_caller()
    contact_cleanup.append(caller)
    row = contact(caller, email="jane.doe@example.com", agent_id="agent-ops")
    key, version = files.put_jsonl("caller.jsonl", [row])
    eventually(lambda: stack.file_outcome(key, version), timeout=60)
    eventually(lambda: stack.route(caller).get("found") == "true", timeout=60)

    code, out, err = ops("caller", "show", caller)
    assert code == 0, err
    assert "agent-ops" in out and row["contact_id"] in out and "j***@example.com" in out
    assert caller not in out and "jane.doe" not in out
    shown = run_json(ops, "caller", "show", caller)
    assert caller not in json.dumps(shown) and shown["last_agent"]["agent_id"] == "agent-ops"
