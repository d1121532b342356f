"""The demo's data: Amazon Connect's contact records of a few thousand interactions (harness.
connect_records: calls of one to three legs, callbacks, outbound calls, chats, tasks, self-service,
a few hundred callers, forty agents), streamed into the stack's delivery stream as Connect does,
then Connect's re-deliveries of some of them (newer with fields changed, older, with the same
LastUpdateTimestamp, exact duplicates); beside them two files of the flat export format, with bad
rows, so the flat format and its rejections report show too.

What the run must produce is computed from this data by the layer's own code (harness.expected):
the contacts stored, the surveys and gift cards due per interaction, each caller's last agent.
"""

from __future__ import annotations

import collections
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import rules

from harness import connect_records, expected
from harness.builders import file_body

DEMO_PREFIX = "incoming/demo/"
FIREHOSE_PREFIX = "contact-records/"
# Connect streams records as contacts end; the demo puts them in this many deliveries, one
# after another (the local stack's Firehose writes one object per call, at once).
DELIVERIES = 6
# The flat export's share of contacts, its files (a key with spaces and unicode, gzip CSV) and
# which delivery each follows.
FLAT_SHARE = 10
FLAT_FILES = {1: "Kontakte München 1.jsonl", 4: "contacts-2026-11-04.csv.gz"}
FLAT_QUEUES = ("billing", "support", "Kundenservice")
# Re-delivered: this share of the records, split among the kinds of REDELIVERY_KINDS.
REDELIVERED_SHARE = 20
REDELIVERY_KINDS = ("newer", "older", "equal", "duplicate")


@dataclass
class DemoFile:
    key: str
    body: bytes
    rows: int
    bad_rows: int
    content: list[dict | str] = field(default_factory=list)


@dataclass
class Step:
    """What goes into the stack at one point of the run: records through Firehose, or a file."""

    records: list[dict] | None = None
    file: DemoFile | None = None


@dataclass
class DemoData:
    steps: list[Step]  # the first deliveries and the flat files, in order
    redeliveries: list[dict]  # put once the first are in
    redelivery_kinds: collections.Counter[str]
    interactions: int
    goodwill_wait_seconds: int

    @property
    def records(self) -> list[dict]:
        """The contact records of the first deliveries."""
        return [record for step in self.steps for record in step.records or []]

    @property
    def files(self) -> list[DemoFile]:
        return [step.file for step in self.steps if step.file]

    @property
    def surveys(self) -> int:
        return sum(kind == "SURVEY" for kind, _ in self.notifications)

    @property
    def gift_cards(self) -> int:
        return sum(kind == "GIFT_CARD" for kind, _ in self.notifications)

    def __post_init__(self) -> None:
        # In the order they go in: a contact's first copy is the one notified.
        rows = [*self.records, *(row for f in self.files for row in f.content), *self.redeliveries]
        self.notifications = expected.notifications(rows, self.goodwill_wait_seconds)
        self.stored = expected.stored(rows, self.goodwill_wait_seconds)
        self.last_agents = expected.last_agents(rows)
        self.bad_rows = expected.rejected(rows)
        self.good_rows = len(rows) - self.bad_rows


def generate(
    n_interactions: int,
    n_callers: int,
    seed: int,
    goodwill_wait_seconds: int,
    *,
    now: datetime | None = None,
) -> DemoData:
    rng = random.Random(seed)  # noqa: S311 (demo data, not secrets)
    callers = [f"+1555{n:07d}" for n in rng.sample(range(10**7), n_callers)]
    # Interactions arrive about every 30 s: they start early enough to have ended by now, and
    # within the days the table remembers a contact. Only the day moves them: a seed gives the
    # same records and counts on any day, at any hour.
    now = now or datetime.now(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    start = day - timedelta(days=1, seconds=45 * n_interactions)
    records = connect_records.records(rng, n_interactions, start=start, callers=callers)

    # The first deliveries, in the order Connect streams them, and the flat files between them.
    size = -(-len(records) // DELIVERIES)
    last = datetime.fromisoformat(records[-1]["DisconnectTimestamp"])
    flat = flat_files(rng, callers, max(1, n_interactions // FLAT_SHARE), start, last)
    steps: list[Step] = []
    for index in range(DELIVERIES):
        steps.append(Step(records=records[index * size : (index + 1) * size]))
        if index in FLAT_FILES:
            steps.append(Step(file=flat[FLAT_FILES[index]]))

    redeliveries, kinds = redelivered(rng, records, goodwill_wait_seconds)
    return DemoData(steps, redeliveries, kinds, n_interactions, goodwill_wait_seconds)


def redelivered(
    rng: random.Random, records: list[dict], goodwill_wait_seconds: int
) -> tuple[list[dict], collections.Counter[str]]:
    """Connect's later deliveries of some records, shuffled: newer copies (update-contact-
    attributes) with fields changed that would make them due a survey or a gift card if they
    were new, older copies (late), copies with the same LastUpdateTimestamp and another e-mail
    (one of the two wins by its content, whatever their order), exact duplicates. None gives
    anything new."""
    chosen = rng.sample(records, max(len(REDELIVERY_KINDS), len(records) // REDELIVERED_SHARE))
    copies, kinds = [], collections.Counter()
    for n, record in enumerate(chosen):
        kind = REDELIVERY_KINDS[n % len(REDELIVERY_KINDS)]
        kinds[kind] += 1
        attributes = connect_records.SURVEY_ATTRIBUTES
        if kind == "newer":
            copy = connect_records.redelivered(record, seconds=rng.randint(600, 6 * 3600))
            copy["Attributes"][attributes.opt_in] = "true"
            copy["Attributes"][attributes.email] = f"new-{n}@example.com"
            if copy["Queue"]:
                copy["Queue"]["Duration"] = goodwill_wait_seconds + 60
        elif kind == "older":
            copy = connect_records.redelivered(record, seconds=-rng.randint(60, 3600))
            copy["Attributes"][attributes.email] = f"older-{n}@example.com"
        elif kind == "equal":
            copy = connect_records.redelivered(record, seconds=0)
            copy["Attributes"][attributes.email] = f"same-time-{n}@example.com"
        else:
            copy = json.loads(json.dumps(record))
        copies.append(copy)
    rng.shuffle(copies)
    return copies, kinds


def flat_files(
    rng: random.Random, callers: list[str], n_rows: int, start: datetime, end: datetime
) -> dict[str, DemoFile]:
    """The flat export: rows of the same callers, ended between ``start`` and ``end`` (the
    records' time), with an updated_at, and bad rows (one broken rule each, a cut-off JSON
    line), in FLAT_FILES."""
    span = max(1, int((end - start).total_seconds()))
    rows: list[dict] = []
    for n in range(n_rows):
        disposition = rng.choices(
            (rules.RESOLVED, rules.TRANSFERRED, rules.ESCALATED, rules.ABANDONED), (55, 15, 18, 12)
        )[0]
        wait = (
            rng.randint(30, 1200)
            if disposition == rules.ABANDONED
            else min(int(rng.expovariate(1 / 150)), 3600)
        )
        ended = start + timedelta(seconds=rng.randint(0, span))
        talk = 0 if disposition == rules.ABANDONED else rng.randint(60, 1800)
        row: dict[str, Any] = {
            "contact_id": f"flat-{n:05d}-{rng.getrandbits(32):08x}",
            "caller": rng.choice(callers),
            "queue": rng.choice(FLAT_QUEUES),
            "started_at": (ended - timedelta(seconds=wait + talk)).isoformat(),
            "ended_at": ended.isoformat().replace("+00:00", "Z"),
            "updated_at": (ended + timedelta(seconds=rng.randint(20, 120))).isoformat(),
            "disposition": disposition,
            "wait_seconds": wait,
        }
        if disposition != rules.ABANDONED:
            row["agent_id"] = f"agent-{rng.randint(1, 40):03d}"
        if rng.random() < 0.6:
            row["email"] = f"customer{n}@example.com"
        if rng.random() < 0.8:
            row["survey_opt_in"] = rng.random() < 0.55
        rows.append(row)

    bad = bad_rows(rng, rows[0])
    files = {}
    names = list(FLAT_FILES.values())
    for index, name in enumerate(names):
        mixed: list[dict | str] = list(rows[index :: len(names)])
        # CSV carries only the dict-shaped bad rows (a cut-off JSON line is a JSONL problem).
        mine = [b for b in bad[index :: len(names)] if ".jsonl" in name or isinstance(b, dict)]
        for broken in mine:
            mixed.insert(rng.randrange(len(mixed) + 1), broken)
        files[name] = DemoFile(
            DEMO_PREFIX + name, file_body(name, mixed), len(mixed), len(mine), mixed
        )
    return files


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
            variant(updated_at=None),
        ]
    rows.append('{"contact_id": "cut-off-in-the-middle", "caller": "+1')
    return rows
