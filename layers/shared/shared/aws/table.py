"""The ContactsTable adapters (low-level DynamoDB client passed in, built once by the handler;
items converted with boto3's own TypeSerializer/TypeDeserializer)."""

import contextlib
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from shared import keys, rules
from shared.s3_events import S3Object

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_item(values: Mapping[str, Any]) -> dict[str, dict]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def _from_item(item: Mapping[str, dict]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def _code(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


# Retries of what DynamoDB reports inside an accepted request (a transaction cancelled by a
# conflict or throttling): full-jitter exponential backoff. boto3's own retries cover throttling of
# whole requests.
WRITE_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 0.05
BACKOFF_MAX_SECONDS = 5.0


class WritesThrottled(Exception):
    """Writes still failed after every attempt: transient, the file must be retried."""


def _backoff(attempt: int) -> None:
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
    time.sleep(random.uniform(0, ceiling))  # noqa: S311 (jitter, not cryptography)


# --- Ingest: contacts, newest export first (IngestFunction) --------------------------------------

# TransactWriteItems takes at most 100 actions; a contact needs two or three.
TRANSACTION_ACTIONS = 100


@dataclass(frozen=True)
class ContactWrite:
    """A valid row to store: its CONTACT item and its export version (keys.export_version)."""

    item: Mapping[str, Any]
    version: str
    line: int

    @property
    def contact_id(self) -> str:
        return self.item["contact_id"]


@dataclass
class WriteResult:
    applied: list[ContactWrite] = field(default_factory=list)
    superseded: list[ContactWrite] = field(default_factory=list)  # a newer export is stored
    refused: list[ContactWrite] = field(default_factory=list)  # DynamoDB rejects the item itself


def write_contacts(dynamodb, table_name: str, writes: Iterable[ContactWrite]) -> WriteResult:
    """Store each contact unless a newer export of it is stored already, one item per contact_id.

    A contact's CONTACT_REF item (keyed by contact_id) holds the export version stored and the
    CONTACT item's key; the ref, the new CONTACT item (`first_export` false when it replaces one)
    and the deletion of the older one (when a correction moved its key) are one transaction, so
    a crash leaves either the old contact or the new one, never both or none. Writes are
    optimistic: a contact is first assumed new; a cancelled transaction returns the stored refs
    (ReturnValuesOnConditionCheckFailure), and the next round decides with them. A re-run of
    a file finds its own versions stored and writes nothing. An item DynamoDB refuses
    (ValidationException) is refused alone, never its batch.
    """
    latest: dict[str, ContactWrite] = {}
    result = WriteResult()
    for write in writes:  # a contact twice in one chunk: the later line is the newer export
        older = latest.get(write.contact_id)
        if older is not None:
            result.superseded.append(min(older, write, key=lambda w: w.version))
        if older is None or write.version > older.version:
            latest[write.contact_id] = write
    pending = list(latest.values())
    stored: dict[str, dict[str, Any] | None] = {}  # contact_id -> its ref, as last seen
    for attempt in range(WRITE_ATTEMPTS):
        retry: list[ContactWrite] = []
        contended = False
        for group in _transaction_groups(pending, stored, result):
            again, conflict = _write_group(dynamodb, table_name, group, stored, result)
            retry += again
            contended |= conflict
        if not retry:
            return result
        pending = retry
        if contended:  # a conflicting transaction or throttling: wait; a stale ref: go on
            _backoff(attempt + 1)
    raise WritesThrottled(f"{len(pending)} contacts still unwritten after {WRITE_ATTEMPTS} rounds")


def _transaction_groups(
    writes: list[ContactWrite], stored: dict[str, dict | None], result: WriteResult
) -> Iterable[list[tuple[ContactWrite, list[dict]]]]:
    group: list[tuple[ContactWrite, list[dict]]] = []
    size = 0
    for write in writes:
        ref = stored.get(write.contact_id)
        if ref is not None and ref["version"] >= write.version:
            # Stored already: a newer export, or this very row by an earlier attempt.
            if ref["version"] > write.version:
                result.superseded.append(write)
            else:
                result.applied.append(write)
            continue
        actions = _contact_actions(write, ref)
        if size + len(actions) > TRANSACTION_ACTIONS:
            yield group
            group, size = [], 0
        group.append((write, actions))
        size += len(actions)
    if group:
        yield group


def _contact_actions(write: ContactWrite, ref: dict | None) -> list[dict]:
    item = write.item
    new_ref = {
        **keys.contact_ref_key(write.contact_id),
        "type": keys.CONTACT_REF,
        "contact_id": write.contact_id,
        "version": write.version,
        "item_pk": item["pk"],
        "item_sk": item["sk"],
    }
    if ref is None:
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
    else:
        condition = {
            "ConditionExpression": "version = :stored",
            "ExpressionAttributeValues": _to_item({":stored": ref["version"]}),
        }
    actions = [
        {"Put": {"Item": _to_item(new_ref), "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"Put": {"Item": _to_item({**item, "first_export": ref is None})}},
    ]
    actions[0]["Put"].update(condition)
    if ref is not None and (ref["item_pk"], ref["item_sk"]) != (item["pk"], item["sk"]):
        old_key = {"pk": ref["item_pk"], "sk": ref["item_sk"]}
        actions.append({"Delete": {"Key": _to_item(old_key)}})
    return actions


def _write_group(
    dynamodb,
    table_name: str,
    group: list[tuple[ContactWrite, list[dict]]],
    stored: dict[str, dict | None],
    result: WriteResult,
) -> tuple[list[ContactWrite], bool]:
    """One transaction. Returns the writes to try again (`stored` has learnt the refs that beat
    them) and whether the transaction met contention (a conflict or throttling) worth waiting."""
    actions = [
        {op: {**body, "TableName": table_name}}
        for _, contact_actions in group
        for action in contact_actions
        for op, body in action.items()
    ]
    try:
        dynamodb.transact_write_items(TransactItems=actions)
    except dynamodb.exceptions.TransactionCanceledException as cancelled:
        reasons = cancelled.response.get("CancellationReasons", [])
        codes = {reason.get("Code") for reason in reasons}
        index = 0
        for write, contact_actions in group:
            ref_reason = reasons[index] if index < len(reasons) else {}
            if ref_reason.get("Code") == "ConditionalCheckFailed":
                old = ref_reason.get("Item")
                stored[write.contact_id] = _from_item(old) if old else None
            index += len(contact_actions)
        return [write for write, _ in group], bool(codes - {"None", "ConditionalCheckFailed"})
    except ClientError as error:
        if _code(error) != "ValidationException":
            raise
        if len(group) == 1:
            result.refused.append(group[0][0])
            return [], False
        # Find the item DynamoDB refuses: each contact on its own.
        retry: list[ContactWrite] = []
        contended = False
        for one in group:
            again, conflict = _write_group(dynamodb, table_name, [one], stored, result)
            retry += again
            contended |= conflict
        return retry, contended
    result.applied.extend(write for write, _ in group)
    return [], False


# --- Ingest: the processing log of files ----------------------------------------------------------


def claim_newest_version(dynamodb, table_name: str, s3_object: S3Object) -> str | None:
    """Record this object version as the newest applied of its key, unless a newer one is: then
    return that one's file id. S3 orders the events of one key by sequencer, not by arrival."""
    item = {
        **keys.object_key(s3_object.bucket, s3_object.key),
        "type": keys.OBJECT_VERSION,
        "sequencer": s3_object.ordering_sequencer,
        "file_id": s3_object.file_id,
    }
    try:
        dynamodb.put_item(
            TableName=table_name,
            Item=_to_item(item),
            ConditionExpression="attribute_not_exists(pk) OR sequencer <= :sequencer",
            ExpressionAttributeValues=_to_item({":sequencer": item["sequencer"]}),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except dynamodb.exceptions.ConditionalCheckFailedException as newer:
        return _from_item(newer.response["Item"])["file_id"]
    return None


def file_log(dynamodb, table_name: str, file_id: str) -> dict[str, Any] | None:
    item = dynamodb.get_item(
        TableName=table_name,
        Key=_to_item(keys.processing_log_key(file_id)),
        ConsistentRead=True,
    ).get("Item")
    return _from_item(item) if item else None


def write_file_log(
    dynamodb, table_name: str, s3_object: S3Object, values: Mapping[str, Any], *, first: bool
) -> None:
    """The file's PROCESSING_LOG item: where it came from and `values` (outcome, counts, the line
    to resume after). `first`: only if the file has no log yet (a concurrent run made it: fine)."""
    item = {
        **keys.processing_log_key(s3_object.file_id),
        "type": keys.PROCESSING_LOG,
        "file_id": s3_object.file_id,
        "bucket": s3_object.bucket,
        "key": s3_object.key,
        "version": s3_object.version_id or s3_object.sequencer,
        # with the key and version, what `ops file reprocess` rebuilds the file's event from
        "sequencer": s3_object.sequencer,
        "event_time": s3_object.event_time,
        "size": s3_object.size,
        **({"etag": s3_object.etag} if s3_object.etag is not None else {}),
        **values,
    }
    condition = {"ConditionExpression": "attribute_not_exists(pk)"} if first else {}
    with contextlib.suppress(dynamodb.exceptions.ConditionalCheckFailedException):
        dynamodb.put_item(TableName=table_name, Item=_to_item(item), **condition)


# --- Fan-out consumers: last agent (LastAgentFunction, RouteFunction), gift cards (Goodwill) ---

# Newer means (ended_at, contact_id) is greater, as rules.is_newer orders contacts: ended_at is
# fixed-width UTC (keys.utc_timestamp), so DynamoDB's string order is time order. The same contact
# at the same time may also rewrite it: a correction of that contact (its agent, say).
_NEWER_THAN_STORED = (
    "attribute_not_exists(pk) OR #ended_at < :ended_at"
    " OR (#ended_at = :ended_at AND #contact_id <= :contact_id)"
)


def _last_agent_item(contact: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **keys.last_agent_key(contact["caller"]),
        "type": keys.LAST_AGENT,
        "agent_id": contact["agent_id"],
        "contact_id": contact["contact_id"],
        "ended_at": contact["ended_at"],
    }


def update_last_agent(client, table_name: str, contact: Mapping[str, Any]) -> bool:
    """Make this contact's agent the caller's last agent if the contact is newer than the stored
    one, in one conditional write. False when it is not (stale, duplicate or out of order): that
    is an outcome, not an error, so any delivery order converges without an idempotency store."""
    item = _last_agent_item(contact)
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


# Enough for the newest qualifying contact of almost any caller in one page; more pages if not.
_CALLER_PAGE = 25


def replace_last_agent(client, table_name: str, gone: Mapping[str, Any]) -> str:
    """A contact that was (maybe) the caller's last agent was corrected away (deleted, moved,
    abandoned). If the stored last agent is that contact at that time, make it the newest of the
    caller's current contacts that reached an agent, or remove it when there is none; conditional
    on the stored one being still that contact, so a concurrent newer update wins.

    Returns "kept" (another contact is the last agent), "replaced" or "removed"."""
    key = keys.last_agent_key(gone["caller"])
    stored = client.get_item(TableName=table_name, Key=_to_item(key), ConsistentRead=True).get(
        "Item"
    )
    current = _from_item(stored) if stored else {}
    if (current.get("contact_id"), current.get("ended_at")) != (
        gone["contact_id"],
        gone["ended_at"],
    ):
        return "kept"
    newest = _newest_with_agent(client, table_name, gone["caller"])
    still_gone = {
        "ConditionExpression": "#contact_id = :contact_id AND #ended_at = :ended_at",
        "ExpressionAttributeNames": {"#ended_at": "ended_at", "#contact_id": "contact_id"},
        "ExpressionAttributeValues": _to_item(
            {":ended_at": gone["ended_at"], ":contact_id": gone["contact_id"]}
        ),
    }
    try:
        if newest is None:
            client.delete_item(TableName=table_name, Key=_to_item(key), **still_gone)
            return "removed"
        client.put_item(TableName=table_name, Item=_to_item(_last_agent_item(newest)), **still_gone)
    except client.exceptions.ConditionalCheckFailedException:
        return "kept"
    return "replaced"


def _newest_with_agent(client, table_name: str, caller: str) -> dict[str, Any] | None:
    query: dict[str, Any] = {
        "TableName": table_name,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :contact)",
        "ExpressionAttributeValues": _to_item(
            {":pk": keys.caller_pk(caller), ":contact": keys.CONTACT_SK_PREFIX}
        ),
        "ScanIndexForward": False,  # newest first: the sort key starts with ended_at
        "ConsistentRead": True,
        "Limit": _CALLER_PAGE,
    }
    while True:
        page = client.query(**query)
        for item in page.get("Items", []):
            contact = _from_item(item)
            if rules.sets_last_agent(contact):
                return contact
        if "LastEvaluatedKey" not in page:
            return None
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


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
