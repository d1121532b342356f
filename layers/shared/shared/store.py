"""The ContactsTable adapters (low-level DynamoDB client passed in, built once by the handler;
items converted with boto3's own TypeSerializer/TypeDeserializer)."""

from collections.abc import Mapping
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from shared import keys

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _to_item(values: Mapping[str, Any]) -> dict[str, dict]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def _from_item(item: Mapping[str, dict]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


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
