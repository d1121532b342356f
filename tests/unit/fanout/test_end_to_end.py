"""The fan-out end to end, in-process: stream records with duplicates through every consumer,
the notification queue (delivered twice) through the notifier, then a live call routed."""

import json
import logging
import re

import pytest
from shared import rules

from harness import ROOT
from harness.events import contact, failed_ids, sqs_event, stream_event, stream_record
from harness.in_process import cold_start
from tests.unit.fanout.helpers import enqueued, notify_all, queue_arn

CONTACTS = [
    contact("c-1", "+14155550101", "2026-11-29T09:00:00Z", survey_opt_in=True),
    contact("c-2", "+14155550101", "2026-11-29T10:00:00Z", wait_seconds=900, survey_opt_in=True),
    contact(
        "c-3",
        "+14155550102",
        "2026-11-29T10:00:00Z",
        disposition=rules.ABANDONED,
        agent_id=None,
        email="sam@example.org",
    ),
    contact("c-4", "+14155550103", "2026-11-29T11:00:00Z", disposition=rules.ESCALATED),
]
PHONE_OR_EMAIL = re.compile(r"\+1415555\d{4}|[\w.]+@example\.(com|org)")


def test_a_whole_run_sends_one_message_per_kind_and_contact_and_logs_no_personal_data(
    stack, monkeypatch, lambda_context, capsys, caplog
):
    # What Lambda would emit: INFO and up, and Powertools' own debug logs too (its batch and
    # idempotency internals see whole records). botocore's DEBUG wire logs are never enabled.
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="aws_lambda_powertools")
    # The functions at the most an operator turns on: DEBUG, with their lines per record.
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    records = [stream_record(c) for c in CONTACTS]
    for record in records:  # the items the records come from, as the ingest wrote them
        stack.dynamodb.put_item(TableName=stack.contacts_table, Item=record["dynamodb"]["NewImage"])
    # The stream delivers the batch, then redelivers it whole (a retry after a timeout).
    batch = stream_event(*records, records[0], records[2])
    for name in ("last_agent", "survey", "goodwill"):
        handler = cold_start(name, monkeypatch)
        assert failed_ids(handler.lambda_handler(batch, lambda_context)) == []
        assert failed_ids(handler.lambda_handler(batch, lambda_context)) == []

    notifier = cold_start("notifier", monkeypatch)
    published = notify_all(stack, notifier, lambda_context, deliveries=2)
    assert sorted((n["kind"], n["contact_id"]) for n in published) == [
        ("GIFT_CARD", "c-2"),
        ("GIFT_CARD", "c-3"),
        ("SURVEY", "c-1"),
        ("SURVEY", "c-2"),
    ]

    route = cold_start("route", monkeypatch)
    call = json.loads((ROOT / "events" / "connect-contact-flow.json").read_text())
    assert route.lambda_handler(call, lambda_context)["contact_id"] == "c-2"

    logged = capsys.readouterr().out + "\n".join(
        f"{record.getMessage()} {record.__dict__}" for record in caplog.records
    )
    assert '"contact_id":"c-3"' in logged.replace(" ", "")  # the logs are there...
    assert [
        m.group(0) for m in PHONE_OR_EMAIL.finditer(logged)
    ] == []  # ...without a phone number or an email


def dynamodb_requests(handler) -> list[str]:
    """Operation names of every DynamoDB request the handler's client sends from now on."""
    sent: list[str] = []
    handler.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: sent.append(model.name)
    )
    return sent


@pytest.mark.parametrize(
    ("function_dir", "first", "duplicate"),
    [
        ("goodwill", ["PutItem"], ["PutItem"]),
        ("notifier", ["PutItem", "UpdateItem"], ["PutItem"]),
    ],
)
def test_dynamodb_requests_per_notification(
    stack, monkeypatch, lambda_context, function_dir, first, duplicate
):
    """Goodwill: the gift card's conditional put, which returns an existing card itself.
    Notifier: claim (conditional put) and completion; for a duplicate, the failed claim returns
    the stored record itself (ReturnValuesOnConditionCheckFailure), so no extra read. Survey
    makes no DynamoDB request at all."""
    handler = cold_start(function_dir, monkeypatch)
    if function_dir == "notifier":
        message = {
            "notification_id": "SURVEY#c-1",
            "kind": "SURVEY",
            "contact_id": "c-1",
            "caller": "+14155550101",
            "email": "pat@example.com",
        }
        stack.sqs.send_message(
            QueueUrl=stack.notification_queue_url, MessageBody=json.dumps(message)
        )
        event = sqs_event(
            stack.drain(stack.notification_queue_url),
            queue_arn(stack, stack.notification_queue_url),
        )
    else:
        item = contact("c-1", survey_opt_in=True, disposition=rules.RESOLVED, wait_seconds=900)
        event = stream_event(stream_record(item))

    sent = dynamodb_requests(handler)
    handler.lambda_handler(event, lambda_context)
    assert sent == first
    sent.clear()
    handler.lambda_handler(event, lambda_context)
    assert sent == duplicate
    enqueued(stack)
