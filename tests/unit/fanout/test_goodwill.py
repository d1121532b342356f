"""GoodwillFunction: exactly one gift card and one GIFT_CARD notification per contact, whatever
the stream delivers, repeats or re-exports, and whatever call a crash interrupts."""

import pytest
from shared import gift_cards, keys, rules

from harness.events import contact, failed_ids, stream_event, stream_record
from harness.in_process import cold_start
from tests.faults import Crash, record_calls
from tests.unit.fanout.helpers import enqueued, notify_all, refuse_entries

ABANDONED = contact("c-abandoned", disposition=rules.ABANDONED, agent_id=None)


@pytest.fixture
def goodwill(stack, monkeypatch):
    return cold_start("goodwill", monkeypatch)


@pytest.fixture
def notifier(stack, monkeypatch):
    return cold_start("notifier", monkeypatch)


def gift_card_items(stack) -> list[dict]:
    items = stack.dynamodb.scan(TableName=stack.contacts_table)["Items"]
    return [item for item in items if item["type"]["S"] == keys.GIFT_CARD]


def test_an_abandoned_contact_gets_a_card_and_a_notification(stack, goodwill, lambda_context):
    response = goodwill.lambda_handler(stream_event(stream_record(ABANDONED)), lambda_context)

    assert failed_ids(response) == []
    card_id = gift_cards.gift_card_id("c-abandoned")
    assert gift_card_items(stack) == [
        {
            "pk": {"S": "GIFT_CARD#c-abandoned"},
            "sk": {"S": "GIFT_CARD"},
            "type": {"S": "GIFT_CARD"},
            "gift_card_id": {"S": card_id},
            "contact_id": {"S": "c-abandoned"},
            "caller": {"S": "+14155550101"},
            "amount": {"N": "10"},
            "currency": {"S": "USD"},
            # it holds the caller's number: it expires with the contact (issue 43)
            "expires_at": {"N": str(ABANDONED["expires_at"])},
        }
    ]
    assert enqueued(stack) == [
        {
            "notification_id": "GIFT_CARD#c-abandoned",
            "kind": "GIFT_CARD",
            "contact_id": "c-abandoned",
            "caller": "+14155550101",
            "gift_card_id": card_id,
            "amount": 10,
            "currency": "USD",
            # the contact's e-mail: the mail sender's address for the card
            "email": "pat@example.com",
        }
    ]


@pytest.mark.parametrize(
    ("wait_seconds", "due"), [(599, False), (600, True), (3600, True)], ids=str
)
def test_a_long_wait_is_due_from_the_threshold_on(
    stack, goodwill, lambda_context, wait_seconds, due
):
    goodwill.lambda_handler(
        stream_event(stream_record(contact("c-wait", wait_seconds=wait_seconds))), lambda_context
    )
    assert len(gift_card_items(stack)) == int(due)
    assert len(enqueued(stack)) == int(due)


def test_duplicates_and_re_exports_issue_one_card_and_publish_once(
    stack, monkeypatch, notifier, lambda_context, capsys
):
    record = stream_record(ABANDONED)
    cold_start("goodwill", monkeypatch).lambda_handler(stream_event(record, record), lambda_context)
    re_exported = contact(
        "c-abandoned",
        caller="+14155550199",
        ended_at="2026-11-29T11:00:00Z",
        disposition=rules.ABANDONED,
        wait_seconds=900,
    )
    cold_start("goodwill", monkeypatch).lambda_handler(
        stream_event(stream_record(re_exported), record), lambda_context
    )

    assert len(gift_card_items(stack)) == 1
    published = notify_all(stack, notifier, lambda_context, deliveries=2)
    # The card and its notification are the first issue's, for the first caller.
    assert [(n["notification_id"], n["caller"]) for n in published] == [
        ("GIFT_CARD#c-abandoned", "+14155550101")
    ]
    out = capsys.readouterr().out.replace(" ", "")
    assert '"GiftCardsIssued":[1.0]' in out


@pytest.mark.parametrize("crash_after", [1, 2], ids=["after-the-card", "after-the-enqueue"])
def test_a_crash_at_any_call_then_the_streams_immediate_retry_issues_once(
    stack, monkeypatch, notifier, lambda_context, crash_after
):
    """The defect this closes: with a Powertools claim here, a crash right after the claim left
    it in progress until the invocation's deadline, the stream's immediate retries all failed
    "already in progress", and the batch ended in StreamFailureQueue without its card."""
    record = stream_record(ABANDONED)
    crashing = cold_start("goodwill", monkeypatch)
    calls = record_calls(crashing, crash_after=crash_after)
    with pytest.raises(Crash):
        crashing.lambda_handler(stream_event(record), lambda_context)
    assert calls.calls == ["dynamodb:PutItem", "sqs:SendMessageBatch"][:crash_after]

    retry = cold_start("goodwill", monkeypatch)  # at once: a stream retry does not wait
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []

    assert len(gift_card_items(stack)) == 1
    published = notify_all(stack, notifier, lambda_context)
    assert [n["notification_id"] for n in published] == ["GIFT_CARD#c-abandoned"]


def test_a_refused_notification_fails_only_its_record_and_its_retry_finds_the_one_card(
    stack, goodwill, lambda_context
):
    long_wait = contact("c-long-wait", caller="+14155550102", wait_seconds=900)
    failing, passing = stream_record(ABANDONED), stream_record(long_wait)
    calls = record_calls(goodwill)
    refusal = refuse_entries(goodwill.sqs, lambda n: n["contact_id"] == "c-abandoned")
    response = goodwill.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == [failing["dynamodb"]["SequenceNumber"]]
    assert calls.calls == ["dynamodb:PutItem", "dynamodb:PutItem", "sqs:SendMessageBatch"]
    assert [n["contact_id"] for n in enqueued(stack)] == ["c-long-wait"]

    refusal.clear()
    assert failed_ids(goodwill.lambda_handler(stream_event(failing), lambda_context)) == []
    assert [n["contact_id"] for n in enqueued(stack)] == ["c-abandoned"]
    assert len(gift_card_items(stack)) == 2


@pytest.mark.parametrize(
    "item",
    [contact("c-resolved"), contact("c-escalated", disposition=rules.ESCALATED, wait_seconds=599)],
    ids=lambda item: item["contact_id"],
)
def test_contacts_not_due_a_gift_card_are_skipped(stack, goodwill, lambda_context, item):
    assert (
        failed_ids(goodwill.lambda_handler(stream_event(stream_record(item)), lambda_context)) == []
    )
    assert gift_card_items(stack) == []
    assert enqueued(stack) == []
