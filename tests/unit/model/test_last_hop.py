"""The last hop's hard cases, each as one run of the model's pipeline that reaches it for sure
(the search in test_model.py reaches them by chance): the mail sender dies after SES accepted the
e-mail and before its claim is saved, then time passes beyond MailSendEventWaitSeconds, with SES's
Send event recorded late or held in MailEventsDeadLetterQueue; a retry past the wait that dies
after its SendEmail, delivered again at once; and a notification SNS could not deliver to
MailQueue. Each ends in exactly one e-mail (tests/unit/model/design.py)."""

import pytest
from shared import idempotency, ingest

from emulator.services import ses
from ops import records as ops_records
from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import RECORDER, SEND_EMAIL_CALL, SENDER, SURVEY_DUE, Pipeline
from tests.unit.support import moto_stack

NOTIFICATION = "SURVEY#c-1"
WAIT = idempotency.MAIL_SEND_EVENT_WAIT_SECONDS


@pytest.fixture
def pipeline(aws_env, monkeypatch, capsys):
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        yield Pipeline(stack, monkeypatch)
        capsys.readouterr()  # the handlers' logs


def sender_dies_after_send_email(pipeline: Pipeline) -> None:
    pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
    pipeline.flow_up_to(SENDER)
    assert pipeline.deliver_queue(SENDER, 10, SEND_EMAIL_CALL, twice=False)
    assert pipeline.crashes == [
        (SENDER, ("dynamodb:GetItem", "dynamodb:PutItem", "email:SendEmail"))
    ]
    assert mailed(pipeline) == 1


def mailed(pipeline: Pipeline) -> int:
    return len(ses.inbox())


def claim_status(pipeline: Pipeline) -> str:
    claims = ops_records.persistence(pipeline.ops_stack, idempotency.MAIL)
    return ops_records.lookup(claims, {"notification_id": NOTIFICATION}).status


def test_a_sender_dead_after_send_email_mails_once_though_the_wait_passed(pipeline):
    """The Send event's first receive is held in flight (the recorder timed out), so it is
    recorded a visibility timeout later; the wait passes; the notification's redelivery finds the
    event and completes the claim without a second e-mail."""
    sender_dies_after_send_email(pipeline)
    assert pipeline.hold_in_flight(RECORDER)
    pipeline.time_passes(WAIT + 1)

    assert pipeline.deliver_queue(SENDER, 10, None, twice=False)
    assert (mailed(pipeline), claim_status(pipeline)) == (1, ops_records.COMPLETED)
    pipeline.drain()
    check_final_state(pipeline)


def test_a_send_event_dead_lettered_holds_the_sender_until_its_redrive(pipeline):
    """The recorder fails the Send event until MailEventsQueue dead-letters it; past the wait the
    sender's redelivery stays in doubt (no e-mail, the claim in progress) while the event waits
    in MailEventsDeadLetterQueue; the operator's redrive records it, and the next redelivery
    completes the claim: one e-mail."""
    sender_dies_after_send_email(pipeline)
    pipeline.recorder_fails_until_dead_lettered()
    pipeline.time_passes(WAIT + 1)

    pipeline.last_failures.clear()
    assert pipeline.deliver_queue(SENDER, 10, None, twice=False)
    [failure] = pipeline.last_failures
    assert "until the evidence in the dead-letter queue is recorded" in failure, failure
    assert (mailed(pipeline), claim_status(pipeline)) == (1, ops_records.INPROGRESS)

    assert pipeline.dlq_redrive()
    pipeline.settle()
    pipeline.time_passes(61)
    pipeline.settle()
    assert (mailed(pipeline), claim_status(pipeline)) == (1, ops_records.COMPLETED)
    pipeline.drain()
    check_final_state(pipeline)


def test_a_notification_sns_could_not_deliver_is_mailed_after_its_redrive(pipeline):
    """MailQueue refuses the topic's delivery: the notification waits in
    MailDeliveryDeadLetterQueue, unmailed, until `ops dlq redrive` sends it on."""
    pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
    pipeline.mail_queue_refuses_the_topic(1)
    pipeline.settle()
    assert mailed(pipeline) == 0
    assert pipeline.dead_letters_held()

    assert pipeline.dlq_redrive()
    pipeline.settle()
    assert mailed(pipeline) == 1
    pipeline.drain()
    check_final_state(pipeline)


def test_a_send_event_redriven_but_not_yet_recorded_still_holds_the_sender(pipeline):
    """The operator redrives MailEventsDeadLetterQueue: the Send event is back in
    MailEventsQueue, not yet recorded, when the notification's redelivery comes (both mappings
    poll at their own pace; a recorder still failing keeps it there for up to 5 receives). The
    sender, past its wait, finds no MAIL_SENT and an empty dead-letter queue."""
    sender_dies_after_send_email(pipeline)
    pipeline.recorder_fails_until_dead_lettered()
    pipeline.time_passes(WAIT + 1)
    assert pipeline.dlq_redrive()

    assert pipeline.deliver_queue(SENDER, 10, None, twice=False)
    assert mailed(pipeline) == 1
    pipeline.drain()
    check_final_state(pipeline)


def test_a_retry_past_the_wait_dead_after_send_email_is_not_sent_again_by_its_duplicate(pipeline):
    """The sender dies after its claim, before SendEmail; past the wait its retry retakes the
    claim, sends, and dies right after SendEmail; the same batch is delivered again at once (the
    mapping's duplicate). The duplicate waits for the retry's Send event; one e-mail. (With the
    claim's first time kept, the duplicate sent again: a chaos run's second e-mail.)"""
    pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
    pipeline.flow_up_to(SENDER)
    assert pipeline.deliver_queue(SENDER, 10, 2, twice=False)  # the claim taken, nothing sent
    assert mailed(pipeline) == 0
    pipeline.time_passes(WAIT + 61)

    assert pipeline.deliver_queue(SENDER, 10, SEND_EMAIL_CALL, twice=True)
    assert pipeline.crashes[-1][1][-1] == "email:SendEmail"
    assert mailed(pipeline) == 1
    pipeline.drain()
    check_final_state(pipeline)
