"""The last hop: each notification with an address becomes exactly one e-mail (SES's Send event
recorded once per notification; locally, one message in the inbox), from the stack's template of
its kind; one without an address none.

The addresses are SES's mailbox simulator's (success+<label>@simulator.amazonses.com): on AWS they
are accepted even in the SES sandbox, and locally the emulator treats them as SES does.
"""

from collections import Counter

import pytest
from shared import gift_cards, keys, mail

from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import LONG_WAIT, wait_for_notifications

pytestmark = pytest.mark.integration


def simulator(label: str) -> str:
    return f"success+{label}@simulator.amazonses.com"


def test_each_notification_becomes_exactly_one_e_mail(
    stack: StackClient, files, topic, contact_cleanup
):
    surveyed, waited, no_address = (new_caller() for _ in range(3))
    contact_cleanup.extend([surveyed, waited, no_address])
    survey = contact(
        surveyed,
        disposition="RESOLVED",
        email=simulator("survey"),
        survey_opt_in=True,
    )
    gift = contact(waited, disposition="ESCALATED", wait_seconds=LONG_WAIT, email=simulator("gift"))
    gift_without_address = contact(no_address, disposition="ESCALATED", wait_seconds=LONG_WAIT)
    files.put_jsonl("mail.jsonl", [survey, gift, gift_without_address, survey])

    expected = Counter(
        {
            (keys.SURVEY, survey["contact_id"]): 1,
            (keys.GIFT_CARD, gift["contact_id"]): 1,
            (keys.GIFT_CARD, gift_without_address["contact_id"]): 1,
        }
    )
    assert wait_for_notifications(stack, topic, expected) == expected
    mailed = {
        keys.notification_id(keys.SURVEY, survey["contact_id"]): simulator("survey"),
        keys.notification_id(keys.GIFT_CARD, gift["contact_id"]): simulator("gift"),
    }
    unmailed = keys.notification_id(keys.GIFT_CARD, gift_without_address["contact_id"])

    def sent_events_recorded():
        recorded = stack.mail_sent([*mailed, unmailed])
        assert set(recorded) == set(mailed), f"SES's Send events recorded: {sorted(recorded)}"
        return recorded

    recorded = eventually(sent_events_recorded, timeout=60, interval=0.5)
    assert len({item["message_id"]["S"] for item in recorded.values()}) == len(mailed)
    if not stack.is_local:
        return
    inbox = [
        message
        for message in stack.inbox()
        if mail.notification_id_of_tag(message["tags"].get(mail.NOTIFICATION_TAG, ""))
        in {*mailed, unmailed}
    ]
    by_id = {mail.notification_id_of_tag(m["tags"][mail.NOTIFICATION_TAG]): m for m in inbox}
    assert len(inbox) == len(by_id) == len(mailed)  # one e-mail each, never two, none unmailed
    for notification_id, message in by_id.items():
        assert message["to"] == [mailed[notification_id]]
        assert message["message_id"] == recorded[notification_id]["message_id"]["S"]
    gift_mail = by_id[keys.notification_id(keys.GIFT_CARD, gift["contact_id"])]
    assert f"{gift_cards.gift_card_id(gift['contact_id'])}, worth 10 USD" in gift_mail["text"]


def test_a_notification_sns_could_not_deliver_to_the_mail_queue_is_mailed_after_its_redrive(
    stack: StackClient, files, topic, contact_cleanup, ops
):
    """MailQueue refusing the topic (a policy gone wrong): the published notification waits in
    MailDeliveryDeadLetterQueue, not lost (the notifier's claim says published, so nothing else
    would ever send it); `ops dlq redrive` hands it to the mail sender: one e-mail."""
    caller = new_caller()
    contact_cleanup.append(caller)
    survey = contact(caller, disposition="RESOLVED", email=simulator("kept"), survey_opt_in=True)
    notification_id = keys.notification_id(keys.SURVEY, survey["contact_id"])

    def kept() -> list[dict]:
        found = stack.peek("MailDeliveryDeadLetterQueueUrl")
        return [m for m in found if notification_id in m["Body"]]

    with stack.refusing_sends("MailQueueUrl"):
        files.put_jsonl("unmailable.jsonl", [survey])
        expected = Counter({(keys.SURVEY, survey["contact_id"]): 1})
        assert wait_for_notifications(stack, topic, expected) == expected
        eventually(kept, timeout=60, interval=0.5)
    assert stack.mail_sent([notification_id]) == {}  # never mailed

    code, out, err = ops("dlq", "redrive", "MailDeliveryDeadLetterQueue")
    assert code == 0, (out, err)
    recorded = eventually(lambda: stack.mail_sent([notification_id]), timeout=60, interval=0.5)
    assert not kept()
    if stack.is_local:
        tags = [m["tags"].get(mail.NOTIFICATION_TAG, "") for m in stack.inbox()]
        mailed = [t for t in tags if mail.notification_id_of_tag(t) == notification_id]
        assert len(mailed) == 1
    assert list(recorded) == [notification_id]
