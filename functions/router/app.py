"""RouterFunction (fan-out mode router): ContactsTable stream -> ChangeTopic, one SNS message per
stream record: the record itself as the body, and message attributes that the consumers' queue
subscriptions filter on (shared.contacts.change_attributes), so each consumer's queue gets the
records its stream filter would have admitted, exactly as the stream would have handed them over.

A failed publish fails its record only (partial batch response): the stream retries from it, and
once its retries are spent the mapping sends the batch's description to StreamFailureQueue. A
retry may publish a record again; the consumers are idempotent per change. Logs name event ids
only: records carry contact data.
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
from shared.aws import messaging

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
sns = boto3.client("sns")
CHANGE_TOPIC_ARN = os.environ["CHANGE_TOPIC_ARN"]


def record_handler(record: DynamoDBRecord) -> None:
    messaging.publish_change(sns, CHANGE_TOPIC_ARN, record)
    metrics.add_metric(name="ChangesPublished", unit=MetricUnit.Count, value=1)
    logger.info("change published", event_id=record.event_id)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
