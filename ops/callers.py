"""`ops caller show <number>`: a caller's last agent and recent contacts, as RouteFunction and
the table see them. Phone numbers and emails are shown masked, here and in --json."""

from __future__ import annotations

from typing import Any

from shared import model

from ops import table
from ops.errors import OpsError
from ops.stack import Stack

CONTACT_FIELDS = ("ended_at", "contact_id", "agent_id", "disposition", "wait_seconds", "queue")


def mask(caller: str) -> str:
    """+15551234567 -> +1555***4567: enough to tell callers apart, not to dial them."""
    return caller[:5] + "***" + caller[-4:]


def mask_email(email: str | None) -> str | None:
    """jane.doe@example.com -> j***@example.com: which mailbox domain, not whose."""
    if not email:
        return None
    local, _, domain = email.partition("@")
    return f"{local[:1]}***@{domain}"


def show(stack: Stack, number: str, count: int) -> tuple[dict[str, Any], str, bool]:
    if not model.E164.fullmatch(number):
        raise OpsError("the number must be E.164, e.g. +15551234567")
    if count < 1:
        raise OpsError("--contacts must be at least 1")
    last_agent = stack.last_agents([number]).get(number)
    items = sorted(stack.contacts_of(number), key=lambda item: item["sk"]["S"], reverse=True)
    contacts = [
        {
            **{name: next(iter(item[name].values())) for name in CONTACT_FIELDS if name in item},
            "email": mask_email(item.get("email", {}).get("S")),
        }
        for item in items[:count]
    ]
    data = {
        "caller": mask(number),
        "last_agent": last_agent,
        "contacts_total": len(items),
        "contacts": contacts,
    }
    agent = (
        f"{last_agent['agent_id']} (contact {last_agent['contact_id']}, {last_agent['ended_at']})"
        if last_agent
        else "none"
    )
    rows = [[c.get(name) for name in (*CONTACT_FIELDS, "email")] for c in contacts]
    text = (
        f"caller {data['caller']}: last agent {agent}; {len(items)} contact(s), newest first\n"
        + table.render([name.upper() for name in (*CONTACT_FIELDS, "email")], rows)
    )
    return data, text, True
