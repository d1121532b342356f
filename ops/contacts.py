"""`ops contact redrive`: a contact's current state sent to the consumers again, as the stream
would deliver its change, without writing it (its version stays what it is).

Since a contact's version is the record's own (LastUpdateTimestamp, updated_at), re-uploading
an old export changes nothing; this is how a change the consumers never got (a stream batch past
its 24 hours, a delivery DLQ that refused it) reaches them. The CONTACT item is read as stored
and shaped as the INSERT of its interaction's first copy, whichever copy it is: the lost change
may be the first copy's, which a correction has replaced since, so what the stored copy makes
due (a survey, a gift card) may still start, under the interaction's ids, which the consumers
and the notifier dedupe (one already issued or published is not again). A contact past its
`expires_at` is refused, as if DynamoDB's TTL, which deletes within days of it, had: the
notifier's and the mail sender's records of it may have expired too; so is one that ended more
than 399 days ago, past what the table remembers, as the ingest refuses its copies (its redrive
would start, after the retention, what a correction made due); and one whose notification
the notifier's record has expired is refused even with `--resend` (a correction that moved the
contact's end later keeps the contact past its first notification's 400 days).

What could reach the customer is said first. A notification the notifier recorded as published
is not published again; one it claimed and never recorded (the publish may have happened:
INPROGRESS) is refused unless `--resend`; one with no record is sent, after the operator says so.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from shared import keys, model, notifications, rules
from shared.formats import CONTACT_ID

from ops import records, replay, table
from ops.errors import Confirm, OpsError
from ops.stack import CONSUMERS, Stack, parse_arn
from ops.stream_filter import UnsupportedFilter

_deserializer = TypeDeserializer()
PUBLISHED, CLAIMED, UNSENT = "already published", "claimed, never recorded", "not yet sent"
FORGOTTEN = "record expired"


def redrive(
    stack: Stack, contact_id: str, *, dry_run: bool, resend: bool, confirm: Confirm
) -> tuple[dict[str, Any], str, bool]:
    item = current_item(stack, contact_id)
    contact = plain(item)
    due = notifications_due(stack, contact)
    listing = describe(contact, due)
    claimed = [n for n, state in due.items() if state == CLAIMED]
    data: dict[str, Any] = {
        "contact_id": contact["contact_id"],
        "first_copy": contact.get("first_export") is True,
        "notifications": due,
        "dry_run": dry_run,
    }
    if dry_run:
        return data, f"dry run: nothing sent\n{listing}", True
    forgotten = [n for n, state in due.items() if state == FORGOTTEN]
    if forgotten:  # not even with --resend: the design allows no second e-mail
        raise OpsError(
            f"{listing}\nrefused: the notifier's record of {', '.join(forgotten)} has expired "
            "(its 400 days), so nothing would stop it reaching the customer again"
        )
    if claimed and not resend:
        raise OpsError(
            f"{listing}\nrefused: the notifier claimed {', '.join(claimed)} and never recorded "
            "it, so it may have been published; --resend sends it again"
        )
    to_send = [n for n, state in due.items() if state != PUBLISHED]
    if to_send and confirm is not None and not confirm(f"{listing}\nsend {', '.join(to_send)}"):
        raise OpsError("not confirmed: nothing sent")
    if claimed:  # --resend: released, or the notifier would refuse them (shared.aws.batch_claims)
        layer = records.persistence(stack, records.CLAIMS["NotifierFunction"])
        records.release(layer, [{"notification_id": n} for n in claimed])
        data["released"] = claimed
    delivered = deliver(stack, stream_record(stack, item))
    data["readers"] = delivered
    ok = all(result["outcome"] in ("replayed", "not admitted") for result in delivered)
    rows = [(r["reader"], r["outcome"], r.get("detail", "")) for r in delivered]
    return data, f"{listing}\n{table.render(('READER', 'OUTCOME', 'DETAIL'), rows)}", ok


def current_item(stack: Stack, contact_id: str) -> dict[str, dict]:
    """The contact's CONTACT item as stored (typed), by its canonical id."""
    if not CONTACT_ID.fullmatch(contact_id):
        raise OpsError(f"{contact_id!r} is not a contact id (1-64 of A-Z, a-z, 0-9, _ and -)")
    canonical = model.canonical_id(contact_id)
    ref = stack.get_item(keys.contact_ref_key(canonical))
    item = ref and stack.get_item({"pk": ref["item_pk"]["S"], "sk": ref["item_sk"]["S"]})
    if not item:
        raise OpsError(f"no contact {canonical} in the table (never stored, or expired)")
    expires_at = item.get("expires_at")  # absent on an item stored before contacts expired
    expires = expires_at and datetime.fromtimestamp(int(expires_at["N"]), UTC)
    now = datetime.now(UTC)
    if expires and expires <= now:
        raise OpsError(
            f"contact {canonical} expired at {expires:%Y-%m-%dT%H:%M:%SZ} (its retention: "
            "DynamoDB's TTL deletes it); nothing sent"
        )
    ended = datetime.fromisoformat(item["ended_at"]["S"])
    if ended < now - model.REMEMBERED:  # as the ingest refuses a copy of it
        raise OpsError(
            f"contact {canonical} ended at {ended:%Y-%m-%dT%H:%M:%SZ}, more than "
            f"{model.REMEMBERED.days} days ago: past what the table remembers of a contact "
            "(the ingest refuses its copies too); nothing sent"
        )
    return item


def plain(item: dict[str, dict]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def notifications_due(stack: Stack, contact: dict[str, Any]) -> dict[str, str]:
    """The notifications a redrive could send (the stored copy's, by the rules) and what the
    notifier's records say of each."""
    due = []
    if rules.survey_due(contact):
        due.append(notifications.survey(contact)["notification_id"])
    if rules.gift_card_due(contact, stack.goodwill_wait_seconds):
        due.append(keys.notification_id(keys.GIFT_CARD, keys.interaction_id(contact)))
    layer = records.persistence(stack, records.CLAIMS["NotifierFunction"])
    states = {}
    for notification_id in due:
        record = records.lookup(layer, {"notification_id": notification_id})
        status = record.status if record is not None else None
        states[notification_id] = {
            None: UNSENT,
            records.COMPLETED: PUBLISHED,
            records.EXPIRED: FORGOTTEN,
        }.get(status, CLAIMED)
    return states


def describe(contact: dict[str, Any], due: dict[str, str]) -> str:
    """What the redrive means, in ids and outcomes (never the caller or the e-mail)."""
    copy = (
        "its first copy"
        if contact.get("first_export") is True
        else "a later copy, sent as the first"
    )
    lines = [
        f"contact {contact['contact_id']} (interaction {keys.interaction_id(contact)}, "
        f"version {contact.get('updated_at', 'before versions')}, {copy})"
    ]
    if due:
        lines.append(table.render(("NOTIFICATION", "NOTIFIER'S RECORD"), list(due.items())))
    else:
        lines.append("no survey or gift card can follow: only the last agent is checked")
    return "\n".join(lines)


def stream_record(stack: Stack, item: dict[str, dict]) -> dict:
    """The item's change as the stream gives its interaction's first copy (an INSERT, marked
    first_export), shaped as Lambda delivers it."""
    stream_arn = stack.dynamodb.describe_table(TableName=stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": datetime.now(UTC),
        "Keys": {"pk": item["pk"], "sk": item["sk"]},
        "NewImage": item | {"first_export": {"BOOL": True}},
        "SequenceNumber": "0",
        "SizeBytes": len(str(item)),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    raw = {
        "eventID": uuid.uuid4().hex,
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": parse_arn(stream_arn)["region"],
        "dynamodb": change,
    }
    return replay.lambda_record(raw, stream_arn)


def deliver(stack: Stack, record: dict) -> list[dict[str, Any]]:
    """The change to each stream reader of the stack's fan-out mode that admits it."""
    stream_arn = record["eventSourceARN"]
    pipes = stack.resources("AWS::Pipes::Pipe")
    if pipes:
        readers = [(logical_id, name, name) for logical_id, name in pipes.items()]
    else:
        functions = stack.functions()
        reader = stack.fan_out_mode.stream_reader  # RouterFunction, or the consumers themselves
        names = (reader,) if reader == "RouterFunction" else CONSUMERS
        readers = [(logical_id, None, functions[logical_id]) for logical_id in names]
    results = []
    for logical_id, pipe, name in readers:
        result: dict[str, Any] = {"reader": logical_id}
        try:
            reader = replay.reader_of(stack, pipe, name, stream_arn)
        except (replay.NoReader, UnsupportedFilter) as error:
            results.append(result | {"outcome": "failed", "detail": str(error)})
            continue
        if not reader.filter.admits(record):
            results.append(result | {"outcome": "not admitted"})
        elif pipe:
            results.append(result | replay.deliver_as_the_pipe(stack, pipe, [record]))
        else:
            payloads = replay.chunks([record], reader.batch_size)
            results.append(result | replay.invoke_chunks(stack, name, payloads))
    return results
