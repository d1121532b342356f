"""CONTACT items as the table's stream delivers them to the fan-out consumers."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)

from shared import keys


def inserted_contact(record: DynamoDBRecord) -> dict[str, Any] | None:
    """The contact a stream record inserted, as plain values (numbers as Decimal), or None for
    any other record. The ESM filters already admit only these; this keeps a consumer correct
    when a filter is missing or wrong."""
    if record.event_name is not DynamoDBRecordEventName.INSERT:
        return None
    image = record.dynamodb.new_image if record.dynamodb else {}
    return image if image.get("type") == keys.CONTACT else None
