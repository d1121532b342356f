"""`ops idempotency show|purge`: a function's Powertools idempotency records, found by the key
Powertools itself computes (the persistence layer configured with the function's own claims,
shared.idempotency), so a purge removes exactly what the function would find.

IngestFunction claims each step of a run of a file ([file id, run, after_line]): the first step is
after line 0, each later one after the line its predecessor's stored result names (a file continued
over several invocations), so a file's records are found by following that chain, in the run its
processing log holds (a reprocess starts a new run: shared.ingest).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)
from shared import idempotency, ingest, keys, model
from shared.aws import batch_claims

from ops import file_ref, redrive, table
from ops.errors import Confirm, OpsError
from ops.stack import Stack

CLAIMS = {"IngestFunction": idempotency.FILE_STEPS, "NotifierFunction": idempotency.NOTIFICATIONS}
COMPLETED = STATUS_CONSTANTS["COMPLETED"]  # the record of a function that finished
INPROGRESS = STATUS_CONSTANTS["INPROGRESS"]  # claimed: running, or crashed before its record
EXPIRED = STATUS_CONSTANTS["EXPIRED"]  # past its expiry: Powertools claims the key afresh


class Purged(Exception):
    """The reason Powertools' delete_record is given: an operator's purge."""


def persistence(stack: Stack, claims: idempotency.Claims) -> DynamoDBPersistenceLayer:
    layer = DynamoDBPersistenceLayer(
        table_name=stack.outputs["IdempotencyTableName"], boto3_client=stack.dynamodb
    )
    layer.configure(claims.config(), key_prefix=claims.key_prefix)
    return layer


def lookup(layer: DynamoDBPersistenceLayer, data: dict) -> DataRecord | None:
    try:
        return layer.get_record(data)
    except IdempotencyItemNotFoundError:
        return None


def file_steps(
    layer: DynamoDBPersistenceLayer, file_id: str, run: int | None
) -> list[tuple[dict, DataRecord]]:
    """The step claims of one run of a file (None: the run its S3 event started), first step
    first: (the data the key is computed from, record)."""
    found: list[tuple[dict, DataRecord]] = []
    after_line: int | None = 0
    while after_line is not None:
        data = {"s3_object": {"file_id": file_id}, "run": run, "after_line": after_line}
        record = lookup(layer, data)
        if record is None:
            break
        found.append((data, record))
        result = record.response_json_as_dict() or {}
        following = result.get("next_line")
        continued = result.get("outcome") == ingest.IN_PROGRESS and following != after_line
        after_line = following if continued else None
    return found


def targets(
    stack: Stack, args: argparse.Namespace
) -> tuple[str, DynamoDBPersistenceLayer, list[tuple[dict, DataRecord | None]]]:
    """What the arguments name: a label, the function's persistence layer, its records."""
    function = args.function
    if function not in CLAIMS:
        if function in stack.functions():
            raise OpsError(
                f"{function} keeps no idempotency records (functions with records: "
                f"{', '.join(CLAIMS)})"
            )
        raise OpsError(f"unknown function {function!r}: {' | '.join(CLAIMS)}")
    layer = persistence(stack, CLAIMS[function])
    if function == "IngestFunction":
        if not args.file or args.notification_id or args.kind or args.contact_id:
            raise OpsError("IngestFunction records are named by a file: s3://bucket/key")
        file = file_ref.resolve(stack, args.file, args.version_id)
        # the run the processing log holds: a reprocessed file's claims are its latest run's
        log = stack.file_log(file.file_id)
        run = int(log["run"]["N"]) if log and "run" in log else None
        return file.file_id, layer, file_steps(layer, file.file_id, run)
    if args.file or args.version_id:
        raise OpsError(
            "NotifierFunction records are named by --notification-id or --kind and --contact-id"
        )
    notification_id = notification(args)
    data = {"notification_id": notification_id}
    return notification_id, layer, [(data, lookup(layer, data))]


def notification(args: argparse.Namespace) -> str:
    if args.notification_id and not (args.kind or args.contact_id):
        kind, _, contact_id = args.notification_id.partition("#")
    elif args.kind and args.contact_id and not args.notification_id:
        kind, contact_id = args.kind, args.contact_id
    else:
        raise OpsError("give --notification-id KIND#contact_id, or --kind and --contact-id")
    if not model.CONTACT_ID.fullmatch(contact_id):
        raise OpsError(f"{contact_id!r} is not a contact id (1-64 of A-Z a-z 0-9 _ -)")
    try:
        # the id the ingest stored, whatever the spelling given (a UUID in upper case)
        return keys.notification_id(kind, model.canonical_id(contact_id))
    except ValueError as error:
        raise OpsError(f"{error} (kinds: {' | '.join(keys.NOTIFICATION_KINDS)})") from None


def describe(record: DataRecord) -> dict[str, Any]:
    return {
        "key": record.idempotency_key,
        "status": record.status,
        "expires": table.utc(record.expiry_timestamp),
        "in_progress_until": table.utc(
            record.in_progress_expiry_timestamp / 1000
            if record.in_progress_expiry_timestamp
            else None
        ),
        "result": record.response_json_as_dict(),
    }


def show(stack: Stack, args: argparse.Namespace) -> tuple[Any, str, bool]:
    label, layer, found = targets(stack, args)
    described = [
        describe(record)
        | {"claimed": table.utc(record.expiry_timestamp - layer.expires_after_seconds)}
        for _, record in found
        if record is not None
    ]
    if not described:
        return {"target": label, "records": []}, f"{label}: no idempotency record", True
    lines = [f"{label}:"]
    for record in described:
        line = f"  {record['key']}  {record['status']}  expires {record['expires']}"
        if record["status"] == INPROGRESS:
            line += (
                f"  claimed {record['claimed']}, in progress until {record['in_progress_until']}"
            )
        lines.append(f"{line}\n    result: {record['result']}")
    return {"target": label, "records": described}, "\n".join(lines), True


def purge(stack: Stack, args: argparse.Namespace, confirm: Confirm) -> tuple[Any, str, bool]:
    """A purge makes the function's next delivery of the record's event run again. A
    notification's record never allows that without --resend, said before it asks: a COMPLETED
    one was published, and an INPROGRESS one, whatever its age, is a claim never recorded whose
    publish may have happened. The notifier itself publishes again under a claim only within
    270 s of it, inside SNS FIFO's 5-minute deduplication; purged, the claim is gone, and the
    message's next delivery (a backlog, a DLQ redrive an hour later) publishes it again whenever
    it comes: past those 5 minutes the customer gets it twice."""
    label, layer, found = targets(stack, args)
    present = [(data, record) for data, record in found if record is not None]
    if not present:
        return {"target": label, "purged": []}, f"{label}: no idempotency record", True
    notifier = args.function == "NotifierFunction"
    published = notifier and any(record.status == COMPLETED for _, record in present)
    claimed = [record for _, record in present if notifier and record.status == INPROGRESS]
    resend = published or bool(claimed)
    if resend and not args.resend:
        since = f" at {table.utc(claimed_at(claimed[0]))}" if claimed else ""
        raise OpsError(
            f"{label} was published, or may have been (its record is COMPLETED, or claimed"
            f"{since} and never recorded): purging it lets its next delivery publish it again, "
            "whenever that comes, past SNS's 5-minute deduplication. The notifier publishes a "
            "claim never recorded again by itself within 270 s of it; pass --resend to send it "
            "again on purpose"
        )
    question = f"delete {len(present)} idempotency record(s) of {label}"
    if published:
        question = (
            f"{label} was published: the customer gets it AGAIN on its next delivery; {question}"
        )
    elif claimed:
        question = (
            f"{label} may have been published: the customer may get it AGAIN on its next "
            f"delivery; {question}"
        )
    if confirm is not None and not confirm(question):
        raise OpsError("not confirmed: nothing deleted")
    release(layer, [data for data, _ in present])
    purged = [record.idempotency_key for _, record in present]
    text = f"{label}: {len(purged)} record(s) deleted; the next delivery runs again"
    if resend:
        text += " and publishes the notification to the customer again"
    return {"target": label, "purged": purged, "resend": resend}, text, True


def release(layer: DynamoDBPersistenceLayer, found: list[dict]) -> None:
    """Delete the records of these data (what their keys are computed from)."""
    for data in found:
        layer.delete_record(data, Purged())


NOTIFICATION_DLQ = "NotificationDeadLetterQueue"
LOOK_SECONDS = 30  # a message looked at is hidden this long, then made visible again at once


def dead_letter_notifications(stack: Stack) -> list[dict[str, Any]]:
    """Each message of NotificationDeadLetterQueue: its message id, its notification id and the
    notifier's record of it (COMPLETED: already published). Every message is received once and
    made visible again: nothing is moved. Never the caller or email the message holds."""
    url = stack.outputs[f"{NOTIFICATION_DLQ}Url"]
    layer = persistence(stack, CLAIMS["NotifierFunction"])
    found: dict[str, dict[str, Any]] = {}
    handles: list[str] = []
    while messages := stack.sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=LOOK_SECONDS,
        WaitTimeSeconds=0 if stack.is_local else 1,
    ).get("Messages", []):
        for message in messages:
            handles.append(message["ReceiptHandle"])
            found[message["MessageId"]] = {"message_id": message["MessageId"]} | publication(
                layer, message["Body"]
            )
    for handle in handles:
        stack.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    return list(found.values())


def publication(layer: DynamoDBPersistenceLayer, body: str) -> dict[str, Any]:
    """A notification message's id and what the notifier's record says of it: published
    (COMPLETED), or claimed and never recorded (INPROGRESS: a publish may have happened after
    `claimed_at`), or nothing."""
    try:
        notification_id = json.loads(body)["notification_id"]
    except (ValueError, KeyError, TypeError):
        notification_id = None
    if not isinstance(notification_id, str):
        return {"notification_id": None, "record": None, "published": False}
    record = lookup(layer, {"notification_id": notification_id})
    status = record.status if record is not None else None
    found = {"notification_id": notification_id, "record": status, "published": status == COMPLETED}
    if status == INPROGRESS:
        found["claimed_at"] = table.utc(claimed_at(record))
        found["may_have_been_published"] = may_have_been_published(record)
    return found


def claimed_at(record: DataRecord) -> float:
    return batch_claims.claim_time(record, idempotency.NOTIFICATIONS.expires_after_seconds)


def may_have_been_published(record: DataRecord) -> bool:
    """A notifier claim never recorded and older than SNS FIFO's deduplication: the notifier will
    not publish it again (shared.aws.batch_claims); sending it takes --resend."""
    age = time.time() - claimed_at(record)
    return record.status == INPROGRESS and age >= idempotency.REPUBLISH_WINDOW_SECONDS


def redrive_notifications(
    stack: Stack,
    rate: int | None,
    *,
    dry_run: bool,
    resend: bool,
    confirm: Confirm,
    progress: bool,
) -> tuple[Any, str, bool]:
    """`ops dlq redrive NotificationDeadLetterQueue`: which messages' notifications were already
    published, or claimed and never recorded (they may have been), said before anything moves (a
    dry run stops there); those claimed are refused unless --resend, which releases their claims
    so that they are published again; then SQS's redrive."""
    listed = dead_letter_notifications(stack)
    published = [m for m in listed if m["published"]]
    # A younger claim the notifier itself publishes again, inside SNS's deduplication.
    claimed = [m for m in listed if m.get("may_have_been_published")]
    rows = [
        (
            m["message_id"],
            m["notification_id"] or "(not a notification)",
            "already published"
            if m["published"]
            else f"claimed {m['claimed_at']}, never recorded: may have been published"
            if m.get("may_have_been_published")
            else (m["record"] or "no record"),
        )
        for m in listed
    ]
    listing = (
        f"{NOTIFICATION_DLQ}: {len(listed)} message(s), {len(published)} already published, "
        f"{len(claimed)} claimed too long ago and never recorded"
    )
    if rows:
        listing += "\n" + table.render(("MESSAGE", "NOTIFICATION", "NOTIFIER'S RECORD"), rows)
    if published:
        listing += (
            "\nalready published: the notifier acknowledges these without publishing again "
            "(do not purge their records: the customer would get them twice)"
        )
    data: dict[str, Any] = {"dry_run": dry_run, "messages": listed}
    if dry_run or not listed:
        heading = "dry run: nothing moved\n" if dry_run else ""
        return data, heading + listing, True
    if claimed and not resend:
        raise OpsError(
            f"{listing}\nrefused: {len(claimed)} notification(s) were claimed and never recorded, "
            "so they may have been published; the notifier will not publish them again. "
            "--resend releases their claims and sends them again (the customer may get them "
            "twice)"
        )
    question = f"move these {len(listed)} message(s) back to NotificationQueue"
    if claimed:
        question = (
            f"{len(claimed)} may have been published: the customer may get them AGAIN; {question}"
        )
    if confirm is not None and not confirm(f"{listing}\n{question}"):
        raise OpsError("not confirmed: nothing moved")
    layer = persistence(stack, CLAIMS["NotifierFunction"])
    released = [m["notification_id"] for m in claimed]
    release(layer, [{"notification_id": n} for n in released])
    moved, text, ok = redrive.redrive(stack, NOTIFICATION_DLQ, rate, progress=progress)
    data |= moved | {"released": released}
    if released:
        text = f"{len(released)} claim(s) released, to be published again\n{text}"
    return data, f"{listing}\n{text}", ok
