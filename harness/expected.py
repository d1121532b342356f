"""What input must produce, by the layer's own code (shared.model, shared.rules, shared.keys): the
contacts stored, the notifications due and each caller's last agent. The input is flat rows or
Amazon Connect's contact records alike, each parsed as IngestFunction parses it
(`model.parse_contact`); what does not parse is rejected and produces nothing. The demo, the
benchmark and the integration tests check the stack against these; none of them restates a rule.
"""

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from shared import keys, model, rules

import harness  # noqa: F401 (the layer on sys.path)

Row = Mapping[str, Any] | str  # a str: a broken line, as a file carries it


def items(
    rows: Iterable[Row],
    goodwill_wait_seconds: int = rules.DEFAULT_GOODWILL_WAIT_SECONDS,
    *,
    ingested_at: datetime | None = None,
) -> Iterator[dict]:
    """The CONTACT item of each row or record the ingest accepts, in order (a copy of a contact
    delivered twice is two items); rejected ones are left out."""
    now = ingested_at or datetime.now(UTC)
    for row in rows:
        if isinstance(row, str):
            continue
        contact = model.parse_contact(row, text_values=False, ingested_at=now)
        if isinstance(contact, model.Contact):
            yield contact.to_item(goodwill_wait_seconds)


def rejected(rows: Iterable[Row], *, ingested_at: datetime | None = None) -> int:
    """How many rows or records the ingest reports (broken lines included)."""
    now = ingested_at or datetime.now(UTC)
    return sum(
        isinstance(row, str)
        or not isinstance(
            model.parse_contact(row, text_values=False, ingested_at=now), model.Contact
        )
        for row in rows
    )


def stored(
    rows: Iterable[Row], goodwill_wait_seconds: int = rules.DEFAULT_GOODWILL_WAIT_SECONDS
) -> dict[str, dict]:
    """contact_id -> the CONTACT item the table keeps of it: the copy of the newest version
    (keys.contact_version: its own updated_at / LastUpdateTimestamp, then its content), whatever
    order the copies come in."""
    newest: dict[str, tuple[str, dict]] = {}
    for item in items(rows, goodwill_wait_seconds):
        version = keys.contact_version(item)
        current = newest.get(item["contact_id"])
        if current is None or version > current[0]:
            newest[item["contact_id"]] = (version, item)
    return {contact_id: item for contact_id, (_, item) in newest.items()}


def notifications(rows: Iterable[Row], goodwill_wait_seconds: int) -> Counter[tuple[str, str]]:
    """(kind, interaction id) -> 1 for each notification due: one survey and one gift card at most
    per customer interaction (keys.interaction_id: the legs of a transferred call are one), from
    the first copy of each contact in ``rows`` (the one stored first: a later copy, corrected
    or not, gets nothing new)."""
    first: dict[str, dict] = {}
    for item in items(rows, goodwill_wait_seconds):
        first.setdefault(item["contact_id"], item)
    due: Counter[tuple[str, str]] = Counter()
    for item in first.values():
        if rules.survey_due(item):
            due[(keys.SURVEY, keys.interaction_id(item))] = 1
        if rules.gift_card_due(item, goodwill_wait_seconds):
            due[(keys.GIFT_CARD, keys.interaction_id(item))] = 1
    return due


def last_agents(rows: Iterable[Row]) -> dict[str, dict[str, str]]:
    """caller -> the LAST_AGENT item's agent_id, contact_id and ended_at (UTC, as stored): of the
    contacts as stored (the newest copy of each), the newest that sets a last agent (a voice
    contact with a caller that reached an agent), whatever order the rows arrive in."""
    newest: dict[str, tuple[str, str, str]] = {}
    for item in stored(rows).values():
        if rules.sets_last_agent(item):
            order = (item["ended_at"], item["contact_id"])
            current = newest.get(item["caller"])
            if rules.is_newer(order, current[:2] if current else None):
                newest[item["caller"]] = (*order, item["agent_id"])
    return {
        caller: {"agent_id": agent_id, "contact_id": contact_id, "ended_at": ended_at}
        for caller, (ended_at, contact_id, agent_id) in newest.items()
    }
