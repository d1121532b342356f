"""SurveyFunction: ContactsTable stream -> one SURVEY notification per contact, ever."""

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
from aws_lambda_powertools.utilities.idempotency import idempotent_function
from shared import contacts, idempotency, keys, notifications, notify, rules

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
sqs = boto3.client("sqs")
dynamodb = boto3.client("dynamodb")
NOTIFICATION_QUEUE_URL = os.environ["NOTIFICATION_QUEUE_URL"]


config = idempotency.idempotency_config(
    "[kind, contact_id]",
    idempotency.ONCE_PER_CONTACT_SECONDS,
    response_hook=idempotency.count_duplicates(metrics, logger, "survey already enqueued"),
)


# key_prefix keeps the key stable when code moves (the default embeds the module path).
@idempotent_function(
    data_keyword_argument="once",
    persistence_store=idempotency.persistence_layer(dynamodb),
    config=config,
    key_prefix="SurveyFunction",
)
def enqueue_survey(*, once: dict, contact: dict) -> dict:
    notification = notifications.survey(contact)
    notify.enqueue(sqs, NOTIFICATION_QUEUE_URL, notification)
    metrics.add_metric(name="SurveysEnqueued", unit=MetricUnit.Count, value=1)
    logger.info("survey enqueued", contact_id=contact["contact_id"])
    return {"notification_id": notification["notification_id"]}


def record_handler(record: DynamoDBRecord) -> None:
    contact = contacts.inserted_contact(record)
    if contact is None or not rules.survey_due(contact):
        logger.info("record skipped: no survey due", event_id=record.event_id)
        return
    enqueue_survey(once={"kind": keys.SURVEY, "contact_id": contact["contact_id"]}, contact=contact)


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict, context) -> dict:
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
