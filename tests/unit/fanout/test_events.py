"""The sample events in events/: each consumer's template filter admits exactly the records it
should, and each event drives its function as `sam local invoke -e` would."""

import hashlib
import json

import pytest

from emulator.core.filters import FilterCriteria
from harness import ROOT
from harness.in_process import cold_start
from tests.unit.fanout.fanout_template import selections
from tests.unit.fanout.helpers import enqueued

EVENTS = ROOT / "events"
# Which stream consumer must see each sample record.
ADMITTED = {
    "dynamodb-insert-contact-resolved-optin.json": {"LastAgentFunction", "SurveyFunction"},
    "dynamodb-insert-contact-abandoned.json": {"GoodwillFunction"},
    "dynamodb-insert-contact-long-wait.json": {"LastAgentFunction", "GoodwillFunction"},
    # a corrected export (the caller opted in): its last agent may change, nothing new is sent
    "dynamodb-modify-contact.json": {"LastAgentFunction"},
    # a corrected export moved the contact away: its caller's last agent may change
    "dynamodb-remove-contact.json": {"LastAgentFunction"},
    "dynamodb-insert-last-agent.json": set(),
    "dynamodb-insert-gift-card.json": set(),
}


def load(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture(scope="module")
def stream_filters() -> dict[str, FilterCriteria]:
    return {name: selection.stream for name, selection in selections().items()}


def test_every_stream_sample_is_covered():
    assert {p.name for p in EVENTS.glob("dynamodb-*.json")} == set(ADMITTED)


@pytest.mark.parametrize(("name", "admitted"), ADMITTED.items(), ids=list(ADMITTED))
def test_each_filter_admits_exactly_its_records(stream_filters, name, admitted):
    (record,) = load(name)["Records"]
    assert {
        consumer for consumer, criteria in stream_filters.items() if criteria.matches(record)
    } == admitted


def test_survey_sample_enqueues_a_survey(stack, monkeypatch, lambda_context):
    survey = cold_start("survey", monkeypatch)
    event = load("dynamodb-insert-contact-resolved-optin.json")
    assert survey.lambda_handler(event, lambda_context) == {"batchItemFailures": []}
    assert [n["kind"] for n in enqueued(stack)] == ["SURVEY"]


@pytest.mark.parametrize(
    "name", ["dynamodb-insert-contact-abandoned.json", "dynamodb-insert-contact-long-wait.json"]
)
def test_goodwill_samples_issue_a_gift_card(stack, monkeypatch, lambda_context, name):
    goodwill = cold_start("goodwill", monkeypatch)
    assert goodwill.lambda_handler(load(name), lambda_context) == {"batchItemFailures": []}
    assert [n["kind"] for n in enqueued(stack)] == ["GIFT_CARD"]


def test_last_agent_sample_then_route_samples(stack, monkeypatch, lambda_context):
    last_agent = cold_start("last_agent", monkeypatch)
    event = load("dynamodb-insert-contact-resolved-optin.json")
    for record in event["Records"]:  # the items the records come from, as the ingest wrote them
        stack.dynamodb.put_item(TableName=stack.contacts_table, Item=record["dynamodb"]["NewImage"])
    assert last_agent.lambda_handler(event, lambda_context) == {"batchItemFailures": []}

    route = cold_start("route", monkeypatch)
    assert route.lambda_handler(load("connect-contact-flow.json"), lambda_context) == {
        "found": "true",
        "agent_id": "agent-7",
        "contact_id": "c-20261129-0001",
        "ended_at": "2026-11-29T10:05:00.000Z",
    }
    unknown = load("connect-contact-flow-unknown-caller.json")
    assert route.lambda_handler(unknown, lambda_context) == {"found": "false"}


def test_notifier_samples(stack, monkeypatch, lambda_context):
    notifier = cold_start("notifier", monkeypatch)
    assert notifier.lambda_handler(load("sqs-notification.json"), lambda_context) == {
        "batchItemFailures": []
    }
    assert [n["kind"] for n in stack.published()] == ["GIFT_CARD"]

    with pytest.raises(Exception, match="All records failed"):
        notifier.lambda_handler(load("sqs-notification-poison.json"), lambda_context)


# The queue samples (FanOut pipe or router): a consumer's queue delivers stream records as JSON.
CHANGE = "sqs-change-contact-resolved-optin.json"
POISON = "sqs-change-poison.json"


def test_the_queue_samples_carry_the_stream_sample():
    (record,) = load("dynamodb-insert-contact-resolved-optin.json")["Records"]
    (message,) = load(CHANGE)["Records"]
    good, poison = load(POISON)["Records"]
    for sample in (message, good, poison):
        assert sample["eventSource"] == "aws:sqs"
        assert sample["md5OfBody"] == hashlib.md5(sample["body"].encode()).hexdigest()
    assert json.loads(message["body"]) == json.loads(good["body"]) == record
    assert json.loads(poison["body"])["detail"] == record  # a bus event, not a stream record


@pytest.mark.parametrize(
    ("function", "kinds"),
    [("survey", ["SURVEY"]), ("last_agent", []), ("goodwill", [])],
)
def test_the_queue_samples_drive_each_consumer(stack, monkeypatch, lambda_context, function, kinds):
    consumer = cold_start(function, monkeypatch)
    assert consumer.lambda_handler(load(CHANGE), lambda_context) == {"batchItemFailures": []}
    assert [n["kind"] for n in enqueued(stack)] == kinds

    _, poison = load(POISON)["Records"]
    assert consumer.lambda_handler(load(POISON), lambda_context) == {
        "batchItemFailures": [{"itemIdentifier": poison["messageId"]}]
    }
    assert [n["kind"] for n in enqueued(stack)] == kinds  # the good message of the batch
