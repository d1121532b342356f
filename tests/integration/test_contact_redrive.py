"""`ops contact redrive`: a contact's current state sent to the consumers again without a new
version (re-uploading an old export changes nothing now), in every fan-out mode: what the
consumers lost comes back, what the customer got is not sent again, and a notification whose
publish may have happened is refused unless the operator says --resend."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from shared import keys

from harness.builders import contact, new_caller, new_contact_id
from harness.polling import eventually, stable
from harness.stack import StackClient
from ops import records
from tests.integration.support import wait_for_notifications

pytestmark = pytest.mark.integration


def exported(files, contact_cleanup, **fields) -> dict:
    """A contact put in a flat export: the row."""
    caller = new_caller()
    contact_cleanup.append(caller)
    row = contact(caller, contact_id=new_contact_id("redrive"), **fields)
    files.put_jsonl(f"incoming/it-redrive-{row['contact_id']}.jsonl", [row])
    return row


def test_a_lost_last_agent_comes_back_and_a_published_survey_is_not_sent_again(
    stack: StackClient, files, contact_cleanup, topic, ops
):
    row = exported(
        files, contact_cleanup, disposition="RESOLVED", email="it@example.com", survey_opt_in=True
    )
    survey = (keys.SURVEY, row["contact_id"])
    assert wait_for_notifications(stack, topic, Counter([survey])) == Counter([survey])
    assert stack.route(row["caller"])["agent_id"] == row["agent_id"]
    # What a stream batch past its 24 hours leaves behind: the consumer never got the change.
    stack.delete_items([keys.last_agent_key(row["caller"])])
    assert stack.route(row["caller"]) == {"found": "false"}

    code, out, err = ops("--json", "contact", "redrive", row["contact_id"], "--dry-run")
    assert code == 0, err
    planned = json.loads(out)
    assert planned["notifications"] == {f"SURVEY#{row['contact_id']}": "already published"}
    assert stack.route(row["caller"]) == {"found": "false"}  # a dry run sends nothing

    code, out, err = ops("contact", "redrive", row["contact_id"])  # nothing to ask: all sent
    assert code == 0, err
    assert "already published" in out and row["caller"] not in out + err
    eventually(lambda: stack.route(row["caller"]).get("found") == "true", timeout=60, interval=0.5)
    assert stack.route(row["caller"])["agent_id"] == row["agent_id"]
    eventually(stack.idle, timeout=120, interval=0.5)
    assert stable(lambda: topic.counts({row["contact_id"]})) == Counter([survey])


def test_a_notification_claimed_and_never_recorded_is_refused_without_resend(
    stack: StackClient, files, contact_cleanup, topic, ops
):
    row = exported(files, contact_cleanup, disposition="ABANDONED", agent_id=None, wait_seconds=900)
    gift = (keys.GIFT_CARD, row["contact_id"])
    wait_for_notifications(stack, topic, Counter([gift]))
    # The notifier's record as a publish whose save failed leaves it: INPROGRESS.
    layer = records.persistence(stack, records.CLAIMS["NotifierFunction"])
    notification_id = keys.notification_id(*gift)
    layer.delete_record({"notification_id": notification_id}, Exception("test"))
    layer.save_inprogress({"notification_id": notification_id}, remaining_time_in_millis=1000)

    code, out, err = ops("contact", "redrive", row["contact_id"], "--yes")
    assert (code, out) == (2, "")
    assert "never recorded" in err and "--resend" in err
    assert topic.counts({row["contact_id"]}) == Counter([gift])


def test_an_unknown_contact_is_a_message_and_exit_2(ops):
    for contact_id, message in (("no such id!", "not a contact id"), ("it-none-0", "no contact")):
        code, out, err = ops("contact", "redrive", contact_id)
        assert (code, out) == (2, "") and message in err, err
