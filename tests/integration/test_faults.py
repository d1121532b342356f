"""Duplicate deliveries, concurrent pollers and crashes after side effects (local fault switches)
still give exactly one effect each."""

import pytest
from shared import keys

from harness.builders import contact, new_caller
from harness.expected import notifications
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import LONG_WAIT, wait_for_notifications

pytestmark = pytest.mark.integration

CRASHING = ("IngestFunction", "SurveyFunction", "GoodwillFunction", "NotifierFunction")
CRASH_ONCE = dict.fromkeys(CRASHING, 1)


@pytest.mark.parametrize(
    "switches",
    [
        # Every SQS message and stream batch twice, two concurrent pollers per queue, and a crash
        # after the side effects of one invocation of each function (its duplicate completes it).
        {"duplicate_deliveries": 2, "sqs_pollers": 2, "crash_after_side_effects": CRASH_ONCE},
        # Crashes alone: each is retried by its event source (SQS after the visibility timeout,
        # the stream at once) and the retry finds the work done.
        {"crash_after_side_effects": CRASH_ONCE},
    ],
    ids=["duplicates-pollers-crashes", "crashes-retried"],
)
def test_faults_still_give_one_effect_each(
    local_stack: StackClient, files, topic, contact_cleanup, switches
):
    stack = local_stack
    callers = [new_caller() for _ in range(3)]
    contact_cleanup.extend(callers)
    rows = []
    for n, caller in enumerate(callers):
        rows += [
            contact(
                caller,
                minutes=n,
                agent_id=f"agent-{n}-early",
                disposition="RESOLVED",
                email=f"c{n}@example.com",
                survey_opt_in=True,
            ),
            contact(caller, minutes=10 + n, agent_id=None, disposition="ABANDONED"),
            contact(
                caller,
                minutes=5 + n,
                agent_id=f"agent-{n}-last",
                disposition="RESOLVED",
                email=f"d{n}@example.com",
                survey_opt_in=True,
                wait_seconds=LONG_WAIT,
            ),
        ]
    expected = notifications(rows, stack.goodwill_wait_seconds)
    assert sum(expected.values()) == 12

    faults = stack.faults(**switches)
    assert faults | switches == faults  # the switches are on

    key, version = files.put_jsonl("duplicated and crashed.jsonl", rows)
    # The crashed ingest comes back after the queue's visibility timeout.
    bound = int(stack.queue_attributes("IngestQueueUrl", "VisibilityTimeout")["VisibilityTimeout"])
    bound += 90

    counts = wait_for_notifications(stack, topic, expected, timeout=bound)
    # Each injected crash was consumed: every function ran into its crash and was retried.
    assert stack.local.control("/_emulator/faults")["crash_after_side_effects"] == {}
    assert counts == expected
    ids = [m["notification_id"] for m in topic.for_contacts({r["contact_id"] for r in rows})]
    assert len(ids) == len(set(ids)) == 12

    for caller, n in zip(callers, range(3), strict=True):
        contacts = stack.contacts_of(caller)
        assert len(contacts) == 3, contacts
        assert stack.route(caller)["agent_id"] == f"agent-{n}-last"
    log = eventually(lambda: stack.file_outcome(key, version), timeout=30)
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert log["rows_ok"] == {"N": str(len(rows))}, log
    for kind, contact_id in expected:
        if kind == keys.GIFT_CARD:
            assert stack.get_item(keys.gift_card_key(contact_id)), contact_id
