"""LastAgentFunction: ContactsTable stream -> the caller's LAST_AGENT item, moved forward only.

No idempotency store: the conditional write is idempotent and order-independent by itself.
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from shared import contacts, rules, store

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]


def record_handler(record: DynamoDBRecord) -> None:
    contact = contacts.inserted_contact(record)
    if contact is None or not rules.sets_last_agent(contact):
        logger.info("record skipped: sets no last agent", event_id=record.event_id)
        return
    if store.update_last_agent(dynamodb, CONTACTS_TABLE_NAME, contact):
        metrics.add_metric(name="LastAgentUpdated", unit=MetricUnit.Count, value=1)
        logger.info("last agent updated", contact_id=contact["contact_id"])
    else:
        metrics.add_metric(name="LastAgentStale", unit=MetricUnit.Count, value=1)
        logger.info("last agent kept: a newer contact is stored", contact_id=contact["contact_id"])


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict, context) -> dict:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
