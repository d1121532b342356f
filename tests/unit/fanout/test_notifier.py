"""NotifierFunction: one SNS message per notification_id; poison messages fail alone."""

import json

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from shared import gift_cards, idempotency, notifications
from shared.aws import messaging

from harness.events import contact, failed_ids, sqs_bodies_event, sqs_event
from harness.in_process import ShrinkingClock, cold_start
from tests.faults import Crash, record_calls, throttle
from tests.unit.fanout.helpers import queue_arn, refuse_entries

SURVEY = notifications.survey(contact("c-1", survey_opt_in=True))
GIFT_CARD = notifications.gift_card(
    {
        "gift_card_id": gift_cards.gift_card_id("c-2"),
        "contact_id": "c-2",
        "caller": "+14155550102",
        "amount": 10,
        "currency": "USD",
    }
)

THIRD = notifications.survey(contact("c-3", caller="+14155550103", survey_opt_in=True))


def claim_states(stack) -> list[str]:
    """The status of each record in IdempotencyTable."""
    items = stack.dynamodb.scan(TableName=stack.idempotency_table)["Items"]
    return sorted(item["status"]["S"] for item in items)


@pytest.fixture
def notifier(stack, monkeypatch):
    return cold_start("notifier", monkeypatch)


def queued_event(stack, *notifications_, deliveries=1) -> dict:
    """Messages sent to NotificationQueue and received back, as Lambda would deliver them."""
    assert messaging.enqueue_all(stack.sqs, stack.notification_queue_url, notifications_) == {}
    messages = stack.drain(stack.notification_queue_url)
    return sqs_event(messages * deliveries, queue_arn(stack, stack.notification_queue_url))


def test_each_notification_is_published_with_its_kind_attribute(stack, notifier, lambda_context):
    response = notifier.lambda_handler(queued_event(stack, SURVEY, GIFT_CARD), lambda_context)

    assert failed_ids(response) == []
    messages = stack.drain(stack.topic_capture_url)
    assert sorted(json.loads(m["Body"])["notification_id"] for m in messages) == [
        "GIFT_CARD#c-2",
        "SURVEY#c-1",
    ]
    assert {
        json.loads(m["Body"])["kind"]: m["MessageAttributes"]["kind"]["StringValue"]
        for m in messages
    } == {"SURVEY": "SURVEY", "GIFT_CARD": "GIFT_CARD"}
    assert [json.loads(m["Body"]) for m in messages if "SURVEY" in m["Body"]] == [SURVEY]


def test_the_same_message_delivered_twice_is_published_once(stack, notifier, lambda_context):
    event = queued_event(stack, SURVEY)
    notifier.lambda_handler(event, lambda_context)
    notifier.lambda_handler(event, lambda_context)

    assert stack.published() == [SURVEY]


def test_the_same_notification_enqueued_twice_is_published_once(
    stack, monkeypatch, lambda_context, capsys
):
    """Survey/Goodwill re-enqueue after a crash: two messages (two message ids), one id."""
    event = queued_event(stack, GIFT_CARD, GIFT_CARD)
    assert len({record["messageId"] for record in event["Records"]}) == 2
    cold_start("notifier", monkeypatch).lambda_handler(event, lambda_context)

    assert stack.published() == [GIFT_CARD]
    metrics = capsys.readouterr().out.replace(" ", "")
    assert '"NotificationsSent":[1.0]' in metrics
    assert '"DuplicatesSuppressed":[1.0]' in metrics


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        json.dumps(["a list"]),
        json.dumps({**SURVEY, "kind": "COUPON"}),
        # every field a survey needs (its caller is optional: a chat has none)
        *(
            json.dumps({k: v for k, v in SURVEY.items() if k != field})
            for field in SURVEY
            if field != "caller"
        ),
        json.dumps({k: v for k, v in GIFT_CARD.items() if k != "caller"}),
        json.dumps({**SURVEY, "notification_id": "SURVEY#someone-else"}),
        json.dumps({**GIFT_CARD, "gift_card_id": ""}),
    ],
)
def test_a_poison_message_fails_alone_and_the_rest_is_sent(stack, notifier, lambda_context, body):
    event = sqs_bodies_event(
        [json.dumps(SURVEY), body, json.dumps(GIFT_CARD)],
        queue_arn(stack, stack.notification_queue_url),
    )
    response = notifier.lambda_handler(event, lambda_context)

    assert failed_ids(response) == ["msg-1"]
    assert sorted(n["notification_id"] for n in stack.published()) == [
        "GIFT_CARD#c-2",
        "SURVEY#c-1",
    ]


def test_a_batch_is_published_in_one_call_each_notification_under_its_claim(
    stack, notifier, lambda_context
):
    calls = record_calls(notifier)
    event = queued_event(stack, SURVEY, GIFT_CARD, THIRD)
    assert failed_ids(notifier.lambda_handler(event, lambda_context)) == []

    assert calls.calls == [
        *["dynamodb:PutItem"] * 3,  # the claims
        "sns:PublishBatch",
        *["dynamodb:UpdateItem"] * 3,  # each recorded COMPLETED
    ]
    assert sorted(n["notification_id"] for n in stack.published()) == [
        "GIFT_CARD#c-2",
        "SURVEY#c-1",
        "SURVEY#c-3",
    ]
    assert claim_states(stack) == ["COMPLETED"] * 3


def test_an_entry_the_topic_refuses_fails_exactly_its_record_and_the_retry_publishes(
    stack, notifier, lambda_context
):
    event = queued_event(stack, SURVEY, GIFT_CARD, THIRD)
    refusal = refuse_entries(notifier.sns, lambda n: n["kind"] == "GIFT_CARD")
    response = notifier.lambda_handler(event, lambda_context)
    gift_card_message = next(r["messageId"] for r in event["Records"] if "GIFT_CARD" in r["body"])
    assert failed_ids(response) == [gift_card_message]
    # Its claim is released, not recorded COMPLETED: the retry publishes it.
    assert claim_states(stack) == ["COMPLETED"] * 2
    assert sorted(n["notification_id"] for n in stack.published()) == ["SURVEY#c-1", "SURVEY#c-3"]

    refusal.clear()
    assert failed_ids(notifier.lambda_handler(event, lambda_context)) == []
    assert [n["notification_id"] for n in stack.published()] == ["GIFT_CARD#c-2"]
    assert claim_states(stack) == ["COMPLETED"] * 3


def test_a_publish_call_that_fails_fails_each_of_its_records_and_the_retry_publishes(
    stack, notifier, lambda_context
):
    event = queued_event(stack, SURVEY, GIFT_CARD)
    throttled = throttle(notifier, "sns:PublishBatch", times=1)
    with pytest.raises(BatchProcessingError):  # all its records failed: the batch is retried
        notifier.lambda_handler(event, lambda_context)
    assert throttled.left == 0
    assert claim_states(stack) == []  # both claims released
    assert stack.published() == []

    assert failed_ids(notifier.lambda_handler(event, lambda_context)) == []
    assert sorted(n["notification_id"] for n in stack.published()) == [
        "GIFT_CARD#c-2",
        "SURVEY#c-1",
    ]


def test_a_batch_logs_a_line_per_notification_outcome_its_counts_and_no_contact_data(
    stack, monkeypatch, lambda_context, capsys
):
    event = queued_event(stack, SURVEY, GIFT_CARD, GIFT_CARD)
    cold_start("notifier", monkeypatch).lambda_handler(event, lambda_context)

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"level"' in line]
    assert [(line["message"], line.get("notification_id")) for line in lines] == [
        ("notification claimed", "SURVEY#c-1"),
        ("notification claimed", "GIFT_CARD#c-2"),
        ("notification sent", "SURVEY#c-1"),
        ("notification sent", "GIFT_CARD#c-2"),
        ("notifications published", None),
    ]
    assert {line["level"] for line in lines} == {"INFO"}
    assert [line["recorded"] for line in lines[2:4]] == [True, True]
    assert (lines[-1]["sent"], lines[-1]["duplicates"], lines[-1]["failed"]) == (2, 1, 0)
    logged = {str(value) for line in lines for value in line.values()}
    assert not {GIFT_CARD["caller"], SURVEY["caller"], SURVEY["email"]} & logged


def test_a_poison_message_ends_in_the_dead_letter_queue(stack, notifier, lambda_context):
    """The queue's redrive policy does the rest: the record fails on every receive."""
    dlq_url = stack.sqs.create_queue(QueueName="notifications-dlq")["QueueUrl"]
    stack.sqs.set_queue_attributes(
        QueueUrl=stack.notification_queue_url,
        Attributes={
            "VisibilityTimeout": "0",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": queue_arn(stack, dlq_url), "maxReceiveCount": "5"}
            ),
        },
    )
    stack.sqs.send_message(QueueUrl=stack.notification_queue_url, MessageBody="not json")
    arn = queue_arn(stack, stack.notification_queue_url)
    for _ in range(6):
        received = stack.sqs.receive_message(QueueUrl=stack.notification_queue_url).get(
            "Messages", []
        )
        if not received:
            break
        with pytest.raises(Exception, match="All records failed"):
            notifier.lambda_handler(sqs_event(received, arn), lambda_context)

    assert [m["Body"] for m in stack.drain(dlq_url)] == ["not json"]
    assert stack.published() == []


# ---- a publish and the record of it are never one step: crashes and throttles in between ----


def test_a_crash_after_the_publish_then_the_retry_reaches_subscribers_once(
    stack, monkeypatch, lambda_context
):
    """The publish took effect, the environment died before Powertools recorded it: the retry
    publishes again, and the FIFO topic's deduplication on the notification_id delivers it once
    (the defect this closes: a standard topic delivered it twice)."""
    event = queued_event(stack, SURVEY)
    crashing = cold_start("notifier", monkeypatch)
    calls = record_calls(crashing, crash_after=2)
    with pytest.raises(Crash):
        crashing.lambda_handler(event, ShrinkingClock())
    assert calls.calls == ["dynamodb:PutItem", "sns:PublishBatch"]

    retry = cold_start("notifier", monkeypatch)
    retry_calls = record_calls(retry)
    assert failed_ids(retry.lambda_handler(event, ShrinkingClock())) == []
    assert "sns:PublishBatch" in retry_calls.calls  # published a second time...
    assert stack.published() == [SURVEY]  # ...and delivered once


def test_a_completion_throttled_past_the_retries_then_the_retry_reaches_subscribers_once(
    stack, monkeypatch, lambda_context
):
    event = queued_event(stack, SURVEY)
    first = cold_start("notifier", monkeypatch)
    throttled = throttle(first, "dynamodb:UpdateItem", times=1)
    with pytest.raises(BatchProcessingError):  # its one record failed: the batch is retried
        first.lambda_handler(event, ShrinkingClock())
    assert throttled.left == 0

    assert failed_ids(first.lambda_handler(event, ShrinkingClock())) == []
    assert stack.published() == [SURVEY]


def test_a_publish_never_recorded_is_not_published_again_once_sns_would_deliver_it_twice(
    stack, monkeypatch
):
    """The notifier published SURVEY#c-1 and its save of the COMPLETED record was throttled: the
    claim stays INPROGRESS. Redelivered within SNS FIFO's 5 minutes, the retry publishes again
    under the same claim (deduplicated); an hour later (a DLQ redrive) a publish would reach the
    customer twice, so the claim's time says it may have been published, and it is not."""
    event = queued_event(stack, SURVEY)
    first = cold_start("notifier", monkeypatch)
    throttle(first, "dynamodb:UpdateItem", times=1)
    with pytest.raises(BatchProcessingError):
        first.lambda_handler(event, ShrinkingClock())
    assert claim_states(stack) == ["INPROGRESS"]

    stack.age_idempotency_records(3600)
    later = cold_start("notifier", monkeypatch)
    calls = record_calls(later)
    with pytest.raises(BatchProcessingError):
        later.lambda_handler(event, ShrinkingClock())
    assert "sns:PublishBatch" not in calls.calls
    assert claim_states(stack) == ["INPROGRESS"]  # what the operator decides from
    assert stack.published() == [SURVEY]


def test_a_claim_is_adopted_only_within_the_window_sns_deduplicates_in(stack, monkeypatch):
    event = queued_event(stack, SURVEY)
    crashing = cold_start("notifier", monkeypatch)
    record_calls(crashing, crash_after=1)  # claimed, then the environment died
    with pytest.raises(Crash):
        crashing.lambda_handler(event, ShrinkingClock())

    stack.age_idempotency_records(idempotency.REPUBLISH_WINDOW_SECONDS - 30)
    retry = cold_start("notifier", monkeypatch)
    assert failed_ids(retry.lambda_handler(event, ShrinkingClock())) == []
    assert stack.published() == [SURVEY] and claim_states(stack) == ["COMPLETED"]
