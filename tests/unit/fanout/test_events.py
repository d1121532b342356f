"""The sample events in events/: each consumer's template filter admits exactly the records it
should, and each event drives its function as `sam local invoke -e` would."""

import json

import pytest
from cfnlint.decode import cfn_yaml

from emulator.filters import FilterCriteria
from tests.unit.conftest import ROOT
from tests.unit.fanout.helpers import cold_start, enqueued

EVENTS = ROOT / "events"
CONSUMERS = ("LastAgentFunction", "SurveyFunction", "GoodwillFunction")
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
    resources = cfn_yaml.load(str(ROOT / "template.yaml"))["Resources"]
    return {
        name: FilterCriteria.from_mapping(
            resources[name]["Properties"]["Events"]["ContactsStream"]["Properties"][
                "FilterCriteria"
            ]
        )
        for name in CONSUMERS
    }


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
