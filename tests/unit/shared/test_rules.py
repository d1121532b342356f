"""The business rules of DESIGN.md, as pure functions."""

import pytest
from shared import rules

BASE = {
    "contact_id": "c-1",
    "caller": "+4915112345678",
    "agent_id": "agent-7",
    "wait_seconds": 30,
    "email": "a@example.com",
}


@pytest.mark.parametrize(
    ("disposition", "opt_in", "email", "due"),
    [
        (rules.RESOLVED, True, "a@example.com", True),
        (rules.RESOLVED, False, "a@example.com", False),
        (rules.RESOLVED, True, None, False),
        (rules.RESOLVED, True, "", False),
        (rules.RESOLVED, "true", "a@example.com", False),  # only a real boolean opts in
        (rules.ESCALATED, True, "a@example.com", False),
        (rules.TRANSFERRED, True, "a@example.com", False),
        (rules.ABANDONED, True, "a@example.com", False),
    ],
)
def test_survey_when_resolved_opted_in_and_email_present(disposition, opt_in, email, due):
    contact = {**BASE, "disposition": disposition, "survey_opt_in": opt_in, "email": email}
    assert rules.survey_due(contact) is due


def test_survey_opt_in_defaults_to_false():
    assert rules.survey_due({**BASE, "disposition": rules.RESOLVED}) is False


@pytest.mark.parametrize(
    ("disposition", "wait_seconds", "due"),
    [
        (rules.ABANDONED, 0, True),
        (rules.RESOLVED, 599, False),
        (rules.RESOLVED, 600, True),  # the threshold itself is a long wait
        (rules.ESCALATED, 601, True),
        (rules.TRANSFERRED, 0, False),
        (rules.SELF_SERVICE, 0, False),
    ],
)
def test_gift_card_when_abandoned_or_waited_at_least_the_threshold(disposition, wait_seconds, due):
    contact = {**BASE, "disposition": disposition, "wait_seconds": wait_seconds}
    assert rules.gift_card_due(contact, rules.DEFAULT_GOODWILL_WAIT_SECONDS) is due


def test_no_gift_card_without_a_callers_number_to_send_it_to():
    contact = {**BASE, "disposition": rules.ABANDONED, "channel": "CHAT"}
    assert rules.gift_card_due(contact, rules.DEFAULT_GOODWILL_WAIT_SECONDS)
    del contact["caller"]
    assert not rules.gift_card_due(contact, rules.DEFAULT_GOODWILL_WAIT_SECONDS)


def test_gift_card_threshold_is_the_parameter_and_numbers_may_be_decimal():
    from decimal import Decimal  # noqa: PLC0415 - numbers from a DynamoDB stream are Decimal

    contact = {**BASE, "disposition": rules.RESOLVED, "wait_seconds": Decimal(120)}
    assert rules.gift_card_due(contact, 120)
    assert not rules.gift_card_due(contact, 121)


def test_long_wait_boundary():
    assert rules.long_wait(600, 600)
    assert not rules.long_wait(599, 600)
    assert rules.DEFAULT_GOODWILL_WAIT_SECONDS == 600


CALLER = {"caller": "+4915112345678"}


@pytest.mark.parametrize(
    ("contact", "sets"),
    [
        (CALLER | {"agent_id": "agent-7", "disposition": rules.RESOLVED}, True),
        (CALLER | {"agent_id": "agent-7", "disposition": rules.ESCALATED}, True),
        (CALLER | {"agent_id": "agent-7", "disposition": rules.TRANSFERRED}, True),
        (CALLER | {"agent_id": "agent-7", "disposition": rules.RESOLVED, "channel": "VOICE"}, True),
        (CALLER | {"agent_id": "agent-7", "disposition": rules.ABANDONED}, False),
        (CALLER | {"disposition": rules.RESOLVED}, False),
        (CALLER | {"agent_id": "", "disposition": rules.RESOLVED}, False),
        # Connect routes voice calls by the caller's number: other channels and contacts
        # without a number never say who a caller's last agent is.
        (CALLER | {"agent_id": "agent-7", "disposition": rules.RESOLVED, "channel": "CHAT"}, False),
        ({"agent_id": "agent-7", "disposition": rules.RESOLVED, "channel": "VOICE"}, False),
    ],
)
def test_last_agent_from_voice_contacts_with_an_agent_that_are_not_abandoned(contact, sets):
    assert rules.sets_last_agent(contact) is sets


@pytest.mark.parametrize(
    ("candidate", "current", "newer"),
    [
        (("2026-11-29T10:00:00.000Z", "c-1"), None, True),
        (("2026-11-29T10:00:00.001Z", "c-1"), ("2026-11-29T10:00:00.000Z", "c-9"), True),
        (("2026-11-29T09:59:59.999Z", "c-9"), ("2026-11-29T10:00:00.000Z", "c-1"), False),
        (("2026-11-29T10:00:00.000Z", "c-2"), ("2026-11-29T10:00:00.000Z", "c-1"), True),
        (("2026-11-29T10:00:00.000Z", "c-1"), ("2026-11-29T10:00:00.000Z", "c-2"), False),
        (("2026-11-29T10:00:00.000Z", "c-1"), ("2026-11-29T10:00:00.000Z", "c-1"), False),
    ],
    ids=["nothing-stored", "later", "earlier", "tie-higher-id", "tie-lower-id", "same"],
)
def test_is_newer_orders_by_ended_at_then_contact_id(candidate, current, newer):
    assert rules.is_newer(candidate, current) is newer
