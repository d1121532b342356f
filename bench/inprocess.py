"""What the figures that run handlers share: generated contacts (Amazon Connect's contact records
as Firehose writes them, and the flat export's rows), events shaped as AWS sends them, a DynamoDB
request counter, and a handler loaded cold into a Lambda-like environment.

The counter wraps botocore.session.Session.create_client, so every client built while it is
active (the handler's own, and any a library such as Powertools builds for itself) has a
`before-call.dynamodb` hook: one count per API call as the code makes it (retries inside one call
are not extra calls; none happen under moto anyway).
"""

import json
import os
import random
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import botocore.session
from moto import mock_aws

from bench.common import FUNCTIONS, ROOT, function_env, layer_path
from emulator.process import ACCOUNT, REGION
from emulator.services import moto_patches
from harness import connect_records, events, in_process

WRITE_OPERATIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)


@contextmanager
def aws_in_process() -> Iterator[None]:
    """moto in this process, with the local stack's fidelity patches (as the unit tests run it:
    moto's own TransactWriteItems copies whole tables)."""
    moto_patches.install()
    try:
        with mock_aws():
            yield
    finally:
        moto_patches.uninstall()


def import_shared() -> None:
    """The layer's package importable as in Lambda (/opt/python): for shared.rules and friends."""
    path = str(layer_path())
    if path not in sys.path:
        sys.path.insert(0, path)


# ---- generated contacts --------------------------------------------------------------------------

QUEUES = ("billing", "support", "sales", "retention", "technical-support", "claims")
DISPOSITIONS = (("RESOLVED", 0.62), ("ABANDONED", 0.08), ("ESCALATED", 0.18), ("TRANSFERRED", 0.12))
DAY = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)


def generate_contacts(
    count: int,
    *,
    seed: int = 7,
    first: int = 0,
    callers: int | None = None,
    extra_bytes: int = 0,
) -> Iterator[dict[str, Any]]:
    """`count` valid contacts as a contact center exports them (~250 bytes of JSON each).

    Callers repeat (one caller per ~3 contacts unless `callers` says), so several contacts race for
    one LAST_AGENT item; ~8% abandoned, ~5% waited past 600 s, ~half of the resolved opted in to
    a survey with an email. `extra_bytes` adds about that many bytes of fields the contract does
    not know and the ingest ignores, as real exports carry them (contact attributes, recording
    location, a call summary: an Amazon Connect contact record is several KB), for figures that
    need fewer, larger rows.
    """
    rng = random.Random(seed + first)
    callers = callers or max(1, count // 3)
    names, weights = zip(*DISPOSITIONS, strict=True)
    for index in range(first, first + count):
        disposition = rng.choices(names, weights)[0]
        caller = f"+1202{rng.randrange(callers) + 5_550_000:07d}"
        started = DAY + timedelta(
            seconds=rng.randrange(14 * 3600), milliseconds=rng.randrange(1000)
        )
        wait = int(rng.expovariate(1 / 120)) if rng.random() > 0.05 else rng.randrange(600, 1800)
        ended = started + timedelta(seconds=wait + rng.randrange(30, 1500))
        updated = ended + timedelta(seconds=rng.randrange(20, 120))  # the export's own version
        contact: dict[str, Any] = {
            "contact_id": f"c-20261129-{index:07d}",
            "caller": caller,
            "queue": rng.choice(QUEUES),
            "started_at": started.isoformat().replace("+00:00", "Z"),
            "ended_at": ended.isoformat().replace("+00:00", "Z"),
            "updated_at": updated.isoformat().replace("+00:00", "Z"),
            "disposition": disposition,
            "wait_seconds": wait,
        }
        if disposition != "ABANDONED":
            contact["agent_id"] = f"agent-{rng.randrange(400):03d}"
        if rng.random() < 0.55:
            contact["email"] = f"caller.{index}@example.com"
            contact["survey_opt_in"] = rng.random() < 0.6
        if extra_bytes:
            contact.update(_export_fields(rng, index, extra_bytes))
        yield contact


SUMMARY_TEXT = (
    "caller asked about the invoice agent explained the charge and offered a refund for the late "
    "delivery customer confirmed the address and agreed to a callback next week order number was "
    "verified payment method updated escalation not needed"
)
WORDS = tuple(SUMMARY_TEXT.split())


def _export_fields(rng: random.Random, index: int, size: int) -> dict[str, Any]:
    """Fields an export carries beyond the contract (ignored by the ingest), ~`size` bytes."""
    fields: dict[str, Any] = {
        "channel": "VOICE",
        "initiation_method": rng.choice(("INBOUND", "CALLBACK", "TRANSFER")),
        "attributes": {
            "customer_tier": rng.choice(("gold", "silver", "bronze")),
            "language": rng.choice(("en-US", "es-US", "fr-CA")),
            "ivr_path": "/".join(rng.choices(("main", "billing", "orders", "agent"), k=4)),
        },
        "recording": f"s3://connect-recordings/2026/11/29/c-20261129-{index:07d}.wav",
    }
    summary: list[str] = []
    length = 220  # what the fields above take, roughly
    while length < size:
        word = rng.choice(WORDS)
        summary.append(word)
        length += len(word) + 1
    fields["summary"] = " ".join(summary)
    return fields


def jsonl_lines(contacts: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for contact in contacts:
        yield json.dumps(contact, separators=(",", ":")).encode() + b"\n"


# ---- Amazon Connect's contact records, as Firehose writes them -----------------------------------

# Connect's records start here: ~30 s apart (harness.connect_records.records), so P4's ~47,000
# interactions span ~16 days, all ended before any run of the bench and within what the table
# remembers (shared.model refuses contacts ended more than 399 days before the ingest).
RECORDS_START = datetime(2026, 10, 1, 7, 0, tzinfo=UTC)
_INTERACTIONS_PER_CHUNK = 500
MAX_CALLERS = 20_000
FIREHOSE_STREAM = connect_records.SAMPLE_STREAM  # template.yaml: ${AWS::StackName}-contact-records


def contact_records(
    count: int,
    *,
    seed: int = 7,
    callers: list[str] | None = None,
    start: datetime = RECORDS_START,
) -> Iterator[dict[str, Any]]:
    """`count` contact records (one per leg, ~3.5 KB of JSON each, every field present) as
    Amazon Connect streams them (harness.connect_records: its mix of handled, abandoned,
    transferred, callback, outbound calls, chats and tasks), generated in chunks (never all in
    memory) from one pool of callers (`callers`, or count/5 drawn from the seed, at most
    MAX_CALLERS), so callers call again and several contacts race for one LAST_AGENT item. The
    last interaction may be cut short to make `count`: its earlier legs are records all the
    same."""
    rng = random.Random(seed)
    drawn = min(MAX_CALLERS, max(1, count // 5))
    pool = callers or [connect_records.new_caller(rng) for _ in range(drawn)]
    at, left = start, count
    while left > 0:
        chunk = connect_records.records(rng, _INTERACTIONS_PER_CHUNK, start=at, callers=pool)
        yield from chunk[:left]
        left -= len(chunk[:left])
        at += timedelta(seconds=30 * _INTERACTIONS_PER_CHUNK)


def firehose_lines(records: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    """Each record as Firehose writes it with template.yaml's AppendDelimiterToRecord: compact
    JSON and a newline (harness.connect_records.firehose_object, one record at a time)."""
    for record in records:
        yield connect_records.firehose_object([record], newline=True, gzip=False)


def firehose_object(records: Iterator[dict[str, Any]]) -> bytes:
    """An object as template.yaml's delivery stream writes it: records newline-delimited, GZIP."""
    return connect_records.firehose_object(records, newline=True, gzip=True)


def firehose_key(index: int, when: datetime = RECORDS_START) -> str:
    """A key under contact-records/ as Firehose names its objects (`.gz`), unique by `index`."""
    return connect_records.firehose_key(
        FIREHOSE_STREAM,
        when + timedelta(seconds=index),
        gzip=True,
        object_id=uuid.UUID(int=index + 1, version=4),
    )


def stored_contacts(
    records: list[dict[str, Any]], goodwill_wait_seconds: int
) -> list[dict[str, Any]]:
    """The CONTACT items (as Python values) the ingest stores of `records`, by the layer's own
    mapping (shared.model.parse_contact_record): what the consumers' rules read. Raises when a
    record would be rejected: the bench's records must all be good."""
    import_shared()
    from shared import model  # noqa: PLC0415 (the layer is on sys.path now)

    now = datetime.now(UTC)
    items = []
    for record in records:
        contact = model.parse_contact_record(
            record, ingested_at=now, survey_attributes=model.SurveyAttributes()
        )
        if isinstance(contact, list):
            raise ValueError(f"record {record.get('ContactId')} rejected: {contact}")
        items.append(contact.to_item(goodwill_wait_seconds))
    return items


def notifications_due(
    contacts: list[dict[str, Any]], goodwill_wait_seconds: int
) -> dict[tuple[str, str], int]:
    """(kind, interaction id) -> the index in `contacts` of the first contact that makes it due
    (shared.rules): surveys and gift cards are per interaction, whichever leg makes them due."""
    import_shared()
    from shared import keys, rules  # noqa: PLC0415 (the layer is on sys.path now)

    due: dict[tuple[str, str], int] = {}
    for index, contact in enumerate(contacts):
        interaction = keys.interaction_id(contact)
        if rules.survey_due(contact):
            due.setdefault((keys.SURVEY, interaction), index)
        if rules.gift_card_due(contact, goodwill_wait_seconds):
            due.setdefault((keys.GIFT_CARD, interaction), index)
    return due


# ---- events as AWS sends them --------------------------------------------------------------------


def s3_notification(bucket: str, key: str, size: int, etag: str, version_id: str | None) -> dict:
    """The S3 event notification body AWS puts on the queue, now."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return events.s3_notification(
        bucket, key, size=size, etag=etag, version_id=version_id, event_time=now
    )


def sqs_event(bodies: list[str], queue: str) -> dict:
    """An SQS event as the Lambda ESM delivers it."""
    messages = [{"MessageId": str(uuid.uuid4()), "Body": body} for body in bodies]
    return events.sqs_event(messages, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")


# ---- DynamoDB request counter --------------------------------------------------------------------


@dataclass
class Call:
    operation: str
    tables: tuple[str, ...]
    items: int  # items a BatchWriteItem or TransactWriteItems carries; 1 for a single-item call

    @property
    def write(self) -> bool:
        return self.operation in WRITE_OPERATIONS


@dataclass
class RequestCounter:
    calls: list[Call] = field(default_factory=list)

    def _before_call(self, model, params, **_kwargs) -> None:
        try:
            body = json.loads(params.get("body") or b"{}")
        except ValueError:
            body = {}
        if "RequestItems" in body:
            tables = tuple(body["RequestItems"])
            items = sum(len(requests) for requests in body["RequestItems"].values())
        elif "TransactItems" in body:
            tables = tuple(
                {next(iter(item.values())).get("TableName", "") for item in body["TransactItems"]}
            )
            items = len(body["TransactItems"])
        else:
            tables, items = (body.get("TableName", ""),), 1
        self.calls.append(Call(model.name, tables, items))

    def reset(self) -> list[Call]:
        calls, self.calls = self.calls, []
        return calls

    @contextmanager
    def installed(self) -> Iterator["RequestCounter"]:
        original = botocore.session.Session.create_client
        counter = self

        def create_client(session, service_name, *args, **kwargs):
            client = original(session, service_name, *args, **kwargs)
            client.meta.events.register("before-call.dynamodb", counter._before_call)
            return client

        botocore.session.Session.create_client = create_client
        try:
            yield self
        finally:
            botocore.session.Session.create_client = original


def by_operation(calls: list[Call], table: str | None = None) -> Counter:
    return Counter(c.operation for c in calls if table is None or table in c.tables)


def breakdown(counts: Counter) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common()) or "none"


# ---- a handler, cold, in a Lambda-like environment -----------------------------------------------


@contextmanager
def lambda_environment(logical_id: str, overrides: dict[str, str]) -> Iterator[None]:
    """os.environ as the function sees it on Lambda (bench.common.function_env, then `overrides`:
    the real resource names), restored afterwards."""
    saved = dict(os.environ)
    env = function_env(logical_id)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ.update(env)
    os.environ.update(overrides)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_handler(logical_id: str) -> ModuleType:
    """functions/<dir>/app.py imported as a fresh module (a cold start); call inside the function's
    environment and the mock, so its module-level clients see both."""
    import_shared()
    return in_process.load_handler(FUNCTIONS[logical_id])


def count_items(dynamodb, table: str, item_type: str) -> int:
    """Items of one `type` in a table (every page of the scan)."""
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table,
        Select="COUNT",
        FilterExpression="#t = :type",
        ExpressionAttributeNames={"#t": "type"},
        ExpressionAttributeValues={":type": {"S": item_type}},
    )
    return sum(page["Count"] for page in pages)


@contextmanager
def quiet() -> Iterator[None]:
    """Handlers print EMF metrics and JSON logs to stdout; `make bench` prints one table."""
    with open(os.devnull, "w") as devnull, redirect_stdout(devnull):
        yield


def event_sample(name: str) -> dict:
    return json.loads((ROOT / "events" / name).read_text())
