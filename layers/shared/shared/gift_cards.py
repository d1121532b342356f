"""The goodwill gift card, as plain values (no AWS, no I/O).

One card per customer interaction, ever: its id is derived from the interaction's id (its first
contact's, keys.interaction_id), so every attempt to issue it (retries, duplicates, re-deliveries,
any leg of a transferred call) names the same card and the store's conditional write keeps one.
Every card has the same fixed value; a tiered amount would be a business decision, not a need.
"""

import uuid
from collections.abc import Mapping
from typing import Any

from shared import keys

AMOUNT = 10
CURRENCY = "USD"

# Fixed forever: changing it would give already-issued contacts a second card id.
_GIFT_CARD_NAMESPACE = uuid.UUID("5b0c7a3e-2f4d-4c1e-9a57-6f1d0e8b2c41")


def gift_card_id(contact_id: str) -> str:
    return str(uuid.uuid5(_GIFT_CARD_NAMESPACE, contact_id))


def new_gift_card(contact: Mapping[str, Any]) -> dict[str, Any]:
    """The card a contact is due: who gets it, for which interaction, and its value."""
    interaction = keys.interaction_id(contact)
    card = {
        "gift_card_id": gift_card_id(interaction),
        "contact_id": interaction,
        "caller": contact["caller"],
        "amount": AMOUNT,
        "currency": CURRENCY,
    }
    if "expires_at" in contact:
        # It holds the caller's number: it goes with its contact (TTL). "Once ever" outlives it:
        # the ingest refuses a contact past what the table remembers (shared.model.REMEMBERED).
        card["expires_at"] = int(contact["expires_at"])
    return card
