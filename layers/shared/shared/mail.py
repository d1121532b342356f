"""The e-mail a notification becomes (no AWS, no I/O): its recipient, the stack's SES template
for its kind and the data the template fills in, and the tag that names its notification in
every sending event SES publishes for it.

A notification without an address (a gift card for a contact that left no e-mail) becomes no
e-mail: the mail sender records it and counts it (MailOutcome.NO_ADDRESS).
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared import keys

# The SES message tag (EmailTags) carrying the notification id. A tag value holds only ASCII
# letters, digits, '_' and '-', so KIND#<contact id> is written KIND-<contact id> (the kinds are
# fixed words: the prefix tells them apart).
NOTIFICATION_TAG = "notification_id"
# The template of each kind, after the stack's name (template.yaml: <stack>-<suffix>).
TEMPLATE_SUFFIX = {keys.SURVEY: "survey", keys.GIFT_CARD: "gift-card"}


class MailOutcome(StrEnum):
    """What became of a notification at the mail sender (its idempotency record's result)."""

    SENT = "sent"  # SES accepted it
    NO_ADDRESS = "no address"  # the notification carries no e-mail
    UNDELIVERABLE = "undeliverable"  # the address bounced for good earlier, or SES suppresses it


@dataclass(frozen=True)
class Letter:
    notification_id: str
    recipient: str
    template: str  # the suffix of the stack's template name
    data: dict[str, Any]  # what the template's {{placeholders}} are filled with

    @property
    def tag(self) -> str:
        return tag_value(self.notification_id)


def letter(notification: Mapping[str, Any]) -> Letter | None:
    """The e-mail of a parsed notification (shared.notifications.parse), None without an
    address."""
    recipient = notification.get("email")
    if not recipient:
        return None
    kind = notification["kind"]
    data: dict[str, Any] = {"contact_id": notification["contact_id"]}
    if kind == keys.GIFT_CARD:
        data |= {
            "gift_card_code": notification["gift_card_id"],
            "amount": notification["amount"],
            "currency": notification["currency"],
        }
    return Letter(notification["notification_id"], recipient, TEMPLATE_SUFFIX[kind], data)


def tag_value(notification_id: str) -> str:
    kind, _, contact_id = notification_id.partition("#")
    return f"{kind}-{contact_id}"


def notification_id_of_tag(value: str) -> str | None:
    """The notification id a tag value names; None for a value this application never wrote."""
    for kind in keys.NOTIFICATION_KINDS:
        if value.startswith(f"{kind}-") and len(value) > len(kind) + 1:
            return keys.notification_id(kind, value[len(kind) + 1 :])
    return None


def address_key(address: str) -> str:
    """What the table keys an address's delivery record by: a digest, never the address (SES
    compares addresses case-insensitively)."""
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()


# SES's sending events (event publishing, the EventBridge event's `detail`) this application acts
# on; the rest (Delivery, opens, clicks) are counted at most.
SEND, DELIVERY, BOUNCE, COMPLAINT = "Send", "Delivery", "Bounce", "Complaint"
# A bounce of this subtype is SES refusing an address on the account's suppression list.
SUPPRESSED_SUBTYPE = "OnAccountSuppressionList"


@dataclass(frozen=True)
class SendingEvent:
    """One SES sending event of one of this application's e-mails."""

    event_type: str
    notification_id: str
    message_id: str
    sent_at: str  # when SES accepted the message (mail.timestamp)
    undeliverable: tuple[str, ...] = ()  # addresses never to be sent to again
    reason: str = ""  # why: "bounce", "suppressed" or "complaint"


def sending_event(detail: Mapping[str, Any]) -> SendingEvent | None:
    """The event, None when it names no notification of this application (no tag of ours)."""
    mail = detail.get("mail") or {}
    tags = mail.get("tags") or {}
    values = tags.get(NOTIFICATION_TAG) or []
    notification_id = notification_id_of_tag(values[0]) if values else None
    if notification_id is None:
        return None
    event_type = detail.get("eventType", "")
    undeliverable: tuple[str, ...] = ()
    reason = ""
    if event_type == BOUNCE and detail["bounce"].get("bounceType") == "Permanent":
        bounce = detail["bounce"]
        undeliverable = tuple(r["emailAddress"] for r in bounce.get("bouncedRecipients", []))
        reason = "suppressed" if bounce.get("bounceSubType") == SUPPRESSED_SUBTYPE else "bounce"
    elif event_type == COMPLAINT:
        complaint = detail["complaint"]
        undeliverable = tuple(r["emailAddress"] for r in complaint.get("complainedRecipients", []))
        reason = "complaint"
    return SendingEvent(
        event_type, notification_id, mail["messageId"], mail["timestamp"], undeliverable, reason
    )
