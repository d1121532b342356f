"""`ops idempotency show|purge`: a function's Powertools idempotency records, found by the key
Powertools itself computes (the persistence layer configured with the function's own claims,
shared.idempotency), so a purge removes exactly what the function would find.

IngestFunction claims each step of a file ([file id, after_line]): the first step is after line 0,
each later one after the line its predecessor's stored result names (a file continued over
several invocations), so a file's records are found by following that chain.
"""

from __future__ import annotations

import argparse
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from harness.stack import StackClient
from shared import idempotency, ingest, keys, model

from ops import file_ref, table
from ops.errors import Confirm, OpsError

CLAIMS = {"IngestFunction": idempotency.FILE_STEPS, "NotifierFunction": idempotency.NOTIFICATIONS}


class Purged(Exception):
    """The reason Powertools' delete_record is given: an operator's purge."""


def persistence(stack: StackClient, claims: idempotency.Claims) -> DynamoDBPersistenceLayer:
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


def file_steps(layer: DynamoDBPersistenceLayer, file_id: str) -> list[tuple[dict, DataRecord]]:
    """A file's step claims, first step first: (the data the key is computed from, record)."""
    found: list[tuple[dict, DataRecord]] = []
    after_line: int | None = 0
    while after_line is not None:
        data = {"s3_object": {"file_id": file_id}, "after_line": after_line}
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
    stack: StackClient, args: argparse.Namespace
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
        return file.file_id, layer, list(file_steps(layer, file.file_id))
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
        return keys.notification_id(kind, contact_id)
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


def show(stack: StackClient, args: argparse.Namespace) -> tuple[Any, str, bool]:
    label, _, found = targets(stack, args)
    described = [describe(record) for _, record in found if record is not None]
    if not described:
        return {"target": label, "records": []}, f"{label}: no idempotency record", True
    lines = [f"{label}:"]
    for record in described:
        line = f"  {record['key']}  {record['status']}  expires {record['expires']}"
        if record["status"] == "INPROGRESS":
            line += f"  in progress until {record['in_progress_until']}"
        lines.append(f"{line}\n    result: {record['result']}")
    return {"target": label, "records": described}, "\n".join(lines), True


def purge(stack: StackClient, args: argparse.Namespace, confirm: Confirm) -> tuple[Any, str, bool]:
    label, layer, found = targets(stack, args)
    present = [(data, record) for data, record in found if record is not None]
    if not present:
        return {"target": label, "purged": []}, f"{label}: no idempotency record", True
    if confirm is not None and not confirm(
        f"delete {len(present)} idempotency record(s) of {label}"
    ):
        raise OpsError("not confirmed: nothing deleted")
    purged = release(layer, present)
    return (
        {"target": label, "purged": purged},
        f"{label}: {len(purged)} record(s) deleted; the next delivery runs again",
        True,
    )


def release(layer: DynamoDBPersistenceLayer, found: list[tuple[dict, DataRecord]]) -> list[str]:
    for data, _ in found:
        layer.delete_record(data, Purged())
    return [record.idempotency_key for _, record in found]
