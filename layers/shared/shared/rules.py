"""Business rules over a contact, as plain values (no AWS, no I/O)."""

from collections.abc import Mapping
from typing import Any

RESOLVED = "RESOLVED"
ABANDONED = "ABANDONED"
ESCALATED = "ESCALATED"
TRANSFERRED = "TRANSFERRED"
SELF_SERVICE = "SELF_SERVICE"  # never queued, never reached an agent (a flow alone served it)
DISPOSITIONS = (RESOLVED, ABANDONED, ESCALATED, TRANSFERRED, SELF_SERVICE)
WITHOUT_AGENT = (ABANDONED, SELF_SERVICE)
# The channel whose caller Connect routes by number: only its contacts say who the last agent is.
VOICE = "VOICE"

DEFAULT_GOODWILL_WAIT_SECONDS = 600


def survey_due(contact: Mapping[str, Any]) -> bool:
    """A post-call survey goes to resolved contacts whose caller opted in and left an email."""
    return (
        contact.get("disposition") == RESOLVED
        and contact.get("survey_opt_in") is True
        and bool(contact.get("email"))
    )


def long_wait(wait_seconds: int, goodwill_wait_seconds: int) -> bool:
    return wait_seconds >= goodwill_wait_seconds


def gift_card_due(contact: Mapping[str, Any], goodwill_wait_seconds: int) -> bool:
    """A goodwill gift card goes to abandoned contacts and to those who waited too long, by the
    caller's number (a contact without one has no one to send it to)."""
    return bool(contact.get("caller")) and (
        contact.get("disposition") == ABANDONED
        or long_wait(int(contact.get("wait_seconds", 0)), goodwill_wait_seconds)
    )


def sets_last_agent(contact: Mapping[str, Any]) -> bool:
    """Only a voice contact with a caller's number that reached an agent says who that caller's
    last agent is (items stored before channels were kept are voice calls)."""
    return (
        bool(contact.get("agent_id"))
        and bool(contact.get("caller"))
        and contact.get("channel", VOICE) == VOICE
        and contact.get("disposition") != ABANDONED
    )


def same_version(contact: Mapping[str, Any], other: Mapping[str, Any] | None) -> bool:
    """Both name the same contact at the same time (the key LAST_AGENT keeps of a contact)."""
    return other is not None and (contact["contact_id"], contact["ended_at"]) == (
        other["contact_id"],
        other["ended_at"],
    )


def is_newer(candidate: tuple[str, str], current: tuple[str, str] | None) -> bool:
    """Order contacts by (ended_at as fixed-width UTC, contact_id): later wins, ties go to the
    higher contact_id, so any delivery order converges on the same last agent."""
    return current is None or candidate > current
