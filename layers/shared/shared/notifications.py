"""Notification messages between the consumers and NotifierFunction (no AWS, no I/O).

A message is JSON: notification_id, kind, contact_id (the customer interaction's: its first
contact's id, keys.interaction_id), the caller when the contact has a number, plus the kind's own
fields. The notification_id is derived from (kind, contact_id), so however often a message is
built or enqueued for an interaction, from any of its legs, the notifier sees one id and
publishes once. A gift card carries the contact's e-mail when it has one (the mail sender's
address); without one the card is still issued and published, and the sender records it unsent.
"""

import json
from collections.abc import Mapping
from typing import Any

from shared import gift_cards, keys
from shared.formats import CONTACT_ID, E164, is_email

COMMON_FIELDS = ("notification_id", "kind", "contact_id")
FIELDS_BY_KIND = {
    keys.SURVEY: (*COMMON_FIELDS, "email"),  # a survey goes by e-mail: a chat's has no caller
    keys.GIFT_CARD: (*COMMON_FIELDS, "caller", "gift_card_id", "amount", "currency"),
}

# A survey's caller, when its contact has a number; a gift card's e-mail, when it has one.
OPTIONAL_FIELDS = ("caller", "email")


class InvalidNotification(ValueError):
    """A message that can never be delivered (a poison message). Its text names fields only,
    never their values, so it is safe to log."""


def survey(contact: Mapping[str, Any]) -> dict[str, Any]:
    interaction = keys.interaction_id(contact)
    message = {
        "notification_id": keys.notification_id(keys.SURVEY, interaction),
        "kind": keys.SURVEY,
        "contact_id": interaction,
        "email": contact["email"],
    }
    if contact.get("caller"):
        message["caller"] = contact["caller"]
    return message


def gift_card(card: Mapping[str, Any], email: str | None = None) -> dict[str, Any]:
    message = {
        "notification_id": keys.notification_id(keys.GIFT_CARD, card["contact_id"]),
        "kind": keys.GIFT_CARD,
        "contact_id": card["contact_id"],
        "caller": card["caller"],
        "gift_card_id": card["gift_card_id"],
        # The store gives numbers back as Decimal; the message carries a JSON number.
        "amount": int(card["amount"]),
        "currency": card["currency"],
    }
    if email:
        message["email"] = email
    return message


def parse(body: str) -> dict[str, Any]:
    """The notification in a queue message body, or InvalidNotification.

    The id must be the one its kind and contact_id yield: the notifier dedupes on it, so a message
    with any other id could reach the topic a second time for the same (kind, contact_id).
    """
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        raise InvalidNotification("body is not JSON") from None
    if not isinstance(message, dict):
        raise InvalidNotification("body is not a JSON object")
    kind = message.get("kind")
    if kind not in FIELDS_BY_KIND:
        raise InvalidNotification("kind is missing or unknown")
    missing = [field for field in FIELDS_BY_KIND[kind] if message.get(field) in (None, "")]
    if missing:
        raise InvalidNotification(f"missing fields: {', '.join(missing)}")
    if not isinstance(message["contact_id"], str) or message["notification_id"] != (
        keys.notification_id(kind, message["contact_id"])
    ):
        raise InvalidNotification("notification_id does not match kind and contact_id")
    wrong = [field for field, holds in RULES.items() if field in message and not holds(message)]
    unexpected = sorted(message.keys() - {*FIELDS_BY_KIND[kind], *OPTIONAL_FIELDS})
    if wrong or unexpected:
        # Anyone who may send to the queue could otherwise publish any card, to any address.
        raise InvalidNotification(
            "; ".join(
                [*(f"{field}: not what this application sends" for field in wrong)]
                + ([f"unexpected fields: {', '.join(unexpected)}"] if unexpected else [])
            )
        )
    return message


# What a field of a notification may hold: what the consumers build, nothing else.
RULES = {
    "contact_id": lambda m: bool(CONTACT_ID.fullmatch(m["contact_id"])),
    "caller": lambda m: isinstance(m["caller"], str) and bool(E164.fullmatch(m["caller"])),
    "email": lambda m: is_email(m["email"]),
    "gift_card_id": lambda m: m["gift_card_id"] == gift_cards.gift_card_id(m["contact_id"]),
    "amount": lambda m: type(m["amount"]) is int and m["amount"] == gift_cards.AMOUNT,
    "currency": lambda m: m["currency"] == gift_cards.CURRENCY,
}
