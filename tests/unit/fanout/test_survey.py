"""SurveyFunction: the SURVEY notification of each contact due one, published exactly once
through the notifier whatever the stream delivers, repeats or re-exports, and whatever call a
crash interrupts."""

import pytest
from shared import keys, rules

from harness.events import contact, failed_ids, stream_event, stream_record
from harness.in_process import cold_start
from tests.faults import Crash, record_calls
from tests.unit.fanout.helpers import enqueued, notify_all

OPTED_IN = contact("c-survey", survey_opt_in=True)


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


def test_a_failed_enqueue_fails_only_its_record_and_its_retry_enqueues(
    stack, survey, lambda_context, monkeypatch
):
    other = contact("c-other", caller="+14155550102", survey_opt_in=True)
    failing, passing = stream_record(OPTED_IN), stream_record(other)
    real_enqueue = survey.messaging.enqueue

    def enqueue_failing_for_c_survey(client, url, notification):
        if notification["contact_id"] == "c-survey":
            raise ConnectionError("queue unreachable")
        real_enqueue(client, url, notification)

    monkeypatch.setattr(survey.messaging, "enqueue", enqueue_failing_for_c_survey)
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == [failing["dynamodb"]["SequenceNumber"]]

    monkeypatch.setattr(survey.messaging, "enqueue", real_enqueue)
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == []
    assert sorted(n["notification_id"] for n in enqueued(stack)) == [
        keys.notification_id("SURVEY", "c-other"),
        keys.notification_id("SURVEY", "c-other"),
        keys.notification_id("SURVEY", "c-survey"),
    ]


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
    assert calls.calls == ["sqs:SendMessage"]

    retry = cold_start("survey", monkeypatch)  # at once: a stream retry does not wait
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []

    published = notify_all(stack, notifier, lambda_context)
    assert [n["notification_id"] for n in published] == ["SURVEY#c-survey"]
