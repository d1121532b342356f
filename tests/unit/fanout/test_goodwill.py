"""GoodwillFunction: exactly one gift card and one GIFT_CARD notification per contact, even when
the function crashes after its side effects and runs again."""

import pytest
from shared import gift_cards, keys, rules

from tests.unit.conftest import FakeLambdaContext
from tests.unit.fanout.builders import contact, failed_ids, stream_event, stream_record
from tests.unit.fanout.helpers import cold_start, enqueued, notify_all

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


def test_duplicates_and_re_exports_issue_nothing_new(stack, monkeypatch, lambda_context):
    record = stream_record(ABANDONED)
    cold_start("goodwill", monkeypatch).lambda_handler(stream_event(record, record), lambda_context)
    re_exported = contact(
        "c-abandoned",
        ended_at="2026-11-29T11:00:00Z",
        disposition=rules.ABANDONED,
        wait_seconds=900,
    )
    cold_start("goodwill", monkeypatch).lambda_handler(
        stream_event(stream_record(re_exported), record), lambda_context
    )

    assert len(gift_card_items(stack)) == 1
    assert len(enqueued(stack)) == 1


def test_a_failure_after_the_side_effects_then_a_retry_still_issues_once(
    stack, goodwill, notifier, lambda_context, monkeypatch
):
    """The enqueue succeeds, then the function fails before Powertools records COMPLETED:
    Powertools drops its in-progress record, the batch item fails, and the retry finds the card
    it wrote and re-enqueues the same notification, which the notifier dedupes."""
    real_enqueue = goodwill.notify.enqueue

    def enqueue_then_fail(*args):
        real_enqueue(*args)
        raise ConnectionError("lost after enqueue")

    record = stream_record(ABANDONED)
    monkeypatch.setattr(goodwill.notify, "enqueue", enqueue_then_fail)
    with pytest.raises(Exception, match="All records failed"):
        goodwill.lambda_handler(stream_event(record), lambda_context)
    monkeypatch.setattr(goodwill.notify, "enqueue", real_enqueue)
    response = goodwill.lambda_handler(stream_event(record), lambda_context)

    assert failed_ids(response) == []
    assert len(gift_card_items(stack)) == 1
    published = notify_all(stack, notifier, lambda_context, deliveries=2)
    assert [n["notification_id"] for n in published] == ["GIFT_CARD#c-abandoned"]


class Crash(BaseException):
    """The execution environment dies: no exception handler runs, nothing is cleaned up."""


def test_a_crash_after_the_side_effects_then_a_retry_after_the_timeout_still_issues_once(
    stack, monkeypatch, notifier, lambda_context
):
    """A crash leaves Powertools' in-progress record behind. It expires when the crashed
    invocation would have timed out (its remaining time, registered per call); the stream's
    retry after that runs again and converges on the same card and notification."""
    goodwill = cold_start("goodwill", monkeypatch)
    real_enqueue = goodwill.notify.enqueue

    def enqueue_then_crash(*args):
        real_enqueue(*args)
        raise Crash

    record = stream_record(ABANDONED)
    monkeypatch.setattr(goodwill.notify, "enqueue", enqueue_then_crash)
    with pytest.raises(Crash):
        goodwill.lambda_handler(stream_event(record), FakeLambdaContext(remaining_ms=0))
    monkeypatch.setattr(goodwill.notify, "enqueue", real_enqueue)

    retry = cold_start("goodwill", monkeypatch)
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []
    # A duplicate delivery after the retry completed is suppressed by the stored result.
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []

    assert len(gift_card_items(stack)) == 1
    published = notify_all(stack, notifier, lambda_context)
    assert [n["notification_id"] for n in published] == ["GIFT_CARD#c-abandoned"]


def test_a_retry_while_the_crashed_invocation_could_still_run_waits(
    stack, monkeypatch, lambda_context
):
    """Until the in-progress record expires, a retry fails its record instead of racing a run
    that may still be alive (IdempotencyAlreadyInProgressError), so the stream retries later."""
    goodwill = cold_start("goodwill", monkeypatch)
    real_enqueue = goodwill.notify.enqueue

    def enqueue_then_crash(*args):
        real_enqueue(*args)
        raise Crash

    record = stream_record(ABANDONED)
    monkeypatch.setattr(goodwill.notify, "enqueue", enqueue_then_crash)
    with pytest.raises(Crash):
        goodwill.lambda_handler(stream_event(record), FakeLambdaContext(remaining_ms=60_000))
    monkeypatch.setattr(goodwill.notify, "enqueue", real_enqueue)

    with pytest.raises(Exception, match="All records failed"):
        cold_start("goodwill", monkeypatch).lambda_handler(stream_event(record), lambda_context)
    assert len(enqueued(stack)) == 1


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
