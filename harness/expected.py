"""What input rows must produce, by the layer's own rules (shared.rules, shared.keys): the
notifications due and each caller's last agent. The demo, the benchmark and the integration tests
check the stack against these; none of them restates a rule."""

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from shared import keys, rules

import harness  # noqa: F401 (the layer on sys.path)


def notifications(rows: Iterable[dict], goodwill_wait_seconds: int) -> Counter[tuple[str, str]]:
    """(kind, contact_id) -> 1 for each notification due. ``rows``: each contact as first
    exported (a re-export changes nothing: a contact is notified once, for what it first was)."""
    due: Counter[tuple[str, str]] = Counter()
    for row in rows:
        if rules.survey_due(row):
            due[(keys.SURVEY, row["contact_id"])] = 1
        if rules.gift_card_due(row, goodwill_wait_seconds):
            due[(keys.GIFT_CARD, row["contact_id"])] = 1
    return due


def last_agents(rows: Iterable[dict]) -> dict[str, dict[str, str]]:
    """caller -> the LAST_AGENT item's agent_id, contact_id and ended_at (UTC, as stored): the
    newest contact with an agent, whatever order the rows arrive in."""
    newest: dict[str, tuple[str, str, str]] = {}
    for row in rows:
        if rules.sets_last_agent(row):
            order = (keys.utc_timestamp(datetime.fromisoformat(row["ended_at"])), row["contact_id"])
            current = newest.get(row["caller"])
            if rules.is_newer(order, current[:2] if current else None):
                newest[row["caller"]] = (*order, row["agent_id"])
    return {
        caller: {"agent_id": agent_id, "contact_id": contact_id, "ended_at": ended_at}
        for caller, (ended_at, contact_id, agent_id) in newest.items()
    }
