"""Operator commands that could send a customer a notification again refuse, or say so and ask:
`ops idempotency purge NotifierFunction` of a published (COMPLETED) record takes --resend, and
`ops dlq redrive NotificationDeadLetterQueue` says which messages were already published before
anything moves."""

import json

import pytest
from shared import idempotency, keys, notifications

from harness.events import sqs_bodies_event
from harness.in_process import client, load_handler
from ops import cli, records
from ops.errors import OpsError
from ops.stack import Stack
from tests.unit.fanout.helpers import queue_arn
from tests.unit.ops.support import args


def survey(contact_id: str) -> dict:
    return notifications.survey(
        {"contact_id": contact_id, "caller": "+15551234567", "email": "a@example.com"}
    )


def notify(stack, monkeypatch, lambda_context, *messages: dict) -> list[dict]:
    """NotifierFunction given these notifications as NotificationQueue delivers them; what
    reached the topic."""
    notifier = load_handler("notifier", monkeypatch)
    event = sqs_bodies_event(
        [json.dumps(m) for m in messages], queue_arn(stack, stack.notification_queue_url)
    )
    assert notifier.lambda_handler(event, lambda_context) == {"batchItemFailures": []}
    return stack.published()


class Asked:
    """The operator at the terminal: answers ``answer``, keeps the questions."""

    def __init__(self, answer: bool):
        self.answer, self.questions = answer, []

    def __call__(self, question: str) -> bool:
        self.questions.append(question)
        return self.answer


def test_a_published_notification_is_not_purged_without_resend(
    ops_stack, stack, monkeypatch, lambda_context
):
    assert len(notify(stack, monkeypatch, lambda_context, survey("c-42"))) == 1
    target = args(function="NotifierFunction", kind=keys.SURVEY, contact_id="c-42")

    with pytest.raises(OpsError, match=r"was published, or may have been .*COMPLETED.*--resend"):
        records.purge(ops_stack, target, None)
    declined = Asked(False)
    target.resend = True
    with pytest.raises(OpsError, match="not confirmed"):
        records.purge(ops_stack, target, declined)
    [question] = declined.questions
    assert "SURVEY#c-42 was published: the customer gets it AGAIN" in question
    [record] = records.show(ops_stack, target)[0]["records"]
    assert record["status"] == "COMPLETED"  # refused and declined: nothing deleted

    data, text, _ = records.purge(ops_stack, target, Asked(True))
    assert data["resend"] and "publishes the notification to the customer again" in text
    assert records.show(ops_stack, target)[0]["records"] == []


def test_an_in_progress_notification_is_not_purged_without_resend_whatever_its_age(ops_stack):
    """A claim a second old may have been published too: purged, its message's next delivery
    (whenever it comes) publishes it again (tests/unit/model/test_operator_horizons.py)."""
    layer = records.persistence(ops_stack, idempotency.NOTIFICATIONS)
    layer.save_inprogress({"notification_id": "SURVEY#c-43"}, remaining_time_in_millis=30_000)
    target = args(function="NotifierFunction", notification_id="SURVEY#c-43")

    with pytest.raises(OpsError, match=r"may have been .*claimed at .* never recorded.*--resend"):
        records.purge(ops_stack, target, None)
    assert records.show(ops_stack, target)[0]["records"][0]["status"] == "INPROGRESS"

    target.resend = True
    asked = Asked(True)
    data, _, _ = records.purge(ops_stack, target, asked)
    assert len(data["purged"]) == 1 and data["resend"]
    assert "may have been published: the customer may get it AGAIN" in asked.questions[0]
    assert records.show(ops_stack, target)[0]["records"] == []


def test_an_upper_case_uuid_names_the_notification_the_ingest_stored(ops_stack):
    contact_id = "5ca32fbd-8f92-46af-92a5-6b0f970f0efe"
    layer = records.persistence(ops_stack, idempotency.NOTIFICATIONS)
    layer.save_inprogress(
        {"notification_id": f"SURVEY#{contact_id}"}, remaining_time_in_millis=30_000
    )
    target = args(function="NotifierFunction", kind=keys.SURVEY, contact_id=contact_id.upper())
    assert records.show(ops_stack, target)[0]["target"] == f"SURVEY#{contact_id}"
    assert len(records.show(ops_stack, target)[0]["records"]) == 1


@pytest.fixture
def dlq_stack(ops_stack, stack) -> Stack:
    """``ops_stack`` whose NotificationQueue dead-letters to a NotificationDeadLetterQueue."""
    sqs = client("sqs")
    dlq = sqs.create_queue(QueueName="unit-notifications-dlq")["QueueUrl"]
    sqs.set_queue_attributes(
        QueueUrl=stack.notification_queue_url,
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": queue_arn(stack, dlq), "maxReceiveCount": 5}
            )
        },
    )
    outputs = dict(ops_stack.outputs, NotificationDeadLetterQueueUrl=dlq)
    return Stack("unit", ops_stack.session, outputs, {})


def test_a_notification_dlq_redrive_says_which_were_published_before_it_moves_them(
    dlq_stack, stack, monkeypatch, lambda_context, capsys
):
    assert len(notify(stack, monkeypatch, lambda_context, survey("c-1"))) == 1
    dlq = dlq_stack.outputs["NotificationDeadLetterQueueUrl"]
    for contact_id in ("c-1", "c-2"):
        stack.sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps(survey(contact_id)))
    stack.sqs.send_message(QueueUrl=dlq, MessageBody="not a notification")
    monkeypatch.setattr(cli, "connect", lambda name: dlq_stack)
    capsys.readouterr()  # only what ops prints: the notifier's own log lines may reach stdout

    assert cli.main(["dlq", "redrive", "NotificationDeadLetterQueue", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing moved" in out and "3 message(s), 1 already published" in out
    [published] = [line for line in out.splitlines() if "SURVEY#c-1" in line]
    [waiting] = [line for line in out.splitlines() if "SURVEY#c-2" in line]
    assert "already published" in published and "no record" in waiting
    assert "(not a notification)" in out
    assert "+15551234567" not in out and "a@example.com" not in out
    assert dlq_stack.queue_depth("NotificationDeadLetterQueueUrl") == 3  # all visible again

    declined = Asked(False)
    monkeypatch.setattr(cli, "confirm", declined)
    assert cli.main(["dlq", "redrive", "NotificationDeadLetterQueue"]) == 2
    assert "1 already published" in declined.questions[0]
    assert dlq_stack.queue_depth("NotificationDeadLetterQueueUrl") == 3

    data, text, ok = records.redrive_notifications(
        dlq_stack, None, dry_run=False, resend=False, confirm=Asked(True), progress=False
    )
    assert "1 already published" in text and "3 of 3 messages moved back" in text
    assert ok and data["status"] == "COMPLETED" and data["moved"] == 3
    assert [m["published"] for m in data["messages"]].count(True) == 1
    assert dlq_stack.queue_depth("NotificationDeadLetterQueueUrl") == 0
    assert dlq_stack.queue_depth("NotificationQueueUrl") == 3


def test_a_dead_lettered_notification_claimed_and_never_recorded_takes_resend(
    dlq_stack, stack, monkeypatch, lambda_context
):
    """Issue 42: the notifier published SURVEY#c-77, its save of the record failed, and the
    message was dead-lettered; an hour later the redrive once listed it as not published and
    sent it again. Now it says the notification may have been published, and refuses it unless
    --resend, which releases the claim so the notifier publishes it again, said and asked."""
    layer = records.persistence(dlq_stack, idempotency.NOTIFICATIONS)
    layer.save_inprogress({"notification_id": "SURVEY#c-77"}, remaining_time_in_millis=1)
    stack.age_idempotency_records(3600)
    dlq = dlq_stack.outputs["NotificationDeadLetterQueueUrl"]
    stack.sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps(survey("c-77")))

    data, text, _ = records.redrive_notifications(
        dlq_stack, None, dry_run=True, resend=False, confirm=None, progress=False
    )
    [message] = data["messages"]
    assert message["record"] == "INPROGRESS" and not message["published"]
    assert "claimed too long ago and never recorded" in text and "may have been published" in text
    with pytest.raises(OpsError, match=r"may have been published.*--resend"):
        records.redrive_notifications(
            dlq_stack, None, dry_run=False, resend=False, confirm=None, progress=False
        )
    assert dlq_stack.queue_depth("NotificationDeadLetterQueueUrl") == 1

    asked = Asked(True)
    data, text, ok = records.redrive_notifications(
        dlq_stack, None, dry_run=False, resend=True, confirm=asked, progress=False
    )
    assert "may get them AGAIN" in asked.questions[0]
    assert ok and len(data["released"]) == 1 and "1 claim(s) released" in text
    assert lookup_status(dlq_stack, "SURVEY#c-77") is None
    assert dlq_stack.queue_depth("NotificationQueueUrl") == 1


def test_purging_a_claim_older_than_the_deduplication_window_takes_resend(ops_stack, stack):
    layer = records.persistence(ops_stack, idempotency.NOTIFICATIONS)
    layer.save_inprogress({"notification_id": "SURVEY#c-78"}, remaining_time_in_millis=1)
    stack.age_idempotency_records(idempotency.REPUBLISH_WINDOW_SECONDS)
    target = args(function="NotifierFunction", notification_id="SURVEY#c-78")
    with pytest.raises(OpsError, match=r"may have been.*--resend"):
        records.purge(ops_stack, target, None)


def lookup_status(stack, notification_id: str) -> str | None:
    layer = records.persistence(stack, idempotency.NOTIFICATIONS)
    record = records.lookup(layer, {"notification_id": notification_id})
    return record.status if record else None
