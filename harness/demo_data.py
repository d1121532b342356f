"""The demo's data: a realistic export of a few thousand contacts (a few hundred callers, forty
agents, a mix of dispositions, time zones and bad rows) in six files of every shape the ingest
reads, and a re-export of some contacts with fields changed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from shared import keys, rules

from harness import expected
from harness.builders import file_body

DEMO_PREFIX = "incoming/demo/"
QUEUES = ("billing", "support", "sales", "claims", "Kundenservice")
DISPOSITIONS = {  # weights
    rules.RESOLVED: 55,
    rules.TRANSFERRED: 15,
    rules.ESCALATED: 18,
    rules.ABANDONED: 12,
}
# The first export: six files in every shape the ingest reads, as hourly exports would come.
FILE_NAMES = (
    "contacts-2026-11-02.jsonl",
    "contacts-2026-11-03.csv",
    "contacts-2026-11-04.csv.gz",
    "Kontakte München 1.jsonl",
    "contacts-2026-11-05.jsonl.gz",
    "contacts-2026-11-06.csv",
)


@dataclass
class DemoFile:
    key: str
    body: bytes
    rows: int
    bad_rows: int


@dataclass
class DemoData:
    files: list[DemoFile]  # the first export
    reexport: DemoFile  # uploaded once the first export is in
    contacts: dict[str, dict]  # contact_id -> the row as first exported
    goodwill_wait_seconds: int

    @property
    def bad_rows(self) -> int:
        return sum(f.bad_rows for f in [*self.files, self.reexport])

    @property
    def surveys(self) -> int:
        return sum(kind == keys.SURVEY for kind, _ in self.notifications)

    @property
    def gift_cards(self) -> int:
        return sum(kind == keys.GIFT_CARD for kind, _ in self.notifications)

    def __post_init__(self) -> None:
        first_export = self.contacts.values()
        self.notifications = expected.notifications(first_export, self.goodwill_wait_seconds)
        self.last_agents = expected.last_agents(first_export)


def generate(n_contacts: int, n_callers: int, seed: int, goodwill_wait_seconds: int) -> DemoData:
    rng = random.Random(seed)  # noqa: S311 (demo data, not secrets)
    callers = [f"+1555{n:07d}" for n in rng.sample(range(10**7), n_callers)]
    agents = [f"agent-{n:03d}" for n in range(1, 41)]
    zones = [UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-5))]
    start = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    rows: list[dict] = []
    for n in range(n_contacts):
        caller = callers[n] if n < n_callers else rng.choice(callers)
        disposition = rng.choices(list(DISPOSITIONS), weights=list(DISPOSITIONS.values()))[0]
        wait = (
            rng.randint(30, 1200)
            if disposition == rules.ABANDONED
            else min(int(rng.expovariate(1 / 150)), 3600)
        )
        ended = start + timedelta(seconds=rng.randint(0, 14 * 24 * 3600))
        talk = 0 if disposition == rules.ABANDONED else rng.randint(60, 1800)
        zone = rng.choice(zones)
        row: dict[str, Any] = {
            "contact_id": f"ctr-{n:05d}-{rng.getrandbits(32):08x}",
            "caller": caller,
            "queue": rng.choice(QUEUES),
            "started_at": (ended - timedelta(seconds=wait + talk)).astimezone(zone).isoformat(),
            "ended_at": ended.astimezone(zone).isoformat().replace("+00:00", "Z"),
            "disposition": disposition,
            "wait_seconds": wait,
        }
        if disposition != rules.ABANDONED:
            row["agent_id"] = rng.choice(agents)
        if rng.random() < 0.6:
            row["email"] = f"customer{n}@example.com"
        if rng.random() < 0.8:
            row["survey_opt_in"] = rng.random() < 0.55
        rows.append(row)

    bad = bad_rows(rng, rows[0])
    files = []
    for index, name in enumerate(FILE_NAMES):
        mixed: list[dict | str] = list(rows[index :: len(FILE_NAMES)])
        # CSV carries only the dict-shaped bad rows (a cut-off JSON line is a JSONL problem).
        mine = [b for b in bad[index :: len(FILE_NAMES)] if ".jsonl" in name or isinstance(b, dict)]
        for broken in mine:
            mixed.insert(rng.randrange(len(mixed) + 1), broken)
        files.append(DemoFile(DEMO_PREFIX + name, file_body(name, mixed), len(mixed), len(mine)))

    # The re-export: some contacts again, with fields changed that would qualify them for a
    # survey or a gift card if they were new. They are not: nothing new may come of them.
    changed = []
    for row in rng.sample(rows, max(1, n_contacts // 20)):
        copy = {**row, "queue": "re-export"}
        if copy["disposition"] == rules.RESOLVED:
            copy.update(email=f"new-{copy['contact_id']}@example.com", survey_opt_in=True)
        copy["wait_seconds"] = max(copy["wait_seconds"], goodwill_wait_seconds + 60)
        changed.append(copy)
    name = "re-export 2026-11-05.jsonl"
    reexport = DemoFile(DEMO_PREFIX + name, file_body(name, changed), len(changed), 0)
    contacts = {row["contact_id"]: row for row in rows}
    return DemoData(files, reexport, contacts, goodwill_wait_seconds)


def bad_rows(rng: random.Random, good: dict) -> list[dict | str]:
    """Rows that break the input contract, one reason each."""

    def variant(**changes: Any) -> dict:
        row = {**good, "contact_id": f"bad-{rng.getrandbits(40):010x}", **changes}
        return {k: v for k, v in row.items() if v is not None}

    rows: list[dict | str] = []
    for _ in range(4):
        rows += [
            variant(caller="089 1234567"),
            variant(disposition="HUNG_UP"),
            variant(wait_seconds=-3),
            variant(ended_at="2026-11-01T00:00:00Z", started_at="2026-11-01T01:00:00Z"),
            variant(disposition=rules.RESOLVED, agent_id=None),
            variant(contact_id="not a valid id!"),
        ]
    rows.append('{"contact_id": "cut-off-in-the-middle", "caller": "+1')
    return rows
