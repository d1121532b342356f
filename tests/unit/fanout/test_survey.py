"""SurveyFunction: exactly one SURVEY notification per contact, ever."""

import pytest
from shared import keys, rules

from tests.unit.conftest import FakeLambdaContext
from tests.unit.fanout.builders import contact, failed_ids, stream_event, stream_record
from tests.unit.fanout.helpers import cold_start, enqueued, notify_all

OPTED_IN = contact("c-survey", survey_opt_in=True)


@pytest.fixture
def survey(stack, monkeypatch):
    return cold_start("survey", monkeypatch)


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


def test_the_same_record_twice_in_one_batch_enqueues_once(stack, survey, lambda_context, capsys):
    record = stream_record(OPTED_IN)
    response = survey.lambda_handler(stream_event(record, record), lambda_context)

    assert failed_ids(response) == []
    assert len(enqueued(stack)) == 1
    metrics = capsys.readouterr().out.replace(" ", "")
    assert '"SurveysEnqueued":[1.0]' in metrics
    assert '"DuplicatesSuppressed":[1.0]' in metrics


def test_a_redelivery_to_a_new_execution_environment_enqueues_nothing(
    stack, monkeypatch, lambda_context
):
    cold_start("survey", monkeypatch).lambda_handler(
        stream_event(stream_record(OPTED_IN)), lambda_context
    )
    cold_start("survey", monkeypatch).lambda_handler(
        stream_event(stream_record(OPTED_IN)), lambda_context
    )

    assert len(enqueued(stack)) == 1


def test_a_contact_re_exported_with_other_fields_gets_nothing_new(stack, survey, lambda_context):
    survey.lambda_handler(stream_event(stream_record(OPTED_IN)), lambda_context)
    re_exported = contact(
        "c-survey", ended_at="2026-11-29T10:06:00Z", survey_opt_in=True, email="new@example.com"
    )
    survey.lambda_handler(stream_event(stream_record(re_exported)), lambda_context)

    assert [n["email"] for n in enqueued(stack)] == ["pat@example.com"]


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


def test_a_failed_enqueue_fails_only_its_record_and_its_retry_enqueues(
    stack, survey, lambda_context, monkeypatch
):
    other = contact("c-other", caller="+14155550102", survey_opt_in=True)
    failing, passing = stream_record(OPTED_IN), stream_record(other)
    real_enqueue = survey.notify.enqueue

    def enqueue_failing_for_c_survey(client, url, notification):
        if notification["contact_id"] == "c-survey":
            raise ConnectionError("queue unreachable")
        real_enqueue(client, url, notification)

    monkeypatch.setattr(survey.notify, "enqueue", enqueue_failing_for_c_survey)
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == [failing["dynamodb"]["SequenceNumber"]]

    monkeypatch.setattr(survey.notify, "enqueue", real_enqueue)
    response = survey.lambda_handler(stream_event(failing, passing), lambda_context)
    assert failed_ids(response) == []
    assert sorted(n["notification_id"] for n in enqueued(stack)) == [
        keys.notification_id("SURVEY", "c-other"),
        keys.notification_id("SURVEY", "c-survey"),
    ]


class Crash(BaseException):
    """The execution environment dies after the enqueue: nothing is cleaned up."""


def test_a_crash_after_the_enqueue_then_a_retry_still_sends_one_survey(
    stack, monkeypatch, lambda_context
):
    """The retry (after the crashed invocation's in-progress record expired) enqueues the same
    notification again; the notifier publishes it once."""
    crashed = cold_start("survey", monkeypatch)
    real_enqueue = crashed.notify.enqueue

    def enqueue_then_crash(*args):
        real_enqueue(*args)
        raise Crash

    record = stream_record(OPTED_IN)
    monkeypatch.setattr(crashed.notify, "enqueue", enqueue_then_crash)
    with pytest.raises(Crash):
        crashed.lambda_handler(stream_event(record), FakeLambdaContext(remaining_ms=0))
    monkeypatch.setattr(crashed.notify, "enqueue", real_enqueue)
    retry = cold_start("survey", monkeypatch)
    assert failed_ids(retry.lambda_handler(stream_event(record), lambda_context)) == []

    published = notify_all(stack, cold_start("notifier", monkeypatch), lambda_context)
    assert [n["notification_id"] for n in published] == ["SURVEY#c-survey"]
