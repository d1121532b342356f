"""CONTACT items as the table's stream delivers them to the fan-out consumers, and the message
attributes the router gives a change so that SNS filter policies select what the consumers'
Lambda filters select."""

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


def change_attributes(record: DynamoDBRecord) -> dict[str, str]:
    """The SNS message attributes of one stream record (router mode): ``event_name`` always; from
    an image whose ``type`` is CONTACT (typed, as Lambda filters see it: ``{"S": "CONTACT"}``),
    the facts the consumers' filters test, as strings: ``new_disposition``, ``new_has_agent``,
    ``new_first_export``, ``new_survey_opt_in``, ``new_has_email``, ``new_long_wait`` from the
    NewImage, ``old_disposition``, ``old_has_agent`` from the OldImage.

    Each mirrors one filter leaf exactly: a ``{"S": [...]}`` rule sees only an S value (a
    disposition of another type is no disposition), ``{"BOOL": [true]}`` only a BOOL true
    ("true"; anything else "false"), ``exists`` any S value (even empty). Attributes reach SNS and
    its logs, so they are facts about the data, never its values (no email, caller or agent id).
    """
    attributes = {"event_name": str(record.get("eventName"))}
    stream = record.get("dynamodb") or {}
    new, old = _typed_contact(stream.get("NewImage")), _typed_contact(stream.get("OldImage"))
    if new is not None:
        if _string(new, "disposition") is not None:
            attributes["new_disposition"] = _string(new, "disposition")
        if _string(new, "agent_id") is not None:
            attributes["new_has_agent"] = "true"
        attributes["new_first_export"] = _is_true(new, "first_export")
        attributes["new_survey_opt_in"] = _is_true(new, "survey_opt_in")
        if _string(new, "email") is not None:
            attributes["new_has_email"] = "true"
        attributes["new_long_wait"] = _is_true(new, "long_wait")
    if old is not None:
        if _string(old, "disposition") is not None:
            attributes["old_disposition"] = _string(old, "disposition")
        if _string(old, "agent_id") is not None:
            attributes["old_has_agent"] = "true"
    return attributes


def _typed_contact(image: Any) -> dict[str, Any] | None:
    if isinstance(image, dict) and _string(image, "type") == keys.CONTACT:
        return image
    return None


def _string(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    text = value.get("S") if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def _is_true(image: dict[str, Any], name: str) -> str:
    value = image.get(name)
    return "true" if isinstance(value, dict) and value.get("BOOL") is True else "false"
