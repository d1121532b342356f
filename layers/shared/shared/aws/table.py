"""The ContactsTable adapters (low-level DynamoDB client passed in, built once by the handler;
items converted with boto3's own TypeSerializer/TypeDeserializer)."""

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from shared import keys, rules

if TYPE_CHECKING:  # a type only: RouteFunction's cold start does without s3_events
    from shared.s3_events import S3Object

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_item(values: Mapping[str, Any]) -> dict[str, dict]:
    return {name: _to_value(value) for name, value in values.items()}


def _to_value(value: Any) -> dict:
    """boto3's TypeSerializer, its three common cases first: they were 40% of the ingest's own
    CPU per contact record (bench P4)."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is bool:
        return {"BOOL": value}
    if kind is int:
        return {"N": str(value)}
    return _serializer.serialize(value)


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
    """A valid record to store: its CONTACT item and its version (keys.contact_version)."""

    item: Mapping[str, Any]
    version: str
    line: int

    @property
    def contact_id(self) -> str:
        return self.item["contact_id"]


@dataclass
class WriteResult:
    applied: list[ContactWrite] = field(default_factory=list)
    superseded: list[ContactWrite] = field(default_factory=list)  # a newer copy is stored
    refused: list[ContactWrite] = field(default_factory=list)  # DynamoDB rejects the item itself


def write_contacts(dynamodb, table_name: str, writes: Iterable[ContactWrite]) -> WriteResult:
    """Store each contact unless a copy of it as new or newer is stored already (an equal version
    is the same copy), one item per contact_id.

    A contact's CONTACT_REF item (keyed by contact_id) holds the version stored and the
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
    for write in writes:  # a contact twice in one chunk: the newer version wins
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
            # Stored already: a newer copy, or this very one (a duplicate, an earlier attempt).
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
        # The ref goes with its contact (TTL), never before the contact's earliest expiry
        # (a correction that moves the end earlier): the ref is what makes a copy not the first.
        "expires_at": max(item["expires_at"], int(ref.get("expires_at", 0)) if ref else 0),
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


def claim_newest_version(dynamodb, table_name: str, s3_object: "S3Object") -> str | None:
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
    dynamodb,
    table_name: str,
    s3_object: "S3Object",
    values: Mapping[str, Any],
    *,
    run: int | None,
    starts_run: bool,
) -> bool:
    """The file's PROCESSING_LOG item: where it came from, its run and `values` (outcome, counts,
    the line to resume after). Written only while the log is this run's: `starts_run` (the run's
    first step) replaces no log or, for a reprocess run, the log of an earlier run; any other
    write needs the log to be this run's still. False when it is not: a newer run holds the file,
    and this step is obsolete."""
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
        **({"run": run} if run is not None else {}),
        **values,
    }
    if run is None:  # the run S3's event started: its log has no run number
        condition = {
            "ConditionExpression": "attribute_not_exists(pk)"
            if starts_run
            else "attribute_exists(pk) AND attribute_not_exists(#run)"
        }
    else:
        condition = {
            "ConditionExpression": "attribute_not_exists(#run) OR #run < :run"
            if starts_run
            else "#run = :run",
            "ExpressionAttributeValues": _to_item({":run": run}),
        }
    if "#run" in condition["ConditionExpression"]:
        condition["ExpressionAttributeNames"] = {"#run": "run"}
    try:
        dynamodb.put_item(TableName=table_name, Item=_to_item(item), **condition)
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return False
    return True


# --- Fan-out consumers: last agent (LastAgentFunction, RouteFunction), gift cards (Goodwill) ---

# LAST_AGENT names the caller's newest current CONTACT item (ended_at, then the higher
# contact_id: ended_at is fixed-width UTC, so DynamoDB's string order is time order) that has an
# agent and is not ABANDONED (rules.sets_last_agent), and is absent when there is none. Changes
# arrive in any order, late and repeated (queue retries, DLQ redrives, stream replays), so an
# image says only which items to look at: every write is a transaction that checks, as it
# commits, that the CONTACT item it names still holds that agent, and a write that moves
# LAST_AGENT back checks that the item it names still does not.
LAST_AGENT_UPDATED = "updated"
LAST_AGENT_STALE = "stale"  # a newer current contact is the last agent
LAST_AGENT_OUTDATED = "outdated"  # the item holds a later export now: that export's change decides
LAST_AGENT_KEPT = "kept"  # a correction took away a contact that is not the last agent
LAST_AGENT_REPLACED = "replaced"
LAST_AGENT_REMOVED = "removed"

_NEWER_THAN_STORED = (
    "attribute_not_exists(pk) OR #ended_at < :ended_at"
    " OR (#ended_at = :ended_at AND #contact_id <= :contact_id)"
)
_NAMES = {"#ended_at": "ended_at", "#contact_id": "contact_id"}


def _last_agent_item(contact: Mapping[str, Any]) -> dict[str, Any]:
    item = {
        **keys.last_agent_key(contact["caller"]),
        "type": keys.LAST_AGENT,
        "agent_id": contact["agent_id"],
        "contact_id": contact["contact_id"],
        "ended_at": contact["ended_at"],
    }
    if "expires_at" in contact:  # keyed by the caller: it goes with the contact it names (TTL)
        item["expires_at"] = int(contact["expires_at"])
    return item


def _contact_key(caller: str, named: Mapping[str, Any]) -> dict[str, dict]:
    """The key of the CONTACT item a contact or a LAST_AGENT item names."""
    return _to_item(
        {
            "pk": keys.caller_pk(caller),
            "sk": keys.contact_sk(named["ended_at"], named["contact_id"]),
        }
    )


def _names_agent(item: Mapping[str, Any] | None, agent_id: str) -> bool:
    """The CONTACT item is there, sets a last agent, and it is this agent."""
    return item is not None and rules.sets_last_agent(item) and item["agent_id"] == agent_id


def _check_names_agent(table_name: str, caller: str, named: Mapping[str, Any]) -> dict:
    return {
        "ConditionCheck": {
            "TableName": table_name,
            "Key": _contact_key(caller, named),
            "ConditionExpression": "agent_id = :agent AND disposition <> :abandoned",
            "ExpressionAttributeValues": _to_item(
                {":agent": named["agent_id"], ":abandoned": rules.ABANDONED}
            ),
        }
    }


def _check_no_longer_names_agent(table_name: str, caller: str, named: Mapping[str, Any]) -> dict:
    return {
        "ConditionCheck": {
            "TableName": table_name,
            "Key": _contact_key(caller, named),
            "ConditionExpression": "attribute_not_exists(pk) OR attribute_not_exists(agent_id)"
            " OR agent_id <> :agent OR disposition = :abandoned",
            "ExpressionAttributeValues": _to_item(
                {":agent": named["agent_id"], ":abandoned": rules.ABANDONED}
            ),
        }
    }


def update_last_agent(client, table_name: str, contact: Mapping[str, Any]) -> str:
    """Make this contact (one that sets a last agent) the caller's last agent if it is newer
    than the stored one (or the same contact at the same time), and its CONTACT item still holds
    this agent: one transaction. When the stored one is newer but no longer current (a
    correction took it away and its own change is still on the way), the last agent is
    recomputed at once.

    Returns LAST_AGENT_UPDATED, _STALE, _OUTDATED, or (recomputed) _REPLACED / _REMOVED."""
    item = _last_agent_item(contact)
    put = {
        "Put": {
            "TableName": table_name,
            "Item": _to_item(item),
            "ConditionExpression": _NEWER_THAN_STORED,
            "ExpressionAttributeNames": _NAMES,
            "ExpressionAttributeValues": _to_item(
                {":ended_at": item["ended_at"], ":contact_id": item["contact_id"]}
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
    for attempt in range(WRITE_ATTEMPTS):
        try:
            client.transact_write_items(
                TransactItems=[_check_names_agent(table_name, contact["caller"], contact), put]
            )
            return LAST_AGENT_UPDATED
        except client.exceptions.TransactionCanceledException as cancelled:
            current, stored = cancelled.response["CancellationReasons"]
            if current.get("Code") == "ConditionalCheckFailed":
                return LAST_AGENT_OUTDATED
            if stored.get("Code") == "ConditionalCheckFailed":
                outcome = _correct(
                    client, table_name, contact["caller"], _from_item(stored["Item"]), attempt
                )
                if outcome is not None:
                    return LAST_AGENT_STALE if outcome == LAST_AGENT_KEPT else outcome
            else:  # a conflicting transaction or throttling
                _backoff(attempt + 1)
    raise WritesThrottled(f"last agent of contact {contact['contact_id']} not written")


def replace_last_agent(client, table_name: str, gone: Mapping[str, Any]) -> str:
    """A change took this contact (one that set a last agent) away: deleted it, moved it,
    abandoned it or changed its agent. If the stored last agent names it at that time and its
    CONTACT item no longer holds that agent, make it the newest of the caller's current contacts
    that reached an agent, or remove it when there is none.

    Returns LAST_AGENT_KEPT (it names another contact, or the contact is current after all),
    LAST_AGENT_REPLACED or LAST_AGENT_REMOVED."""
    for attempt in range(WRITE_ATTEMPTS):
        stored = client.get_item(
            TableName=table_name,
            Key=_to_item(keys.last_agent_key(gone["caller"])),
            ConsistentRead=True,
        ).get("Item")
        if stored is None or not rules.same_version(gone, _from_item(stored)):
            return LAST_AGENT_KEPT
        outcome = _correct(client, table_name, gone["caller"], _from_item(stored), attempt)
        if outcome is not None:
            return outcome
    raise WritesThrottled(f"last agent after contact {gone['contact_id']} not corrected")


def _correct(
    client, table_name: str, caller: str, stored: Mapping[str, Any], attempt: int
) -> str | None:
    """The stored LAST_AGENT item, as read: kept if its CONTACT item still holds its agent,
    else replaced by the newest current contact with an agent, or removed. One transaction
    checks what the decision read: LAST_AGENT unchanged, its contact still not holding it, the
    newest one still holding its agent. None when any changed meanwhile (decide again)."""
    named = client.get_item(
        TableName=table_name, Key=_contact_key(caller, stored), ConsistentRead=True
    ).get("Item")
    if _names_agent(_from_item(named) if named else None, stored["agent_id"]):
        return LAST_AGENT_KEPT
    newest = _newest_with_agent(client, table_name, caller)
    unchanged = {
        "ConditionExpression": "agent_id = :agent AND #contact_id = :contact_id"
        " AND #ended_at = :ended_at",
        "ExpressionAttributeNames": _NAMES,
        "ExpressionAttributeValues": _to_item(
            {
                ":agent": stored["agent_id"],
                ":contact_id": stored["contact_id"],
                ":ended_at": stored["ended_at"],
            }
        ),
    }
    last_agent_key = _to_item(keys.last_agent_key(caller))
    if newest is None:
        actions = [
            _check_no_longer_names_agent(table_name, caller, stored),
            {"Delete": {"TableName": table_name, "Key": last_agent_key, **unchanged}},
        ]
    else:
        actions = [
            _check_names_agent(table_name, caller, newest),
            {
                "Put": {
                    "TableName": table_name,
                    "Item": _to_item(_last_agent_item(newest)),
                    **unchanged,
                }
            },
        ]
        if not rules.same_version(newest, stored):  # else the check above covers the item
            actions.insert(0, _check_no_longer_names_agent(table_name, caller, stored))
    try:
        client.transact_write_items(TransactItems=actions)
    except client.exceptions.TransactionCanceledException as cancelled:
        codes = {reason.get("Code") for reason in cancelled.response["CancellationReasons"]}
        if "ConditionalCheckFailed" not in codes:  # a conflicting transaction or throttling
            _backoff(attempt + 1)
        return None
    return LAST_AGENT_REMOVED if newest is None else LAST_AGENT_REPLACED


# Enough for the newest qualifying contact of almost any caller in one page; more pages if not.
_CALLER_PAGE = 25


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
