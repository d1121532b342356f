"""Amazon Connect's contact records as contacts (docs/design.md, "Contact records"): the mapping
field by field, legs and interactions, the channels, what a broken record is reported by, and
the record's own version. Records come from harness.connect_records, shaped and sized as real
ones (every field present, null where it does not apply)."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shared import keys, model, rules

from harness import connect_records

STARTED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
INGESTED_AT = datetime(2026, 11, 30, tzinfo=UTC)


def legs(kind: str, seed: int = 7, **attributes) -> list[dict]:
    rng = random.Random(seed)
    return connect_records.interaction(
        rng, caller="+15550100001", started=STARTED, kind=kind, **attributes
    )


def parse(record: dict, **options) -> model.Contact | list[str]:
    return model.parse_contact(record, text_values=False, ingested_at=INGESTED_AT, **options)


def test_a_handled_call_is_a_resolved_contact_of_its_caller_and_agent():
    [record] = legs("handled")
    contact = parse(record)
    user_id = record["Agent"]["ARN"].rsplit("/", 1)[1]
    assert (contact.contact_id, contact.interaction_id) == (record["ContactId"],) * 2
    assert contact.caller == record["CustomerEndpoint"]["Address"] == "+15550100001"
    assert (contact.agent_id, contact.agent_name) == (user_id, record["Agent"]["Username"])
    assert contact.disposition == rules.RESOLVED
    assert (contact.queue, contact.wait_seconds) == (
        record["Queue"]["Name"],
        record["Queue"]["Duration"],
    )
    assert contact.ended_at == datetime.fromisoformat(record["DisconnectTimestamp"])
    assert contact.updated_at == datetime.fromisoformat(record["LastUpdateTimestamp"])
    assert (contact.channel, contact.initiation_method) == ("VOICE", "INBOUND")
    assert rules.sets_last_agent(contact.to_item(600))


def test_a_call_abandoned_in_its_queue_earns_a_gift_card_and_names_no_agent():
    [record] = legs("abandoned")
    item = parse(record).to_item(600)
    assert item["disposition"] == rules.ABANDONED and "agent_id" not in item
    assert rules.gift_card_due(item, 600) and not rules.sets_last_agent(item)


def test_the_legs_of_a_call_transferred_twice_are_one_interaction():
    first, second, last = (parse(record) for record in legs("transferred_twice"))
    assert first.interaction_id == second.interaction_id == last.interaction_id
    assert first.interaction_id == first.contact_id != last.contact_id
    assert [c.disposition for c in (first, second, last)] == [
        rules.TRANSFERRED,
        rules.TRANSFERRED,
        rules.RESOLVED,
    ]
    # Each leg's survey or gift card is the interaction's: one id whichever leg earns it.
    ids = {keys.interaction_id(c.to_item(600)) for c in (first, second, last)}
    assert ids == {first.contact_id}


def test_a_queue_transfer_or_a_callback_request_is_no_abandoned_call():
    for kind in ("callback", "transferred"):
        request = parse(legs(kind)[0])
        assert request.disposition == rules.TRANSFERRED, kind


def test_chats_and_tasks_are_stored_without_a_caller_and_never_set_a_last_agent():
    for kind in ("chat", "task"):
        [record] = legs(kind)
        item = parse(record).to_item(600)
        assert "caller" not in item and item["pk"] == f"CONTACT#{item['contact_id']}"
        assert not rules.sets_last_agent(item) and not rules.gift_card_due(item, 0), kind


def test_self_service_calls_are_neither_abandoned_nor_handled():
    [record] = legs("self_service")
    contact = parse(record)
    assert contact.disposition == rules.SELF_SERVICE and contact.agent_id is None


def test_the_survey_attributes_are_read_by_the_names_the_deployment_gives_them():
    names = model.SurveyAttributes(opt_in="wants_survey", email="contact_email")
    [record] = legs("handled", attribute_names=names)
    record["Attributes"] |= {"wants_survey": "TRUE", "contact_email": "pat@example.com"}
    contact = parse(record, survey_attributes=names)
    assert (contact.survey_opt_in, contact.email) == (True, "pat@example.com")
    assert parse(record).email != "pat@example.com"  # the default names read other attributes


@pytest.mark.parametrize("opt_in", ["false", "yes", "", None, 1])
def test_only_the_text_true_opts_in(opt_in):
    [record] = legs("handled")
    record["Attributes"]["survey_opt_in"] = opt_in
    assert parse(record).survey_opt_in is False


def test_an_attribute_that_is_no_address_is_no_email_and_loses_no_contact():
    [record] = legs("handled")
    record["Attributes"]["email"] = "not an address\r\nBcc: x@example.com"
    contact = parse(record)
    assert isinstance(contact, model.Contact) and contact.email is None


def test_a_contact_record_breaking_the_contract_is_reported_by_connects_field_names():
    [record] = legs("handled")
    broken = record | {
        "ContactId": "not an id!",
        "DisconnectTimestamp": None,
        "LastUpdateTimestamp": "yesterday",
        "Agent": {**record["Agent"], "ARN": "arn:aws:iam::1:user/x"},
        "Queue": "support",
    }
    assert parse(broken) == [
        "ContactId: 1-64 characters of A-Z, a-z, 0-9, _ and -",
        "DisconnectTimestamp: required",
        "LastUpdateTimestamp: not an ISO-8601 timestamp",
        "Agent.ARN: not an agent's ARN",
        "Queue: not an object",
    ]


def test_a_contact_older_than_what_the_table_remembers_is_refused():
    [record] = legs("handled")
    late = INGESTED_AT + timedelta(days=420)
    assert parse(record) != model.parse_contact(record, text_values=False, ingested_at=late)
    assert any(
        "past what the table remembers" in reason
        for reason in model.parse_contact(record, text_values=False, ingested_at=late)
    )


def test_a_newer_copy_has_a_newer_version_and_a_repeated_one_the_same():
    [record] = legs("handled")
    version = keys.contact_version(parse(record).to_item(600))
    newer = connect_records.redelivered(record, seconds=60)
    again = connect_records.redelivered(record, seconds=0)
    assert keys.contact_version(parse(newer).to_item(600)) > version
    assert keys.contact_version(parse(again).to_item(600)) == version


@given(seed=st.integers(0, 2**32), kind=st.sampled_from(connect_records.KINDS))
def test_every_kind_of_interaction_connect_writes_is_stored(seed, kind):
    for record in legs(kind, seed):
        contact = parse(record)
        assert isinstance(contact, model.Contact), (kind, contact)
        item = contact.to_item(600)
        if rules.sets_last_agent(item):
            assert item["channel"] == "VOICE" and item["pk"] == keys.caller_pk(item["caller"])
