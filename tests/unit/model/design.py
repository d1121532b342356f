"""The final state the design defines for a set of uploaded files, whatever the deliveries:
checked by the model-based tests once everything has been delivered.

- every file has a final outcome: applied, or STALE because a newer version of its key claimed
  it first (applied, or rejected as no contacts file: the key's newest upload is what it holds,
  and docs/operations.md's IngestFilesStaleAlarm says to upload again what only the older one
  held), and a stale file changes nothing; a file whose processing began after a newer
  version's did is STALE; a file once applied stays applied (a reprocess that finds a newer
  version ends it STALE, its rows stay as they were stored);
- one CONTACT item per contact_id, holding the newest copy of it among the applied files (by the
  record's own version: updated_at or Connect's LastUpdateTimestamp, never the file), its instant
  read here (offsets, Z) and not by the contract's ordering code; of copies of one instant, any;
- each caller's LAST_AGENT is the newest current CONTACT (ended_at, then contact_id) with an agent
  that is not ABANDONED, or there is none;
- a gift card and a notification per kind at most once per customer interaction (the legs of a
  transferred call are one): from the first copy of a leg stored (a re-delivery gets nothing
  new), so at least once for an interaction with a leg that every applied copy makes due, never
  for one that no copy does; counted at a FIFO subscriber by the model's clock (SNS deduplicates
  for 5 minutes only), and a second message only for one the operator sent again on purpose
  (`--resend`: docs/design.md's one way to it);
- the last hop: one e-mail in SES's inbox, tagged with its notification id and to its address,
  per notification that reached the topic with an address, whatever reached the mail sender
  twice (--resend included: the operator has no way to mail a notification again); none for one
  without an address, whose claim records it so; every notification's mail claim COMPLETED, none
  left in doubt;
- nothing left undelivered: no message in any queue or dead-letter queue, no batch in
  StreamFailureQueue (the operator has redriven and replayed what failed, or redriven the
  contacts of a batch past the stream's 24 hours).

Once the contacts' retention has passed (check_after_retention: the state above checked and
remembered when it began, then TTL's deletes, the old exports uploaded again, the operator's
commands, and TTL has deleted every expired item):

- every file has a final outcome as above (one uploaded since stores nothing: its contacts
  ended more than 399 days before the ingest);
- the CONTACT, CONTACT_REF and GIFT_CARD items are those the table held then, less the expired
  ones, unchanged; LAST_AGENT as above, over the CONTACT items left;
- no item holding a caller's number or an e-mail is past its expires_at (or lacks one);
- nothing the old exports hold produced an effect since: no message at the subscriber but one
  more per --resend release of a notification it had received, no e-mail.
"""

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from boto3.dynamodb.types import TypeDeserializer
from shared import idempotency, ingest, keys, mail, model, rules

from emulator.services import ses
from ops import records as ops_records
from tests.unit.model.pipeline import Pipeline

INGESTED_AT = datetime(2026, 11, 30, tzinfo=UTC)
_deserializer = TypeDeserializer()


def items_by_type(pipeline: Pipeline) -> dict[str, list[dict]]:
    stack = pipeline.stack
    found: dict[str, list[dict]] = {}
    for page in stack.dynamodb.get_paginator("scan").paginate(TableName=stack.contacts_table):
        for item in page["Items"]:
            plain = {name: _deserializer.deserialize(value) for name, value in item.items()}
            found.setdefault(plain["type"], []).append(plain)
    return found


def check_delivered(pipeline: Pipeline) -> None:
    assert pipeline.stream_caught_up()
    assert pipeline.stream_failures == []
    assert set(pipeline.quiet().values()) == {0}, pipeline.quiet()


def check_files(pipeline: Pipeline, items: dict[str, list[dict]]) -> list:
    """The uploads applied, once each file's final outcome is checked."""
    # Files: each applied, or stale behind a newer version of its key that claimed it (applied or
    # rejected), or (an object in which no record starts) not a contacts file.
    logs = {log["file_id"]: log for log in items.get(keys.PROCESSING_LOG, [])}
    applied, rejected = [], []
    for upload in pipeline.uploads:
        log = logs[upload.file_id]
        if log["outcome"] == ingest.REJECTED_FILE:
            assert not any(isinstance(r, dict) or r.startswith("{") for r in upload.rows), log
            rejected.append(upload)
            continue
        assert log["outcome"] in (ingest.PROCESSED, ingest.STALE), log
        # applied: PROCESSED now, or once (a reprocess that found a newer version ends STALE)
        if log["outcome"] == ingest.PROCESSED or upload.file_id in pipeline.applied_files:
            applied.append(upload)
    for file_id in pipeline.must_be_stale:
        assert logs[file_id]["outcome"] == ingest.STALE, f"{file_id} came late and was applied"
    for upload in pipeline.uploads:
        if logs[upload.file_id]["outcome"] == ingest.STALE:
            assert any(
                other.key == upload.key and other.sequencer > upload.sequencer
                for other in applied + rejected
            ), upload.file_id
    return applied


def check_final_state(pipeline: Pipeline) -> None:
    check_delivered(pipeline)
    items = items_by_type(pipeline)
    applied = check_files(pipeline, items)

    # Contacts: the newest copy of each contact among the applied files, by the instant its own
    # version names (read here, not by the contract's ordering code); of copies of one instant,
    # any one (the contract picks one by content, whatever the order they came in).
    versions: dict[str, list[tuple[datetime, dict]]] = {}
    for upload in applied:
        for row in upload.rows:
            if isinstance(row, dict):
                # a CSV export's values are this row's as text: the same contact
                contact = model.parse_contact(row, text_values=False, ingested_at=INGESTED_AT)
                if isinstance(contact, model.Contact):
                    version = datetime.fromisoformat(
                        row.get("updated_at") or row["LastUpdateTimestamp"]
                    )
                    versions.setdefault(contact.contact_id, []).append(
                        (version, contact.to_item(600))
                    )
    stored = items.get(keys.CONTACT, [])
    assert Counter(item["contact_id"] for item in stored) == Counter(versions.keys()), (
        sorted(item["contact_id"] for item in stored),
        sorted(versions),
    )
    current = {}
    for item in stored:
        first_export = item.pop("first_export")
        found = versions[item["contact_id"]]
        newest = max(version for version, _ in found)
        assert item in [copy for version, copy in found if version == newest], item
        current[item["contact_id"]] = item
        # Which export was stored first depends on the order of delivery; one alone was first.
        assert first_export or len(found) > 1

    check_last_agents(current.values(), items)

    # Gift cards and notifications: at most once per interaction, from whichever copy of a leg
    # was stored first; so exactly once when every applied copy of one of its legs is due, never
    # when no copy of any leg is.
    def due(rule_applies) -> tuple[set[str], set[str]]:
        every: set[str] = set()
        some: set[str] = set()
        for found in versions.values():
            interaction = keys.interaction_id(found[0][1])
            if all(rule_applies(item) for _, item in found):
                every.add(interaction)
            if any(rule_applies(item) for _, item in found):
                some.add(interaction)
        return every, some

    cards_every, cards_some = due(lambda item: rules.gift_card_due(item, 600))
    surveys_every, surveys_some = due(rules.survey_due)
    cards = Counter(item["contact_id"] for item in items.get(keys.GIFT_CARD, []))
    assert all(count == 1 for count in cards.values())
    assert cards_every <= set(cards) <= cards_some, (cards_every, set(cards), cards_some)
    # Once each, or once more for each time the operator sent it again on purpose (--resend):
    # the design's one way to a second message (docs/design.md's guarantee table).
    published = pipeline.received_by_subscriber()
    resent = {sent: pipeline.resent[pipeline.subscriber.ids[sent]] for sent in published}
    assert all(count <= 1 + resent[sent] for sent, count in published.items()), (
        published,
        pipeline.resent,
    )
    sent = {kind: {c for k, c in published if k == kind} for kind in keys.NOTIFICATION_KINDS}
    assert sent[keys.GIFT_CARD] == set(cards)
    assert surveys_every <= sent[keys.SURVEY] <= surveys_some
    check_mail(pipeline)


def check_last_agents(current, items: dict[str, list[dict]]) -> None:
    """Each caller's LAST_AGENT names the newest of the current CONTACT items that reached an
    agent, and its agent; none when there is none."""
    expected_agents = {}
    for item in current:
        if rules.sets_last_agent(item):
            newest = expected_agents.get(item["caller"])
            if newest is None or (item["ended_at"], item["contact_id"]) > newest[:2]:
                expected_agents[item["caller"]] = (
                    item["ended_at"],
                    item["contact_id"],
                    item["agent_id"],
                )
    last_agents = {
        item["pk"].removeprefix("LAST_AGENT#"): (
            item["ended_at"],
            item["contact_id"],
            item["agent_id"],
        )
        for item in items.get(keys.LAST_AGENT, [])
    }
    assert last_agents == expected_agents


def check_mail(pipeline: Pipeline) -> None:
    """One e-mail per notification that reached the topic with an address (a notification that
    reached it again with --resend comes from another leg of its interaction, which may carry
    none: then at most one), none without; each claim of the mail sender completed."""
    reached = pipeline.subscriber.messages
    inbox = ses.inbox()
    mailed = Counter(mail.notification_id_of_tag(m["tags"][mail.NOTIFICATION_TAG]) for m in inbox)
    assert set(mailed) <= set(reached), mailed
    for message in inbox:
        notification_id = mail.notification_id_of_tag(message["tags"][mail.NOTIFICATION_TAG])
        assert message["to"] in ([body["email"]] for body in reached[notification_id]), message
    claims = ops_records.persistence(pipeline.ops_stack, idempotency.MAIL)
    for notification_id, bodies in reached.items():
        addressed = {bool(body.get("email")) for body in bodies}
        if addressed == {True}:
            assert mailed[notification_id] == 1, (notification_id, mailed[notification_id])
        else:
            assert mailed[notification_id] <= int(True in addressed), notification_id
        record = ops_records.lookup(claims, {"notification_id": notification_id})
        assert record is not None and record.status == ops_records.COMPLETED, notification_id
        if addressed == {False}:
            outcome = record.response_json_as_dict()["outcome"]
            assert outcome == mail.MailOutcome.NO_ADDRESS, (notification_id, outcome)


@dataclass(frozen=True)
class Remembered:
    """What the table held, the subscriber had received and SES had mailed when the contacts'
    retention began to pass (everything delivered, the final state checked)."""

    items: dict[str, list[dict]]
    received: Counter
    resent: Counter
    mailed: int

    @classmethod
    def of(cls, pipeline: Pipeline) -> "Remembered":
        return cls(
            items_by_type(pipeline),
            Counter(pipeline.received_by_subscriber()),
            Counter(pipeline.resent),
            len(ses.inbox()),
        )


def personal_data(pipeline: Pipeline) -> set[str]:
    """The callers' numbers and e-mails the uploads carried."""
    found = set()
    for upload in pipeline.uploads:
        for row in upload.rows:
            if isinstance(row, dict):
                endpoint = row.get("CustomerEndpoint") or {}
                attributes = row.get("Attributes") or {}
                found |= {row.get("caller"), row.get("email"), endpoint.get("Address")}
                found.add(attributes.get("email"))
    return found - {None, ""}


def check_after_retention(pipeline: Pipeline, remembered: Remembered) -> None:
    """The state once the contacts' retention has passed and TTL has deleted every expired item
    (this module's docstring)."""
    check_delivered(pipeline)
    items = items_by_type(pipeline)
    check_files(pipeline, items)
    now = int(pipeline.clock.time())

    def by_key(found: list[dict]) -> dict[tuple[str, str], dict]:
        return {(item["pk"], item["sk"]): item for item in found}

    for kind in (keys.CONTACT, keys.CONTACT_REF, keys.GIFT_CARD):
        left = [item for item in remembered.items.get(kind, []) if item["expires_at"] >= now]
        assert by_key(items.get(kind, [])) == by_key(left), kind
    check_last_agents(items.get(keys.CONTACT, []), items)
    personal = personal_data(pipeline)
    for item in (item for found in items.values() for item in found):
        if any(value in json.dumps(item, default=str) for value in personal):
            assert item.get("expires_at", 0) >= now, (item["type"], item["sk"])

    released = pipeline.resent - remembered.resent
    for sent, count in pipeline.received_by_subscriber().items():
        allowed = remembered.received[sent] + released[pipeline.subscriber.ids[sent]]
        assert remembered.received[sent] and count <= allowed, (sent, count, allowed)
    assert len(ses.inbox()) == remembered.mailed, (
        "e-mails since",
        len(ses.inbox()) - remembered.mailed,
    )
