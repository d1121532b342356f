"""NotifierFunction: NotificationQueue -> one SNS message per notification_id.

Two guards, because a publish and the record of it can never be one atomic step: the Powertools
claim on the notification_id (a duplicate message finds it completed, or in progress and is
retried after the visibility timeout), and the FIFO topic's deduplication on the same id (a crash
or a throttled completion between the publish and the record makes the retry publish again; SNS
accepts it and delivers nothing within 5 minutes of the first publish). docs/design.md states the
horizon this gives.

A message that is not a valid notification fails its record every time, so after the queue's
maxReceiveCount it ends in the DLQ; the rest of the batch is unaffected.
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
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import idempotent_function
from shared import idempotency, notifications
from shared.aws import messaging

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS)
sns = boto3.client("sns")
dynamodb = boto3.client("dynamodb")
NOTIFICATIONS_TOPIC_ARN = os.environ["NOTIFICATIONS_TOPIC_ARN"]


config = idempotency.NOTIFICATIONS.config(
    response_hook=idempotency.count_duplicates(metrics, logger, "notification already sent"),
)


@idempotent_function(
    data_keyword_argument="notification",
    persistence_store=idempotency.persistence_layer(dynamodb),
    config=config,
    key_prefix=idempotency.NOTIFICATIONS.key_prefix,
)
def send(*, notification: dict) -> dict:
    messaging.publish(sns, NOTIFICATIONS_TOPIC_ARN, notification)
    metrics.add_metric(name="NotificationsSent", unit=MetricUnit.Count, value=1)
    logger.info(
        "notification sent",
        notification_id=notification["notification_id"],
        kind=notification["kind"],
    )
    return {"notification_id": notification["notification_id"]}


def record_handler(record: SQSRecord) -> None:
    try:
        notification = notifications.parse(record.body)
    except notifications.InvalidNotification as poison:
        logger.error("invalid notification", message_id=record.message_id, reason=str(poison))
        raise
    send(notification=notification)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
