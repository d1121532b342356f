"""Notification messages and gift cards: pure builders and the notifier's validation."""

import json

import pytest
from shared import gift_cards, keys, notifications

CONTACT = {
    "contact_id": "c-1",
    "caller": "+14155550101",
    "email": "pat@example.com",
    "disposition": "RESOLVED",
}


def test_survey_message_follows_the_contract():
    assert notifications.survey(CONTACT) == {
        "notification_id": "SURVEY#c-1",
        "kind": "SURVEY",
        "contact_id": "c-1",
        "caller": "+14155550101",
        "email": "pat@example.com",
    }


def test_gift_card_is_deterministic_per_contact():
    card = gift_cards.new_gift_card(CONTACT)
    assert card == gift_cards.new_gift_card({**CONTACT, "disposition": "ABANDONED"})
    assert (
        card["gift_card_id"]
        != gift_cards.new_gift_card({**CONTACT, "contact_id": "c-2"})["gift_card_id"]
    )
    assert card["amount"] == gift_cards.AMOUNT == 10
    assert card["currency"] == "USD"


def test_gift_card_message_follows_the_contract_and_is_json():
    from decimal import Decimal  # noqa: PLC0415 - the store returns numbers as Decimal

    card = {**gift_cards.new_gift_card(CONTACT), "amount": Decimal(10)}
    message = notifications.gift_card(card)
    assert message == {
        "notification_id": "GIFT_CARD#c-1",
        "kind": "GIFT_CARD",
        "contact_id": "c-1",
        "caller": "+14155550101",
        "gift_card_id": gift_cards.gift_card_id("c-1"),
        "amount": 10,
        "currency": "USD",
    }
    assert notifications.parse(json.dumps(message)) == message


GIFT = notifications.gift_card(gift_cards.new_gift_card(CONTACT))


def forged_contact_id() -> dict:
    contact_id = "c 1; drop"
    return {
        **notifications.survey(CONTACT),
        "contact_id": contact_id,
        "notification_id": keys.notification_id(keys.SURVEY, contact_id),
    }


def test_parse_accepts_what_the_builders_build():
    message = notifications.survey(CONTACT)
    assert notifications.parse(json.dumps(message)) == message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{", "not JSON"),
        ("null", "not a JSON object"),
        ('"SURVEY"', "not a JSON object"),
        (json.dumps({"kind": "COUPON"}), "kind"),
        (json.dumps({**notifications.survey(CONTACT), "email": ""}), "missing fields: email"),
        (json.dumps({**notifications.survey(CONTACT), "email": None}), "missing fields: email"),
        (json.dumps({**notifications.survey(CONTACT), "contact_id": 1}), "does not match"),
        (json.dumps({**notifications.survey(CONTACT), "notification_id": "x"}), "does not match"),
        # Forged work (issue 43): what no consumer builds is refused, whoever sent it.
        (json.dumps({**GIFT, "amount": 1000}), "amount: not what this application sends"),
        (json.dumps({**GIFT, "amount": 10.0}), "amount: not what"),
        (json.dumps({**GIFT, "currency": "BTC"}), "currency: not what"),
        (json.dumps({**GIFT, "gift_card_id": "someone-elses-card"}), "gift_card_id: not what"),
        (json.dumps({**GIFT, "caller": "+1 555 EVIL"}), "caller: not what"),
        (
            json.dumps({**notifications.survey(CONTACT), "email": "a@example.com\r\nBcc: b@x.io"}),
            "email: not what",
        ),
        (json.dumps({**notifications.survey(CONTACT), "redirect": "http://x"}), "unexpected"),
        (json.dumps(forged_contact_id()), "contact_id: not what"),
    ],
)
def test_parse_rejects_poison_without_echoing_values(body, reason):
    with pytest.raises(notifications.InvalidNotification, match=reason) as error:
        notifications.parse(body)
    assert "+1415" not in str(error.value)
    assert "example.com" not in str(error.value)
