"""MailSenderFunction and MailEventsFunction: one e-mail per notification, whatever is delivered
twice and wherever the sender dies; undeliverable notifications recorded, counted, never retried.

SES is moto's, with the local stack's SES (emulator/services/ses.py): templates, the configuration
set's EventBridge destination, the inbox; the default bus's rule hands SES's events to a queue
(tests.unit.fanout.helpers.create_mail), and the tests run MailEventsFunction on what it holds, as
its mapping would.
"""

import contextlib
import json
from collections.abc import Iterator

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from moto.sesv2.responses import SESV2Response
from shared import gift_cards, idempotency, notifications

from emulator.services import ses
from harness.events import contact, failed_ids, sqs_bodies_event
from harness.in_process import ACCOUNT, REGION, cold_start
from ops import delivery_redrive
from ops.stack import MAIL_EVENTS_DLQ, Stack
from tests.faults import Crash, record_calls
from tests.unit.fanout.helpers import MAIL_STACK, Mail, create_mail, queue_arn

SURVEY = notifications.survey(contact("c-1", email="ann@example.com", survey_opt_in=True))


def gift_card(contact_id: str, email: str | None) -> dict:
    card = {
        "gift_card_id": gift_cards.gift_card_id(contact_id),
        "contact_id": contact_id,
        "caller": "+14155550102",
        "amount": gift_cards.AMOUNT,
        "currency": gift_cards.CURRENCY,
    }
    return notifications.gift_card(card, email)


@pytest.fixture
def mail(stack, monkeypatch) -> Iterator[Mail]:
    yield create_mail(stack, monkeypatch)
    ses.reset()


@pytest.fixture
def sender(mail, monkeypatch):
    return cold_start("mail_sender", monkeypatch)


@pytest.fixture
def recorder(mail, monkeypatch):
    return cold_start("mail_events", monkeypatch)


def delivered(mail: Mail, *notifications_) -> dict:
    """MailQueue's messages as Lambda delivers them (raw SNS delivery: the notification)."""
    return sqs_bodies_event([json.dumps(n) for n in notifications_], mail.queue_arn)


def record_sending_events(stack, mail: Mail, recorder, lambda_context) -> list[str]:
    """MailEventsFunction run on every event SES published so far; their types."""
    messages = stack.drain(mail.events_queue_url)
    bodies = [m["Body"] for m in messages]
    if bodies:
        response = recorder.lambda_handler(
            sqs_bodies_event(bodies, queue_arn(stack, mail.events_queue_url)), lambda_context
        )
        assert failed_ids(response) == []
    return [json.loads(body)["detail"]["eventType"] for body in bodies]


def refused(sender, event: dict, lambda_context, reason: str) -> None:
    """The whole batch failed (Lambda retries it), for `reason`."""
    with pytest.raises(BatchProcessingError, match=reason):
        sender.lambda_handler(event, lambda_context)


def inbox_ids() -> list[str]:
    """The notification id each e-mail in the inbox is tagged with."""
    return [message["tags"]["notification_id"] for message in ses.inbox()]


def test_each_notification_becomes_one_e_mail_from_its_template(
    stack, mail, sender, recorder, lambda_context
):
    card = gift_card("c-2", "bob@example.com")
    response = sender.lambda_handler(delivered(mail, SURVEY, card), lambda_context)

    assert failed_ids(response) == []
    survey_mail, card_mail = ses.inbox()
    assert survey_mail["to"] == ["ann@example.com"]
    assert survey_mail["text"] == "How did we do on c-1?"
    assert survey_mail["configuration_set"] == f"{MAIL_STACK}-mail"
    assert card_mail["to"] == ["bob@example.com"]
    assert card_mail["text"] == f"Code {card['gift_card_id']}: 10 USD (c-2)"
    assert inbox_ids() == ["SURVEY-c-1", "GIFT_CARD-c-2"]
    assert record_sending_events(stack, mail, recorder, lambda_context) == [
        "Send",
        "Delivery",
        "Send",
        "Delivery",
    ]


def test_a_notification_delivered_twice_is_one_e_mail(stack, mail, sender, lambda_context):
    sender.lambda_handler(delivered(mail, SURVEY, SURVEY), lambda_context)
    sender.lambda_handler(delivered(mail, SURVEY), lambda_context)

    assert inbox_ids() == ["SURVEY-c-1"]


def test_a_crash_after_send_is_settled_by_ses_send_event_never_sent_again(
    stack, mail, monkeypatch, recorder, lambda_context
):
    """The sender dies after SendEmail, before its claim is recorded: SES sent it. A retry before
    SES's Send event is recorded waits (fails, comes back); once it is, the claim completes."""
    first = cold_start("mail_sender", monkeypatch)
    calls = record_calls(first, crash_after=3)
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    assert calls.calls[-1] == "email:SendEmail"

    retry = cold_start("mail_sender", monkeypatch)
    refused(retry, delivered(mail, SURVEY), lambda_context, "no evidence of the call yet")
    record_sending_events(stack, mail, recorder, lambda_context)
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)
    assert failed_ids(retry.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []
    retry.lambda_handler(delivered(mail, SURVEY), lambda_context)

    assert inbox_ids() == ["SURVEY-c-1"]


def test_a_crash_before_send_is_sent_once_the_wait_has_passed(
    stack, mail, monkeypatch, recorder, lambda_context
):
    first = cold_start("mail_sender", monkeypatch)
    calls = record_calls(first, crash_after=2)  # the claim taken, SendEmail never made
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    assert "email:SendEmail" not in calls.calls

    retry = cold_start("mail_sender", monkeypatch)
    refused(retry, delivered(mail, SURVEY), lambda_context, "no evidence of the call yet")
    assert inbox_ids() == []
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)
    assert failed_ids(retry.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []
    retry.lambda_handler(delivered(mail, SURVEY), lambda_context)

    assert inbox_ids() == ["SURVEY-c-1"]


def recorder_gives_up(stack, mail: Mail) -> None:
    """MailEventsFunction failed each event 5 times: MailEventsQueue moved them to its DLQ."""
    for message in stack.drain(mail.events_queue_url):
        stack.sqs.send_message(
            QueueUrl=mail.events_dead_letter_queue_url, MessageBody=message["Body"]
        )


def rule_refused(stack, mail: Mail) -> None:
    """MailEventsQueue's policy lets nobody in: the rule puts SES's events in the DLQ at once."""
    stack.sqs.set_queue_attributes(
        QueueUrl=mail.events_queue_url,
        Attributes={
            "Policy": json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                            "Action": "sqs:SendMessage",
                            "Resource": queue_arn(stack, mail.events_queue_url),
                        }
                    ],
                }
            )
        },
    )


@pytest.mark.parametrize("held_back", [recorder_gives_up, rule_refused])
def test_a_send_event_held_in_the_dead_letter_queue_holds_a_send_in_doubt_past_the_wait(
    stack, mail, monkeypatch, recorder, lambda_context, held_back
):
    """The sender dies after SendEmail, and SES's Send event ends in MailEventsDeadLetterQueue
    (the recorder gave up on it, or the rule could not deliver it). Past the wait there is no
    MAIL_SENT, yet the e-mail went out: the sender stays in doubt while that queue holds anything,
    and the queue's redrive (`ops dlq redrive`, which records the events itself: moved back to
    MailEventsQueue they would be in neither place the sender looks) settles the claim without a
    second e-mail."""
    if held_back is rule_refused:
        held_back(stack, mail)
    first = cold_start("mail_sender", monkeypatch)
    record_calls(first, crash_after=3)
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    if held_back is recorder_gives_up:
        held_back(stack, mail)
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)

    retry = cold_start("mail_sender", monkeypatch)
    refused(retry, delivered(mail, SURVEY), lambda_context, "dead-letter queue")
    assert inbox_ids() == ["SURVEY-c-1"]

    operator = Stack(
        "unit",
        boto3.session.Session(region_name=REGION),
        {
            "ContactsTableName": stack.contacts_table,
            "MailEventsDeadLetterQueueUrl": mail.events_dead_letter_queue_url,
        },
        {},
    )
    data, _, done = delivery_redrive.redrive(operator, MAIL_EVENTS_DLQ, None, progress=None)
    assert (done, data["moved"], data["to"]) == (True, 2, "ContactsTable")  # Send, Delivery
    assert stack.drain(mail.events_dead_letter_queue_url) == []
    assert stack.drain(mail.events_queue_url) == []  # recorded, not moved back
    assert failed_ids(retry.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-1"]


def test_a_gift_card_without_an_address_is_recorded_and_counted_once(
    stack, mail, monkeypatch, lambda_context, capsys
):
    card = gift_card("c-3", None)
    sender = cold_start("mail_sender", monkeypatch)
    for _ in range(2):
        assert failed_ids(sender.lambda_handler(delivered(mail, card), lambda_context)) == []

    assert ses.inbox() == []
    output = capsys.readouterr().out.replace(" ", "")
    assert output.count('"EmailsWithoutAddress":[1.0]') == 1
    assert '"outcome":"noaddress"' in output


@pytest.mark.parametrize(
    ("local", "reason", "metric"),
    [
        ("bounce", "bounce", "EmailsBounced"),
        ("suppressionlist", "suppressed", "EmailsSuppressed"),
        ("complaint", "complaint", "EmailsComplained"),
    ],
)
def test_an_address_gone_for_good_gets_nothing_more(
    stack, mail, monkeypatch, recorder, lambda_context, capsys, local, reason, metric
):
    address = f"{local}@simulator.amazonses.com"
    survey = notifications.survey(contact("c-4", email=address, survey_opt_in=True))
    card = gift_card("c-4", address)
    sender = cold_start("mail_sender", monkeypatch)
    sender.lambda_handler(delivered(mail, survey), lambda_context)
    record_sending_events(stack, mail, recorder, lambda_context)
    assert failed_ids(sender.lambda_handler(delivered(mail, card), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-4"]
    output = capsys.readouterr().out.replace(" ", "")
    assert f'"{metric}":[1.0]' in output
    assert '"EmailsToUndeliverableAddress":[1.0]' in output
    assert address not in output  # no address in any log line or metric
    stored = stack.dynamodb.scan(TableName=stack.contacts_table)["Items"]
    assert [item["reason"]["S"] for item in stored if "reason" in item] == [reason]


def test_a_send_ses_refuses_is_retried_under_a_fresh_claim(
    stack, mail, monkeypatch, lambda_context
):
    monkeypatch.setenv("MAIL_CONFIGURATION_SET", "not-the-stacks")
    refusing = cold_start("mail_sender", monkeypatch)
    refused(refusing, delivered(mail, SURVEY), lambda_context, "NotFoundException")
    monkeypatch.setenv("MAIL_CONFIGURATION_SET", f"{MAIL_STACK}-mail")
    sender = cold_start("mail_sender", monkeypatch)
    assert failed_ids(sender.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-1"]


def test_no_address_reaches_the_logs(stack, mail, monkeypatch, lambda_context, capsys):
    sender = cold_start("mail_sender", monkeypatch)
    card = gift_card("c-2", "bob@example.com")
    sender.lambda_handler(delivered(mail, SURVEY, card), lambda_context)

    output = capsys.readouterr().out
    assert "notification mailed" in output
    assert "@example.com" not in output


SENDER_CALLS = ("dynamodb:GetItem", "dynamodb:PutItem", "email:SendEmail", "dynamodb:UpdateItem")


@pytest.mark.parametrize("crash_after", range(1, len(SENDER_CALLS) + 1))
def test_a_crash_at_any_call_of_the_sender_ends_in_exactly_one_e_mail(
    stack, mail, monkeypatch, recorder, lambda_context, crash_after
):
    """Every crash point of a send, then what the queue and SES do next: the message comes back
    (twice), SES's events are recorded, time passes beyond the wait; one e-mail in the end."""
    first = cold_start("mail_sender", monkeypatch)
    calls = record_calls(first, crash_after=crash_after)
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    assert tuple(calls.calls) == SENDER_CALLS[:crash_after]

    retry = cold_start("mail_sender", monkeypatch)
    for _ in range(2):
        with contextlib.suppress(BatchProcessingError):  # in doubt: failed, asked again later
            retry.lambda_handler(delivered(mail, SURVEY), lambda_context)
        record_sending_events(stack, mail, recorder, lambda_context)
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)
    for _ in range(2):
        assert failed_ids(retry.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-1"]
    assert stack.dynamodb.scan(TableName=stack.idempotency_table)["Items"][0]["status"] == {
        "S": "COMPLETED"
    }


def test_a_send_whose_answer_is_lost_is_in_doubt_not_sent_again(
    stack, mail, monkeypatch, recorder, lambda_context
):
    """SES accepts the e-mail, and the answer that reaches the sender is a 5xx: it may have been
    sent. Neither the SDK's retry nor the next delivery sends it again; SES's Send event settles
    the claim. (With the SDK's default retries and the claim released as a refusal, the inbox
    held it more than once.)"""
    accept = SESV2Response.send_email

    def accepted_then_lost(self):
        accept(self)
        raise ses._error("InternalFailure", "the answer was lost", 500)

    monkeypatch.setattr(SESV2Response, "send_email", accepted_then_lost)
    losing = cold_start("mail_sender", monkeypatch)
    refused(losing, delivered(mail, SURVEY), lambda_context, "InternalFailure")
    assert inbox_ids() == ["SURVEY-c-1"]

    monkeypatch.setattr(SESV2Response, "send_email", accept)
    retry = cold_start("mail_sender", monkeypatch)
    refused(retry, delivered(mail, SURVEY), lambda_context, "no evidence of the call yet")
    record_sending_events(stack, mail, recorder, lambda_context)
    assert failed_ids(retry.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-1"]


def test_a_retry_past_the_wait_that_dies_after_send_email_holds_the_next_delivery_in_doubt(
    stack, mail, monkeypatch, recorder, lambda_context
):
    """The first sender dies after its claim, before SendEmail; past the wait a retry sends and
    dies right after SendEmail (SES sent it, its Send event not yet recorded); the batch's next
    delivery comes at once. The retry's send restarted the wait: the next delivery waits for
    that send's event instead of sending again. (With the claim's first time kept, a chaos run
    mailed a notification twice: its 1st, 2nd and 3rd deliveries, 84 s after the claim.)"""
    first = cold_start("mail_sender", monkeypatch)
    record_calls(first, crash_after=2)  # the claim taken, SendEmail never made
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)

    retry = cold_start("mail_sender", monkeypatch)
    calls = record_calls(retry, crash_after=6)  # ..., its claim retaken, SendEmail
    with pytest.raises(Crash):
        retry.lambda_handler(delivered(mail, SURVEY), lambda_context)
    assert calls.calls[-1] == "email:SendEmail"
    assert inbox_ids() == ["SURVEY-c-1"]

    again = cold_start("mail_sender", monkeypatch)
    refused(again, delivered(mail, SURVEY), lambda_context, "no evidence of the call yet")
    record_sending_events(stack, mail, recorder, lambda_context)
    assert failed_ids(again.lambda_handler(delivered(mail, SURVEY), lambda_context)) == []

    assert inbox_ids() == ["SURVEY-c-1"]


def test_of_two_deliveries_past_the_wait_at_once_only_one_sends(
    stack, mail, monkeypatch, lambda_context
):
    """The claim is in doubt past the wait (its sender died before SendEmail). Two deliveries
    of the notification run at once: the second runs whole while the first is between reading
    the claim and retaking it. The second retakes it and sends; the first finds the claim no
    longer the one it read and stays in doubt: one e-mail."""
    first = cold_start("mail_sender", monkeypatch)
    record_calls(first, crash_after=2)  # the claim taken, SendEmail never made
    with pytest.raises(Crash):
        first.lambda_handler(delivered(mail, SURVEY), lambda_context)
    stack.age_idempotency_records(idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)

    one = cold_start("mail_sender", monkeypatch)
    other = cold_start("mail_sender", monkeypatch)
    calls = record_calls(one)
    # after its 4th call (MailEventsDeadLetterQueue's count), before it retakes the claim
    calls.meanwhile = (
        4,
        lambda: failed_ids(other.lambda_handler(delivered(mail, SURVEY), lambda_context)),
    )
    refused(one, delivered(mail, SURVEY), lambda_context, "after another delivery's retry")
    assert calls.calls[3] == "sqs:GetQueueAttributes"

    assert inbox_ids() == ["SURVEY-c-1"]
