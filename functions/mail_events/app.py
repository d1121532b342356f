"""MailEventsFunction: SES's sending events for the stack's configuration set (EventBridge rule
MailEventsRule -> MailEventsQueue) -> the table's record of them (shared.aws.mail).

A Send event becomes the notification's MAIL_SENT item: the evidence MailSenderFunction looks
for before it sends a notification whose claim is in doubt. A permanent bounce (SES's suppression
list included) or a complaint makes the address MAIL_UNDELIVERABLE: nothing more is sent to it.
Each is counted, with the event's lag behind SES accepting the message (SendEventLagSeconds, what
bounds the mail sender's wait). Recording is idempotent: EventBridge delivers at least once.
"""

import json
import os
import time
from datetime import datetime

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from shared import mail
from shared.aws import mail as ses_mail

logger = Logger()
metrics = Metrics()
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
METRIC = {
    "bounce": "EmailsBounced",
    "suppressed": "EmailsSuppressed",
    "complaint": "EmailsComplained",
}


def record_handler(record: SQSRecord) -> None:
    event = mail.sending_event(json.loads(record.body)["detail"])
    if event is None:
        logger.warning("sending event of no notification", message_id=record.message_id)
        return
    ses_mail.record(dynamodb, CONTACTS_TABLE_NAME, event)
    if event.event_type == mail.SEND:
        lag = time.time() - datetime.fromisoformat(event.sent_at).timestamp()
        metrics.add_metric(name="SendEventLagSeconds", unit=MetricUnit.Seconds, value=lag)
    elif event.event_type == mail.DELIVERY:
        metrics.add_metric(name="EmailsDelivered", unit=MetricUnit.Count, value=1)
    if event.reason:
        metrics.add_metric(name=METRIC[event.reason], unit=MetricUnit.Count, value=1)
    logger.info(
        "sending event recorded",
        event_type=event.event_type,
        notification_id=event.notification_id,
        reason=event.reason or None,
    )


processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
