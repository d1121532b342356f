"""shared.contacts.change_attributes: the SNS message attributes of a change (router mode), each
as the fan-out contract specifies, read from the typed images exactly as Lambda filters read them,
and never personal data."""

import json
from pathlib import Path

import pytest
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from hypothesis import assume, given
from shared import contacts, rules

from harness.events import contact, stream_record
from tests.unit.fanout.strategies import stream_records

EVENTS = Path(__file__).resolve().parents[3] / "events"
CONTRACT_NAMES = {
    "event_name",
    "new_disposition",
    "new_has_agent",
    "new_first_export",
    "new_survey_opt_in",
    "new_has_email",
    "new_long_wait",
    "old_disposition",
    "old_has_agent",
}


def attributes(record: dict) -> dict[str, str]:
    return contacts.change_attributes(DynamoDBRecord(record))


def test_a_first_export_of_a_resolved_opted_in_contact():
    record = stream_record(contact("c-1", survey_opt_in=True))
    assert attributes(record) == {
        "event_name": "INSERT",
        "new_disposition": "RESOLVED",
        "new_has_agent": "true",
        "new_first_export": "true",
        "new_survey_opt_in": "true",
        "new_has_email": "true",
        "new_long_wait": "false",
    }


def test_an_abandoned_long_wait_without_agent_or_email():
    item = contact("c-1", disposition=rules.ABANDONED, agent_id=None, email=None, wait_seconds=900)
    assert attributes(stream_record(item)) == {
        "event_name": "INSERT",
        "new_disposition": "ABANDONED",
        "new_first_export": "true",
        "new_survey_opt_in": "false",
        "new_long_wait": "true",
    }


def test_a_correction_has_both_images_facts():
    old = contact("c-1", disposition=rules.ESCALATED)
    new = contact("c-1", agent_id=None, first_export=False)
    assert attributes(stream_record(new, event_name="MODIFY", old_image=old)) == {
        "event_name": "MODIFY",
        "new_disposition": "RESOLVED",
        "new_first_export": "false",
        "new_survey_opt_in": "false",
        "new_has_email": "true",
        "new_long_wait": "false",
        "old_disposition": "ESCALATED",
        "old_has_agent": "true",
    }


def test_a_removed_contact_has_only_its_old_facts():
    item = contact("c-1")
    assert attributes(stream_record(item, event_name="REMOVE", old_image=item)) == {
        "event_name": "REMOVE",
        "old_disposition": "RESOLVED",
        "old_has_agent": "true",
    }


@pytest.mark.parametrize("item_type", ["LAST_AGENT", "GIFT_CARD", "contact", ""])
def test_other_items_have_only_the_event_name(item_type):
    item = {**contact("c-1"), "type": item_type}
    record = stream_record(item, event_name="MODIFY", old_image=item)
    assert attributes(record) == {"event_name": "MODIFY"}


def set_typed(record: dict, name: str, value: dict | None) -> dict:
    image = record["dynamodb"]["NewImage"]
    if value is None:
        image.pop(name)
    else:
        image[name] = value
    return record


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        # a filter's {"S": [...]} sees only an S value
        ("disposition", {"N": "1"}, {}),
        ("disposition", {"SS": ["RESOLVED"]}, {}),
        ("disposition", {"S": "closed"}, {"new_disposition": "closed"}),
        ("agent_id", {"NULL": True}, {}),
        ("agent_id", {"S": ""}, {"new_has_agent": "true"}),  # exists: an empty S is there
        ("email", {"L": [{"S": "pat@example.com"}]}, {}),
        ("email", {"S": ""}, {"new_has_email": "true"}),
        # {"BOOL": [true]} sees only a BOOL true
        ("first_export", {"S": "true"}, {"new_first_export": "false"}),
        ("first_export", {"N": "1"}, {"new_first_export": "false"}),
        ("first_export", None, {"new_first_export": "false"}),
        ("survey_opt_in", {"BOOL": True}, {"new_survey_opt_in": "true"}),
        ("long_wait", {"NULL": True}, {"new_long_wait": "false"}),
    ],
)
def test_each_fact_is_read_as_the_filters_read_it(name, value, expected):
    record = set_typed(stream_record(contact("c-1")), name, value)
    prefix = {
        "disposition": "new_disposition",
        "agent_id": "new_has_agent",
        "email": "new_has_email",
    }
    result = attributes(record)
    if name in prefix:
        assert {k: v for k, v in result.items() if k == prefix[name]} == expected
    else:
        assert {k: v for k, v in result.items() if k == f"new_{name}"} == expected


@pytest.mark.parametrize("item_type", [{"N": "1"}, {"SS": ["CONTACT"]}, {"M": {"S": {"S": "x"}}}])
def test_a_type_that_is_not_the_string_contact_is_not_a_contact(item_type):
    record = set_typed(stream_record(contact("c-1")), "type", item_type)
    assert attributes(record) == {"event_name": "INSERT"}


@pytest.mark.parametrize("path", sorted(EVENTS.glob("dynamodb-*.json")), ids=lambda p: p.name)
def test_sample_records_have_contract_attributes_only(path):
    (record,) = json.loads(path.read_text())["Records"]
    result = attributes(record)
    assert result["event_name"] == record["eventName"]
    assert set(result) <= CONTRACT_NAMES


def personal_values(record: dict) -> set[str]:
    values = set()
    for image_name in ("NewImage", "OldImage"):
        image = record["dynamodb"].get(image_name) or {}
        for name in ("caller", "email", "agent_id", "pk", "sk", "contact_id"):
            value = image.get(name)
            if isinstance(value, dict) and isinstance(value.get("S"), str):
                values.add(value["S"])
    return values


def dispositions(record: dict) -> set[str]:
    return {
        image["disposition"].get("S")
        for image in (record["dynamodb"].get("NewImage"), record["dynamodb"].get("OldImage"))
        if image and isinstance(image.get("disposition"), dict)
    }


@given(stream_records())
def test_attributes_are_never_personal_data(record):
    """Only the contract's names, at most SNS's 10 attributes, values that are facts: booleans,
    the event name, the disposition; never an email, caller, agent id or key."""
    assume(not dispositions(record) & personal_values(record))
    result = attributes(record)
    assert set(result) <= CONTRACT_NAMES
    assert len(result) <= 10
    assert all(isinstance(value, str) for value in result.values())
    assert not set(result.values()) & personal_values(record)
    for name, value in result.items():
        if name.endswith("_disposition"):
            assert value in dispositions(record)
        elif name != "event_name":
            assert value in ("true", "false")
