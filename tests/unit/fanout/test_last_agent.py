"""LastAgentFunction: the caller's last agent is the newest of the caller's contacts that reached
an agent: it moves forward whatever the delivery order, and a corrected export that replaces or
removes the contact it names makes it the newest remaining one."""

import itertools
import logging
from datetime import UTC, datetime

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from shared import keys, model, rules
from shared.aws import table

from emulator.delivery.stream_poller import lambda_record as stream_lambda_record
from harness.events import contact, failed_ids, stream_event, stream_record
from harness.in_process import client, cold_start

serializer = TypeSerializer()
deserializer = TypeDeserializer()
CALLER = "+14155550101"
EARLY = contact("c-early", CALLER, "2026-11-29T09:00:00Z", agent_id="agent-early")
MIDDLE = contact("c-middle", CALLER, "2026-11-29T10:00:00Z", agent_id="agent-middle")
# Same instant as MIDDLE, written with another offset: ties go to the higher contact_id.
TIE = contact("c-tie", CALLER, "2026-11-29T12:00:00+02:00", agent_id="agent-tie")
LATE = contact("c-late", CALLER, "2026-11-29T11:00:00Z", agent_id="agent-late")


@pytest.fixture
def last_agent(stack, monkeypatch):
    return cold_start("last_agent", monkeypatch)


def stored_last_agent(stack, caller=CALLER):
    item = stack.dynamodb.get_item(
        TableName=stack.contacts_table,
        Key={name: {"S": value} for name, value in keys.last_agent_key(caller).items()},
    ).get("Item")
    return item and {name: deserializer.deserialize(value) for name, value in item.items()}


def run(stack, handler, lambda_context, *contacts):
    """The contacts stored as the ingest leaves them, then their INSERTs delivered in this order
    in one batch."""
    store(stack, *contacts)
    deliver(handler, lambda_context, *(stream_record(c) for c in contacts))


def deliver(handler, lambda_context, *records):
    assert failed_ids(handler.lambda_handler(stream_event(*records), lambda_context)) == []


def test_in_order_contacts_leave_the_latest_agent(stack, last_agent, lambda_context):
    run(stack, last_agent, lambda_context, EARLY, MIDDLE, LATE)

    assert stored_last_agent(stack) == {
        "pk": f"LAST_AGENT#{CALLER}",  # a partition the ingest cannot write
        "sk": "LAST_AGENT",
        "type": "LAST_AGENT",
        "agent_id": "agent-late",
        "contact_id": "c-late",
        "ended_at": "2026-11-29T11:00:00.000Z",
        "expires_at": LATE["expires_at"],  # keyed by the caller: it goes with its contact
    }


def test_an_older_contact_arriving_later_is_stale_and_succeeds(stack, last_agent, lambda_context):
    run(stack, last_agent, lambda_context, LATE)
    # a separate invocation: stale is success, not a failure
    run(stack, last_agent, lambda_context, EARLY)

    assert stored_last_agent(stack)["agent_id"] == "agent-late"


def test_a_tie_on_ended_at_goes_to_the_higher_contact_id(stack, last_agent, lambda_context):
    assert TIE["ended_at"] == MIDDLE["ended_at"]
    run(stack, last_agent, lambda_context, TIE, MIDDLE)
    assert stored_last_agent(stack)["contact_id"] == "c-tie"


def test_duplicates_change_nothing(stack, last_agent, lambda_context):
    run(stack, last_agent, lambda_context, LATE, LATE, EARLY, LATE)
    assert stored_last_agent(stack)["contact_id"] == "c-late"


@pytest.mark.parametrize("order", list(itertools.permutations([EARLY, MIDDLE, TIE, LATE])))
def test_every_delivery_order_converges_on_the_rules_newest(
    stack, last_agent, lambda_context, order
):
    run(stack, last_agent, lambda_context, *order)

    newest = max(order, key=lambda c: (c["ended_at"], c["contact_id"]))
    assert all(
        not rules.is_newer(
            (c["ended_at"], c["contact_id"]), (newest["ended_at"], newest["contact_id"])
        )
        for c in order
    )
    assert stored_last_agent(stack)["contact_id"] == newest["contact_id"]


def test_stale_and_updated_outcomes_are_counted(stack, last_agent, lambda_context, capsys, caplog):
    caplog.set_level(logging.INFO)
    run(stack, last_agent, lambda_context, LATE, EARLY)

    out = capsys.readouterr().out
    assert '"LastAgentUpdated":[1.0]' in out.replace(" ", "")
    assert '"LastAgentStale":[1.0]' in out.replace(" ", "")
    # at INFO the write (the trace checker's transition, naming the contact), not the stale
    # record (DEBUG), then the invocation's counts
    lines = [r for r in caplog.records if r.name.startswith("last_agent")]
    assert [(r.levelname, r.getMessage()) for r in lines] == [
        ("INFO", "last agent checked"),
        ("INFO", "last agents checked"),
    ]
    assert (lines[0].contact_id, lines[0].outcome) == (LATE["contact_id"], "updated")
    assert lines[0].transition == "last_agent_set"
    assert (lines[1].updated, lines[1].stale) == (1, 1)
    assert CALLER not in out + caplog.text


@pytest.mark.parametrize(
    "record",
    [
        stream_record(contact("c-abandoned", disposition=rules.ABANDONED, agent_id=None)),
        stream_record(contact("c-abandoned-agent", disposition=rules.ABANDONED)),
        stream_record(contact("c-no-agent", agent_id=None)),
        stream_record(contact("c-removed"), event_name="REMOVE", old_image=contact("c-removed")),
        stream_record(
            {
                **keys.last_agent_key(CALLER),
                "type": "LAST_AGENT",
                "agent_id": "a",
                "contact_id": "c",
            }
        ),
    ],
    ids=["abandoned", "abandoned-with-agent", "no-agent", "remove-of-another", "last-agent-item"],
)
def test_records_that_set_no_last_agent_are_skipped(stack, last_agent, lambda_context, record):
    assert failed_ids(last_agent.lambda_handler(stream_event(record), lambda_context)) == []
    assert stored_last_agent(stack) is None


# ---- corrections: a newer export of a contact replaced or removed the item LAST_AGENT names ----


def store(stack, *items: dict) -> None:
    """CONTACT items as the ingest leaves them in the table."""
    for item in items:
        stack.dynamodb.put_item(
            TableName=stack.contacts_table,
            Item={name: serializer.serialize(value) for name, value in item.items()},
        )


def remove(stack, item: dict) -> None:
    stack.dynamodb.delete_item(
        TableName=stack.contacts_table, Key={"pk": {"S": item["pk"]}, "sk": {"S": item["sk"]}}
    )


def test_a_correction_that_moves_the_last_contact_earlier_falls_back_to_the_newest_one(
    stack, last_agent, lambda_context
):
    store(stack, EARLY, MIDDLE, LATE)
    run(stack, last_agent, lambda_context, EARLY, MIDDLE, LATE)
    moved = contact("c-late", CALLER, "2026-11-29T08:00:00Z", agent_id="agent-late")
    remove(stack, LATE)
    store(stack, moved)  # the ingest's transaction: the old item out, the corrected one in

    removal = stream_record(LATE, event_name="REMOVE", old_image=LATE)
    for records in ([removal, stream_record(moved)], [stream_record(moved), removal]):
        handler_response = last_agent.lambda_handler(stream_event(*records), lambda_context)
        assert failed_ids(handler_response) == []
        assert stored_last_agent(stack)["contact_id"] == "c-middle"


def test_a_correction_of_the_last_contacts_agent_updates_it(stack, last_agent, lambda_context):
    store(stack, LATE)
    run(stack, last_agent, lambda_context, LATE)
    fixed = LATE | {"agent_id": "agent-fixed"}
    store(stack, fixed)
    record = stream_record(fixed, event_name="MODIFY", old_image=LATE)
    assert failed_ids(last_agent.lambda_handler(stream_event(record), lambda_context)) == []
    assert stored_last_agent(stack)["agent_id"] == "agent-fixed"


def test_a_correction_to_abandoned_falls_back_and_a_last_removal_removes_it(
    stack, last_agent, lambda_context, capsys
):
    store(stack, EARLY, LATE)
    run(stack, last_agent, lambda_context, EARLY, LATE)
    abandoned = LATE | {"disposition": rules.ABANDONED}
    store(stack, abandoned)
    modify = stream_record(abandoned, event_name="MODIFY", old_image=LATE)
    assert failed_ids(last_agent.lambda_handler(stream_event(modify), lambda_context)) == []
    assert stored_last_agent(stack)["contact_id"] == "c-early"

    remove(stack, EARLY)
    removal = stream_record(EARLY, event_name="REMOVE", old_image=EARLY)
    assert failed_ids(last_agent.lambda_handler(stream_event(removal), lambda_context)) == []
    assert stored_last_agent(stack) is None
    assert '"LastAgentCorrected":[1.0]' in capsys.readouterr().out.replace(" ", "")


def test_a_correction_of_a_contact_that_is_not_the_last_changes_nothing(
    stack, last_agent, lambda_context
):
    store(stack, EARLY, LATE)
    run(stack, last_agent, lambda_context, EARLY, LATE)
    remove(stack, EARLY)
    removal = stream_record(EARLY, event_name="REMOVE", old_image=EARLY)
    assert failed_ids(last_agent.lambda_handler(stream_event(removal), lambda_context)) == []
    assert stored_last_agent(stack)["contact_id"] == "c-late"


# ---- any delivery order: a late redelivery (SQS retry, DLQ redrive, stream replay) of an export
# ---- that a correction has replaced must not undo the correction (issue 20, item 1)


class Exports:
    """Exports stored by the ingest's own writer (table.write_contacts: CONTACT_REF, CONTACT, the
    moved item's delete in one transaction), and the stream records each export made."""

    def __init__(self, stack):
        self.stack = stack
        self.streams = client("dynamodbstreams")
        self.stream_arn = stack.dynamodb.describe_table(TableName=stack.contacts_table)["Table"][
            "LatestStreamArn"
        ]
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        self.iterators = [
            self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
            for shard in shards
        ]
        self.versions = itertools.count(1)

    def export(self, *items: dict) -> list[dict]:
        """One export file of these CONTACT items, each copy newer than any exported before (its
        updated_at); its CONTACT records (INSERT, MODIFY, REMOVE)."""
        updated_at = f"2026-11-29T12:00:{next(self.versions):02d}.000Z"
        writes = []
        for line, item in enumerate(items, start=1):
            copy = {**item, "updated_at": updated_at}
            writes.append(table.ContactWrite(copy, keys.contact_version(copy), line))
        result = table.write_contacts(self.stack.dynamodb, self.stack.contacts_table, writes)
        assert len(result.applied) == len(items)
        return self.changes()

    def delete(self, item: dict) -> list[dict]:
        """A CONTACT item deleted outside the ingest (a TTL expiry or an operator): its REMOVE."""
        remove(self.stack, item)
        return self.changes()

    def changes(self) -> list[dict]:
        raw_records = []
        for index, iterator in enumerate(self.iterators):
            page = self.streams.get_records(ShardIterator=iterator)
            self.iterators[index] = page["NextShardIterator"]
            raw_records += page["Records"]
        return [
            stream_lambda_record(raw, self.stream_arn, "us-east-1")
            for raw in sorted(raw_records, key=lambda raw: int(raw["dynamodb"]["SequenceNumber"]))
            if raw["dynamodb"].get("NewImage", raw["dynamodb"].get("OldImage", {}))["type"]["S"]
            == keys.CONTACT
        ]


def exported(contact_id: str, ended_at: str, agent_id: str | None, **fields) -> dict:
    """The CONTACT item the ingest makes of an export's row (shared.model)."""
    row = {
        "contact_id": contact_id,
        "caller": CALLER,
        "started_at": "2026-11-29T08:00:00Z",
        "ended_at": ended_at,
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": rules.RESOLVED,
        "wait_seconds": 30,
        **({"agent_id": agent_id} if agent_id else {}),
        **fields,
    }
    contact = model.parse_contact(row, text_values=False, ingested_at=INGESTED_AT)
    assert isinstance(contact, model.Contact), contact
    return contact.to_item(rules.DEFAULT_GOODWILL_WAIT_SECONDS)


INGESTED_AT = datetime(2026, 11, 30, tzinfo=UTC)
C0 = exported("c-0", "2026-11-29T09:00:00Z", "agent-0")
C1 = exported("c-1", "2026-11-29T10:00:00Z", "agent-A")
C1_LATE = exported("c-1", "2026-11-29T11:00:00Z", "agent-A")
C2 = exported("c-2", "2026-11-29T10:30:00Z", "agent-2")
CORRECTIONS = {
    # name: (the first export, the correction of c-1, the last agent once both are applied)
    "agent changed": (
        [C0, C1],
        exported("c-1", "2026-11-29T10:00:00Z", "agent-B"),
        ("c-1", "agent-B"),
    ),
    "abandoned": (
        [C0, C1],
        exported("c-1", "2026-11-29T10:00:00Z", "agent-A", disposition=rules.ABANDONED),
        ("c-0", "agent-0"),
    ),
    "agent removed": (
        [C0, C1],
        exported("c-1", "2026-11-29T10:00:00Z", None, disposition=rules.ABANDONED),
        ("c-0", "agent-0"),
    ),
    "ended_at moved behind c-2": (
        [C1_LATE, C2],
        exported("c-1", "2026-11-29T09:30:00Z", "agent-A"),
        ("c-2", "agent-2"),
    ),
    "ended_at moved later, agent changed": (
        [C1, C2],
        exported("c-1", "2026-11-29T11:00:00Z", "agent-B"),
        ("c-1", "agent-B"),
    ),
}


def delivery_orders(first: list[dict], second: list[dict]):
    """Every order of the two exports' records (a record is delivered only once its write is
    done: the correction is written just before its first record is delivered), each followed by
    a late redelivery of the first export's records."""
    records = first + second
    for order in itertools.permutations(range(len(records))):
        yield [records[i] for i in order] + first, order


def reset(stack, exports: Exports, first_items: list[dict]) -> None:
    """The table as it was before the correction: only the first export, no LAST_AGENT."""
    for page in stack.dynamodb.get_paginator("scan").paginate(TableName=stack.contacts_table):
        for item in page["Items"]:
            stack.dynamodb.delete_item(
                TableName=stack.contacts_table, Key={"pk": item["pk"], "sk": item["sk"]}
            )
    exports.versions = itertools.count(1)
    exports.export(*first_items)


@pytest.mark.parametrize("correction", sorted(CORRECTIONS))
def test_the_last_agent_is_right_in_every_delivery_order_of_an_export_and_its_correction(
    stack, last_agent, lambda_context, correction
):
    first_items, corrected, expected = CORRECTIONS[correction]
    exports = Exports(stack)
    first = exports.export(*first_items)
    second = exports.export(corrected)
    wrong = []
    for deliveries, order in delivery_orders(first, second):
        reset(stack, exports, first_items)
        corrected_yet = False
        for delivered, record in enumerate(deliveries, start=1):
            if record in second and not corrected_yet:
                exports.export(corrected)  # the same write again: the same table state
                corrected_yet = True
            deliver(last_agent, lambda_context, record)
            if delivered in (len(order), len(deliveries)):
                stored = stored_last_agent(stack)
                found = stored and (stored["contact_id"], stored["agent_id"])
                if found != expected:
                    late = "after the late redelivery" if delivered > len(order) else "in order"
                    wrong.append((order, late, found))
    # an order names the records: the first export's, then the correction's
    assert not wrong, wrong


def test_a_contact_deleted_outside_the_ingest_takes_its_last_agent_along(
    stack, last_agent, lambda_context
):
    exports = Exports(stack)
    first = exports.export(C0, C1)
    removal = exports.delete(C1)  # a TTL expiry, say: a REMOVE record and nothing else
    for record in [*removal, *first]:  # the removal first, the export's records after it
        deliver(last_agent, lambda_context, record)
    assert stored_last_agent(stack)["contact_id"] == "c-0"
