"""Connect's contact records, as Connect and Firehose deliver them, through the ingest and the
consumers (in moto): hypothesis draws interactions of every kind, re-deliveries with newer,
older and equal LastUpdateTimestamp and exact duplicates, in any order, split across objects
with and without newlines, gzipped or not. Whatever it draws: every good record is stored once as
its newest copy, one survey and one gift card per interaction that is due one, each caller's last
agent is the agent of the newest ended voice leg with an agent, and every item holding a caller's
number or an e-mail expires."""

import gzip
import json
import os
import random
from collections import Counter
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import keys, model, rules

from harness import connect_records, events
from harness.in_process import FakeLambdaContext, cold_start
from tests.unit.ingest.support import Ingest
from tests.unit.support import moto_stack

EXAMPLES = int(os.environ.get("CONTACT_RECORD_EXAMPLES", "6"))
START = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
GOODWILL_WAIT_SECONDS = 600


@st.composite
def deliveries(draw) -> list[tuple[str, bytes]]:
    """Firehose objects (key, body) holding a few interactions' records, some delivered again."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    callers = [connect_records.new_caller(rng) for _ in range(2)]
    records = connect_records.records(rng, draw(st.integers(1, 6)), start=START, callers=callers)
    copies = []
    for record in records:
        for shift in draw(st.lists(st.sampled_from([-60, 0, 60, 3600]), max_size=2)):
            copies.append(connect_records.redelivered(record, seconds=shift))
    delivered = draw(st.permutations(records + copies))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(delivered) - 1)), max_size=3)))
    objects = []
    for n, (start, end) in enumerate(zip([0, *cuts], [*cuts, len(delivered)], strict=True)):
        gzipped = draw(st.booleans())
        body = connect_records.firehose_object(
            delivered[start:end], newline=draw(st.booleans()), gzip=gzipped
        )
        key = connect_records.firehose_key("contact-records", START, gzip=gzipped)
        objects.append((f"{key}-{n}", body))
    return objects


def expected(objects: list[tuple[str, bytes]]) -> tuple[dict, set, set, dict]:
    """What the design says the records come to, by the layer's own rules: each contact's newest
    copy, the interactions due a survey and a gift card, each caller's last agent."""
    newest: dict[str, tuple[str, dict]] = {}
    for record in (r for _, body in objects for r in parsed(body)):
        contact = model.parse_contact(record, text_values=False, ingested_at=datetime.now(UTC))
        item = contact.to_item(GOODWILL_WAIT_SECONDS)
        version = keys.contact_version(item)
        if item["contact_id"] not in newest or version > newest[item["contact_id"]][0]:
            newest[item["contact_id"]] = (version, item)
    items = {contact_id: item for contact_id, (_, item) in newest.items()}
    surveys = {keys.interaction_id(i) for i in items.values() if rules.survey_due(i)}
    cards = {
        keys.interaction_id(i)
        for i in items.values()
        if rules.gift_card_due(i, GOODWILL_WAIT_SECONDS)
    }
    last_agents: dict[str, tuple] = {}
    for item in items.values():
        if rules.sets_last_agent(item):
            candidate = (item["ended_at"], item["contact_id"], item["agent_id"])
            last_agents[item["caller"]] = max(last_agents.get(item["caller"], candidate), candidate)
    return items, surveys, cards, last_agents


def scan_every_type(stack) -> list[dict]:
    pages = stack.dynamodb.get_paginator("scan").paginate(TableName=stack.contacts_table)
    return [item for page in pages for item in page["Items"]]


def parsed(body: bytes) -> list[dict]:
    """The records of a Firehose object, read apart from the code under test."""
    text = (gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body).decode()
    decoder, found, position = json.JSONDecoder(), [], 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        record, position = decoder.raw_decode(text, position)
        found.append(record)
    return found


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(objects=deliveries())
def test_records_in_any_order_and_copy_are_stored_once_and_act_once_per_interaction(
    aws_env, monkeypatch, capsys, objects
):
    with moto_stack(monkeypatch) as stack:
        ingest = Ingest(stack, monkeypatch, capsys)
        for key, body in objects:
            assert ingest.run(ingest.put(key, body)) == []
        records = stack.stream_records()
        context = FakeLambdaContext()
        for consumer in ("last_agent", "survey", "goodwill"):
            handler = cold_start(consumer, monkeypatch)
            for start in range(0, len(records), 10):
                batch = {"Records": records[start : start + 10]}
                assert handler.lambda_handler(batch, context) == {"batchItemFailures": []}

        items, surveys, cards, last_agents = expected(objects)
        stored = {item["contact_id"]: item for item in ingest.items()}
        assert Counter(i["contact_id"] for i in ingest.items()) == Counter(items.keys())
        for contact_id, item in stored.items():
            item.pop("first_export")
            assert item == items[contact_id]
        assert {card["contact_id"] for card in ingest.items(keys.GIFT_CARD)} == cards
        queued = stack.drain(stack.notification_queue_url)  # one per leg that was due, at least
        notifier = cold_start("notifier", monkeypatch)
        arn = stack.sqs.get_queue_attributes(
            QueueUrl=stack.notification_queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        for start in range(0, len(queued), 10):
            batch = events.sqs_event(queued[start : start + 10], arn)
            assert notifier.lambda_handler(batch, context) == {"batchItemFailures": []}
        sent = Counter((n["kind"], n["contact_id"]) for n in stack.published())
        assert sent == Counter(
            [(keys.SURVEY, i) for i in surveys] + [(keys.GIFT_CARD, i) for i in cards]
        )
        stored_agents = {
            item["pk"].removeprefix("LAST_AGENT#"): (
                item["ended_at"],
                item["contact_id"],
                item["agent_id"],
            )
            for item in ingest.items(keys.LAST_AGENT)
        }
        assert stored_agents == last_agents
        # No personal data kept past its purpose: every item holding a caller's number or an
        # e-mail, whatever its type, expires with its contact (docs/template.md "Retention").
        personal = {i["caller"] for i in items.values() if "caller" in i} | {
            i["email"] for i in items.values() if "email" in i
        }
        for item in scan_every_type(stack):
            if any(value in json.dumps(item) for value in personal):
                assert "expires_at" in item, item["type"]
        capsys.readouterr()
