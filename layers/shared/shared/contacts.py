"""CONTACT items as the table's stream delivers them to the fan-out consumers."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)

from shared import keys

_NEW = (DynamoDBRecordEventName.INSERT, DynamoDBRecordEventName.MODIFY)
_OLD = (DynamoDBRecordEventName.MODIFY, DynamoDBRecordEventName.REMOVE)


def new_contact(record: DynamoDBRecord) -> dict[str, Any] | None:
    """The contact a stream record wrote (inserted, or changed by a corrected export), as plain
    values (numbers as Decimal), or None for any other record. The ESM filters already admit
    only the records a consumer acts on; this keeps a consumer correct when a filter is missing
    or wrong."""
    if record.event_name not in _NEW or record.dynamodb is None:
        return None
    return _contact(record.dynamodb.new_image)


def first_export(record: DynamoDBRecord) -> dict[str, Any] | None:
    """The contact a stream record inserted as the first export of its contact_id, or None. Only
    these start a survey or a gift card: a re-export of a contact gets nothing new, even with
    other fields changed (the design's contract)."""
    if record.event_name is not DynamoDBRecordEventName.INSERT or record.dynamodb is None:
        return None
    contact = _contact(record.dynamodb.new_image)
    return contact if contact is not None and contact.get("first_export") is True else None


def old_contact(record: DynamoDBRecord) -> dict[str, Any] | None:
    """The contact a stream record replaced or removed (a corrected export moves a contact), or
    None for any other record."""
    if record.event_name not in _OLD or record.dynamodb is None:
        return None
    return _contact(record.dynamodb.old_image)


def _contact(image: dict[str, Any] | None) -> dict[str, Any] | None:
    return image if image and image.get("type") == keys.CONTACT else None
