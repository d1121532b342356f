"""NotifierFunction: NotificationQueue -> one SNS message per notification_id, a batch's
notifications in one PublishBatch.

Two guards, because a publish and the record of it can never be one atomic step: the Powertools
claim on the notification_id (a duplicate message finds it completed), and the FIFO topic's
deduplication on the same id (a crash or a throttled completion between the publish and the
record makes the retry publish again under the same claim; SNS accepts it and delivers nothing
within 5 minutes of the first publish). A claim never recorded and older than that window may
have been published: it is not published again (CallMayHaveHappened, logged with the claim's
time), and its message ends in the DLQ, where `ops dlq redrive` says so and asks for --resend.
docs/design.md states the horizon this gives. The claims of a batch are all taken before its one
publish, and each is recorded, or released, by its own entry's outcome (shared.aws.batch_claims,
which logs each notification's claim and its `notification sent` line).

A message that is not a valid notification fails its record every time, so after the queue's
maxReceiveCount it ends in the DLQ; the rest of the batch is unaffected.
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from shared import idempotency, notifications
from shared.aws import messaging
from shared.aws.batch_claims import BatchClaims
from shared.batches.sends import BatchSends

logger = Logger()
metrics = Metrics()
sns = boto3.client("sns")
dynamodb = boto3.client("dynamodb")
NOTIFICATIONS_TOPIC_ARN = os.environ["NOTIFICATIONS_TOPIC_ARN"]

config = idempotency.NOTIFICATIONS.config()
claims = BatchClaims(
    idempotency.persistence_layer(dynamodb),
    config,
    key_prefix=idempotency.NOTIFICATIONS.key_prefix,
    result=lambda notification: {"notification_id": notification["notification_id"]},
    adopt_within=idempotency.REPUBLISH_WINDOW_SECONDS,
    name="notification",
    log_fields=lambda notification: {
        "notification_id": notification["notification_id"],
        "kind": notification["kind"],
    },
)


def record_handler(record: SQSRecord) -> dict:
    """The notification the record carries, published with the batch's others (publish_batch)."""
    try:
        return notifications.parse(record.body)
    except notifications.InvalidNotification as poison:
        logger.error("invalid notification", message_id=record.message_id, reason=str(poison))
        raise


def publish_batch(batch: list[dict]) -> dict[int, Exception]:
    """One PublishBatch for the batch's notifications not sent before, each under its claim."""
    outcomes = claims.around(
        batch, lambda claimed: messaging.publish_all(sns, NOTIFICATIONS_TOPIC_ARN, claimed)
    )
    if outcomes.done:
        metrics.add_metric(
            name="NotificationsSent", unit=MetricUnit.Count, value=len(outcomes.done)
        )
    if outcomes.duplicates:
        metrics.add_metric(
            name="DuplicatesSuppressed", unit=MetricUnit.Count, value=len(outcomes.duplicates)
        )
    logger.info(
        "notifications published",
        sent=len(outcomes.done),
        duplicates=len(outcomes.duplicates),
        failed=len(outcomes.failed),
    )
    for position, error in outcomes.failed.items():
        logger.warning(
            "notification not sent",
            notification_id=batch[position]["notification_id"],
            reason=str(error),
        )
    return outcomes.failed


processor = BatchSends(EventType.SQS, publish_batch)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
