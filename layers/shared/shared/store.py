"""The ContactsTable adapters (low-level DynamoDB client passed in, built once by the handler;
items converted with boto3's own TypeSerializer/TypeDeserializer)."""

import random
import time
from collections.abc import Iterable, Mapping
from itertools import batched
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from shared import keys
from shared.s3_events import S3Object

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_item(values: Mapping[str, Any]) -> dict[str, dict]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def _from_item(item: Mapping[str, dict]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


# --- Ingest: contact rows (IngestFunction) and the processing log of files ---

BATCH_WRITE_LIMIT = 25
# UnprocessedItems (a partition throttled inside an accepted request) are retried with full-jitter
# exponential backoff; boto3's own retries cover throttling of whole requests.
BATCH_WRITE_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_MAX_SECONDS = 5.0


class WritesThrottled(Exception):
    """Rows were still unprocessed after every attempt: transient, the file must be retried."""


def put_contacts(dynamodb, table_name: str, items: Iterable[Mapping[str, Any]]) -> None:
    """Write CONTACT items with BatchWriteItem, 25 per request, as the iterable yields them.

    A put of the same key with the same content is idempotent, so re-running a file after a crash
    part-way leaves exactly one item per contact.
    """
    for chunk in batched(items, BATCH_WRITE_LIMIT, strict=False):
        # DynamoDB rejects a request naming one key twice; the later row wins, as a put would.
        unique = {(item["pk"], item["sk"]): item for item in chunk}
        _batch_write(
            dynamodb,
            {table_name: [{"PutRequest": {"Item": _to_item(i)}} for i in unique.values()]},
        )


def _batch_write(dynamodb, request_items: dict[str, list]) -> None:
    for attempt in range(BATCH_WRITE_ATTEMPTS):
        if attempt:
            ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
            time.sleep(random.uniform(0, ceiling))  # noqa: S311 (jitter, not cryptography)
        request_items = dynamodb.batch_write_item(RequestItems=request_items).get(
            "UnprocessedItems"
        )
        if not request_items:
            return
    unprocessed = sum(len(requests) for requests in request_items.values())
    raise WritesThrottled(
        f"{unprocessed} items still unprocessed after {BATCH_WRITE_ATTEMPTS} attempts"
    )


def record_file_outcome(
    dynamodb,
    table_name: str,
    s3_object: S3Object,
    *,
    outcome: str,
    rows_ok: int,
    rows_rejected: int,
    report_key: str | None,
) -> None:
    """The PROCESSING_LOG item of a file: what happened to it, with counts."""
    item = {
        **keys.processing_log_key(s3_object.file_id),
        "type": keys.PROCESSING_LOG,
        "file_id": s3_object.file_id,
        "bucket": s3_object.bucket,
        "key": s3_object.key,
        "version": s3_object.version_id or s3_object.sequencer,
        "size": s3_object.size,
        "outcome": outcome,
        "rows_ok": rows_ok,
        "rows_rejected": rows_rejected,
    }
    # Which content was ingested: the eTag the event names.
    if s3_object.etag is not None:
        item["etag"] = s3_object.etag
    if report_key is not None:
        item["report_key"] = report_key
    dynamodb.put_item(TableName=table_name, Item=_to_item(item))


# --- Fan-out consumers: last agent (LastAgentFunction, RouteFunction), gift cards (Goodwill) ---

# Newer means (ended_at, contact_id) is greater, as rules.is_newer orders contacts: ended_at is
# fixed-width UTC (keys.utc_timestamp), so DynamoDB's string order is time order.
_NEWER_THAN_STORED = (
    "attribute_not_exists(pk) OR #ended_at < :ended_at"
    " OR (#ended_at = :ended_at AND #contact_id < :contact_id)"
)


def update_last_agent(client, table_name: str, contact: Mapping[str, Any]) -> bool:
    """Make this contact's agent the caller's last agent if the contact is newer than the stored
    one, in one conditional write. False when it is not (stale, duplicate or out of order): that
    is an outcome, not an error, so any delivery order converges without an idempotency store."""
    item = {
        **keys.last_agent_key(contact["caller"]),
        "type": keys.LAST_AGENT,
        "agent_id": contact["agent_id"],
        "contact_id": contact["contact_id"],
        "ended_at": contact["ended_at"],
    }
    try:
        client.put_item(
            TableName=table_name,
            Item=_to_item(item),
            ConditionExpression=_NEWER_THAN_STORED,
            ExpressionAttributeNames={"#ended_at": "ended_at", "#contact_id": "contact_id"},
            ExpressionAttributeValues=_to_item(
                {":ended_at": item["ended_at"], ":contact_id": item["contact_id"]}
            ),
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def get_last_agent(client, table_name: str, caller: str) -> dict[str, str] | None:
    """The caller's last agent ({agent_id, contact_id, ended_at}) or None.

    Eventually consistent on purpose: the item changes only when a stream consumer applies a
    contact that ended minutes before (export, ingest and stream lag); a read lagging a write by
    well under a second changes nothing a caller notices, and costs half with a shorter tail.
    """
    item = client.get_item(
        TableName=table_name,
        Key=_to_item(keys.last_agent_key(caller)),
        ProjectionExpression="agent_id, contact_id, ended_at",
    ).get("Item")
    return _from_item(item) if item else None


def create_gift_card(client, table_name: str, card: Mapping[str, Any]) -> tuple[dict, bool]:
    """Write the contact's gift card unless it already has one. Returns the card the table holds
    and whether this call created it; an existing card comes back from the same request
    (ReturnValuesOnConditionCheckFailure), so re-issuing costs no extra read."""
    item = {**keys.gift_card_key(card["contact_id"]), "type": keys.GIFT_CARD, **card}
    try:
        client.put_item(
            TableName=table_name,
            Item=_to_item(item),
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exists:
        return _card_fields(_from_item(exists.response["Item"])), False
    return _card_fields(item), True


def _card_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in item.items() if name not in ("pk", "sk", "type")}
