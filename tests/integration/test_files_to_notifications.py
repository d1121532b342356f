"""Files in, contacts and last agents out, exactly one survey and one gift card per contact."""

import random
from collections import Counter

import pytest
from shared import keys

from harness.builders import contact, file_body, new_caller
from harness.expected import notifications
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import LONG_WAIT, SHORT_WAIT, wait_for_notifications

pytestmark = pytest.mark.integration


def test_files_become_contacts_last_agents_and_one_notification_each(
    stack: StackClient, files, topic, contact_cleanup
):
    rng = random.Random()
    frequent, surveyed, both, waited, quiet = (new_caller() for _ in range(5))
    contact_cleanup.extend([frequent, surveyed, both, waited, quiet])

    # A caller with several contacts, the latest with agent-latest; an abandoned call after it
    # has no agent and must not move the last agent.
    latest = contact(frequent, minutes=30, agent_id="agent-latest", disposition="TRANSFERRED")
    abandoned = contact(
        frequent, minutes=60, agent_id=None, disposition="ABANDONED", wait_seconds=SHORT_WAIT
    )
    older = [
        contact(frequent, minutes=0, agent_id="agent-early", disposition="RESOLVED"),
        contact(frequent, minutes=10, agent_id="agent-mid", disposition="ESCALATED"),
        contact(frequent, minutes=20, agent_id="agent-before", disposition="RESOLVED"),
    ]
    survey = contact(
        surveyed,
        minutes=5,
        agent_id="agent-s",
        disposition="RESOLVED",
        email="caller@example.com",
        survey_opt_in=True,
    )
    no_email = contact(surveyed, minutes=6, disposition="RESOLVED", survey_opt_in=True)
    no_opt_in = contact(surveyed, minutes=7, disposition="RESOLVED", email="x@example.com")
    survey_and_gift = contact(
        both,
        minutes=8,
        disposition="RESOLVED",
        email="both@example.com",
        survey_opt_in=True,
        wait_seconds=LONG_WAIT,
    )
    long_wait = contact(waited, minutes=9, disposition="ESCALATED", wait_seconds=LONG_WAIT)
    plain = contact(quiet, minutes=1, agent_id="agent-q", disposition="ESCALATED")

    first = [latest, abandoned, survey, no_email, no_opt_in, survey_and_gift, long_wait, plain]
    rng.shuffle(first)
    # The later file: older contacts of the frequent caller (out of order, after the latest one)
    # and a correction of the surveyed contact (a newer updated_at) with other fields changed
    # that would make it due a gift card: nothing new for it.
    newer = contact(surveyed, minutes=5, contact_id=survey["contact_id"], updated_seconds=120)
    reexport = {
        **survey,
        "queue": "re-export",
        "wait_seconds": LONG_WAIT,
        "updated_at": newer["updated_at"],
    }
    second = [*older, reexport]
    rng.shuffle(second)
    all_rows = first + older  # the re-export is the same contact

    first_key, first_version = files.put_jsonl("Kontakte München 1.jsonl", first)

    def first_file_ingested():
        ids = {
            i["contact_id"]["S"] for c in (frequent, surveyed, both) for i in stack.contacts_of(c)
        }
        missing = {latest["contact_id"], survey["contact_id"], survey_and_gift["contact_id"]} - ids
        assert not missing, f"contacts not in the table yet: {missing}"
        return True

    eventually(first_file_ingested, timeout=60)
    second_key, second_version = files.put(
        "contacts 2.csv.gz", file_body("contacts 2.csv.gz", second)
    )

    # Every contact is one CONTACT item under its caller, with the input fields.
    def contacts_ingested():
        stored = {
            i["contact_id"]["S"]: i
            for c in (frequent, surveyed, both, waited, quiet)
            for i in stack.contacts_of(c)
        }
        missing = {r["contact_id"] for r in all_rows} - set(stored)
        assert not missing, f"{len(missing)} contacts not in the table yet"
        return stored

    stored = eventually(contacts_ingested, timeout=60)
    assert len(stored) == len(all_rows)
    assert len(stack.contacts_of(frequent)) == 5
    item = stored[survey_and_gift["contact_id"]]
    assert item["type"] == {"S": keys.CONTACT}
    assert item["sk"]["S"].startswith("CONTACT#2026-11-02T09:08:00.000Z#")
    assert item["survey_opt_in"] == {"BOOL": True}
    assert item["wait_seconds"] == {"N": str(LONG_WAIT)}
    assert item["email"] == {"S": "both@example.com"}
    assert "agent_id" not in stored[abandoned["contact_id"]]
    assert stored[plain["contact_id"]]["survey_opt_in"] == {"BOOL": False}

    # Last agent: the latest contact with an agent, whatever the arrival order.
    def routed_to_latest():
        answer = stack.route(frequent)
        assert answer.get("agent_id") == "agent-latest", answer
        return answer

    answer = eventually(routed_to_latest, timeout=60)
    assert answer == {
        "found": "true",
        "agent_id": "agent-latest",
        "contact_id": latest["contact_id"],
        "ended_at": "2026-11-02T09:30:00.000Z",
    }
    assert eventually(lambda: stack.route(plain["caller"]).get("agent_id") == "agent-q", 60)
    assert stack.route(new_caller()) == {"found": "false"}

    # Exactly one survey and one gift card per qualifying contact, and nothing else.
    expected = notifications(all_rows, stack.goodwill_wait_seconds)
    assert expected == Counter(
        {
            (keys.GIFT_CARD, abandoned["contact_id"]): 1,
            (keys.SURVEY, survey["contact_id"]): 1,
            (keys.SURVEY, survey_and_gift["contact_id"]): 1,
            (keys.GIFT_CARD, survey_and_gift["contact_id"]): 1,
            (keys.GIFT_CARD, long_wait["contact_id"]): 1,
        }
    )
    contact_ids = {r["contact_id"] for r in all_rows}
    counts = wait_for_notifications(stack, topic, expected)
    assert counts == expected
    by_id = {r["contact_id"]: r for r in all_rows}
    for message in topic.for_contacts(contact_ids):
        assert message["notification_id"] == keys.notification_id(
            message["kind"], message["contact_id"]
        )
        assert message["caller"] == by_id[message["contact_id"]]["caller"]
        assert message["_kind_attribute"] == message["kind"]
        if message["kind"] == keys.SURVEY:
            assert message["email"] == by_id[message["contact_id"]]["email"]
        else:
            assert message.get("gift_card_id")

    # One gift card item per gift card, and the processing log of both files.
    for contact_id in (cid for kind, cid in expected if kind == keys.GIFT_CARD):
        card = stack.get_item(keys.gift_card_key(contact_id))
        assert card and card["type"] == {"S": keys.GIFT_CARD}, contact_id
    for key, version, rows in ((first_key, first_version, 8), (second_key, second_version, 4)):
        log = eventually(lambda k=key, v=version: stack.file_outcome(k, v), timeout=30)
        assert log["outcome"] == {"S": "PROCESSED"}, log
        assert log["rows_ok"] == {"N": str(rows)}, log
        assert log["rows_rejected"] == {"N": "0"}, log
    assert not files.report_exists(first_key)
