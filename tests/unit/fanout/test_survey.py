"""SurveyFunction: the SURVEY notification of each contact due one, published exactly once
through the notifier whatever the stream delivers, repeats or re-exports, and whatever call a
crash interrupts."""

import json

import pytest
from shared import keys, rules

from harness.events import contact, failed_ids, sqs_bodies_event, stream_event, stream_record
from harness.in_process import cold_start
from tests.faults import Crash, record_calls, throttle
from tests.unit.fanout.helpers import enqueued, notify_all, refuse_entries

OPTED_IN = contact("c-survey", survey_opt_in=True)
SURVEY_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:SurveyQueue"


@pytest.fixture
def survey(stack, monkeypatch):
    return cold_start("survey", monkeypatch)


@pytest.fixture
def notifier(stack, monkeypatch):
    return cold_start("notifier", monkeypatch)


def test_a_resolved_opted_in_contact_gets_one_survey_notification(stack, survey, lambda_context):
    response = survey.lambda_handler(stream_event(stream_record(OPTED_IN)), lambda_context)

    assert failed_ids(response) == []
    assert enqueued(stack) == [
        {
            "notification_id": "SURVEY#c-survey",
            "kind": "SURVEY",
            "contact_id": "c-survey",
            "caller": "+14155550101",
            "email": "pat@example.com",
        }
    ]


def test_duplicates_redeliveries_and_re_exports_reach_the_topic_once(
    stack, monkeypatch, notifier, lambda_context, capsys
):
    record = stream_record(OPTED_IN)
    re_exported = contact(
        "c-survey", ended_at="2026-11-29T10:06:00Z", survey_opt_in=True, email="new@example.com"
    )
    first = cold_start("survey", monkeypatch)
    first.lambda_handler(stream_event(record, record), lambda_context)
    cold_start("survey", monkeypatch).lambda_handler(
        stream_event(record, stream_record(re_exported)), lambda_context
    )

    published = notify_all(stack, notifier, lambda_context, deliveries=2)
    assert [(n["notification_id"], n["email"]) for n in published] == [
        ("SURVEY#c-survey", "pat@example.com")
    ]
    assert '"DuplicatesSuppressed":[' in capsys.readouterr().out.replace(" ", "")


@pytest.mark.parametrize("event_name", ["MODIFY", "INSERT"])
def test_a_corrected_export_gets_nothing_new_even_when_it_would_be_due(
    stack, survey, lambda_context, event_name
):
    # A correction replaces the contact: in place (MODIFY) or under a new sort key (INSERT).
    not_due = contact("c-fixed")
    due = contact("c-fixed", survey_opt_in=True, first_export=False)
    event = stream_event(stream_record(due, event_name=event_name, old_image=not_due))
    assert failed_ids(survey.lambda_handler(event, lambda_context)) == []
    assert enqueued(stack) == []


@pytest.mark.parametrize(
    "item",
    [
        contact("c-not-opted-in"),
        contact("c-no-email", survey_opt_in=True, email=None),
        contact("c-empty-email", survey_opt_in=True, email=""),
        contact("c-escalated", survey_opt_in=True, disposition=rules.ESCALATED),
        contact("c-abandoned", survey_opt_in=True, disposition=rules.ABANDONED, agent_id=None),
    ],
    ids=lambda item: item["contact_id"],
)
def test_contacts_not_due_a_survey_are_skipped(stack, survey, lambda_context, item):
    response = survey.lambda_handler(stream_event(stream_record(item)), lambda_context)

    assert failed_ids(response) == []
    assert enqueued(stack) == []


def test_a_removed_contact_is_skipped(stack, survey, lambda_context):
    record = stream_record(OPTED_IN, event_name="REMOVE", old_image=OPTED_IN)
    assert failed_ids(survey.lambda_handler(stream_event(record), lambda_context)) == []
    assert enqueued(stack) == []


def test_a_batch_enqueues_its_surveys_in_one_call(stack, survey, lambda_context):
    calls = record_calls(survey)
    due = [contact(f"c-{n}", survey_opt_in=True) for n in range(12)]
    records = [stream_record(item) for item in [contact("c-not-due"), *due]]
    assert failed_ids(survey.lambda_handler(stream_event(*records), lambda_context)) == []

    assert calls.calls == ["sqs:SendMessageBatch"] * 2  # 10 entries a call
    assert sorted(n["contact_id"] for n in enqueued(stack)) == sorted(c["contact_id"] for c in due)


def test_a_refused_entry_fails_only_its_record_and_its_retry_enqueues(
    stack, survey, lambda_context
):
    other = contact("c-other", caller="+14155550102", survey_opt_in=True)
    failing, passing = stream_record(OPTED_IN), stream_record(other)
    refusal = refuse_entries(survey.sqs, lambda n: n["contact_id"] == "c-survey")
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == [failing["dynamodb"]["SequenceNumber"]]
    assert [n["contact_id"] for n in enqueued(stack)] == ["c-other"]

    refusal.clear()
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == []
    assert sorted(n["notification_id"] for n in enqueued(stack)) == [
        keys.notification_id("SURVEY", "c-other"),
        keys.notification_id("SURVEY", "c-survey"),
    ]


def test_a_failed_enqueue_call_fails_the_records_it_carried_and_not_the_skipped(
    stack, survey, lambda_context
):
    """From a queue (fan-out modes pipe and router): each record is a message of its own."""
    not_due = contact("c-not-due")
    records = [stream_record(OPTED_IN), stream_record(not_due)]
    event = sqs_bodies_event([json.dumps(r) for r in records], SURVEY_QUEUE_ARN)
    throttle(survey, "sqs:SendMessageBatch", times=1)
    response = survey.lambda_handler(event, lambda_context)
    assert failed_ids(response) == [event["Records"][0]["messageId"]]

    assert failed_ids(survey.lambda_handler(event, lambda_context)) == []
    assert [n["notification_id"] for n in enqueued(stack)] == ["SURVEY#c-survey"]


def test_a_crash_at_its_one_call_then_the_streams_immediate_retry_sends_one_survey(
    stack, monkeypatch, notifier, lambda_context
):
    """The defect this closes: with a Powertools claim here, a crash right after the claim left
    it in progress until the invocation's deadline, the stream's immediate retries all failed
    "already in progress", and the batch ended in StreamFailureQueue without its survey."""
    record = stream_record(OPTED_IN)
    crashing = cold_start("survey", monkeypatch)
    calls = record_calls(crashing, crash_after=1)
    with pytest.raises(Crash):
        crashing.lambda_handler(stream_event(record), lambda_context)
    assert calls.calls == ["sqs:SendMessageBatch"]

    retry = cold_start("survey", monkeypatch)  # at once: a stream retry does not wait
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []

    published = notify_all(stack, notifier, lambda_context)
    assert [n["notification_id"] for n in published] == ["SURVEY#c-survey"]
