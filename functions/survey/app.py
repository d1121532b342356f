"""SurveyFunction: ContactsTable changes -> the SURVEY notification of each contact whose first
export is due one (a re-export gets nothing new), a batch's enqueued in SendMessageBatch calls.
The changes arrive from the table's stream or, in fan-out modes pipe and router (template
parameter FanOut), from SurveyQueue as the same stream records (shared.batches.table_changes).

No idempotency store here: the notification id is derived from (SURVEY, contact_id), so however
often a record is delivered, retried or re-exported, NotifierFunction sees one id and publishes
once. A claim here would add nothing but a window where a crash after the claim loses the survey
(the stream retries at once, while the claim stays in progress until the invocation's deadline).
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from shared import contacts, notifications, rules
from shared.aws import messaging
from shared.batches.table_changes import TableChanges

logger = Logger()
metrics = Metrics()
sqs = boto3.client("sqs")
NOTIFICATION_QUEUE_URL = os.environ["NOTIFICATION_QUEUE_URL"]


def record_handler(record: DynamoDBRecord) -> dict | None:
    """The record's SURVEY notification, enqueued with the batch's others (enqueue_batch)."""
    contact = contacts.first_export(record)
    if contact is None or not rules.survey_due(contact):
        logger.debug("record skipped: no survey due", event_id=record.event_id)
        return None
    return notifications.survey(contact)


def enqueue_batch(batch: list[dict]) -> dict[int, Exception]:
    failures = messaging.enqueue_all(sqs, NOTIFICATION_QUEUE_URL, batch)
    enqueued = len(batch) - len(failures)
    if enqueued:
        metrics.add_metric(name="SurveysEnqueued", unit=MetricUnit.Count, value=enqueued)
    logger.info("surveys enqueued", enqueued=enqueued, failed=len(failures))
    for position, notification in enumerate(batch):
        ids = {"contact_id": notification["contact_id"]}
        if position in failures:
            logger.warning("survey not enqueued", **ids, reason=str(failures[position]))
        else:
            logger.info("survey enqueued", **ids, notification_id=notification["notification_id"])
    return failures


changes = TableChanges(record_handler, enqueue_batch)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return changes.process(event, context)
