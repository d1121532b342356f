"""MailSenderFunction: MailQueue (NotificationsTopic's FIFO subscription) -> one e-mail per
notification_id, sent with SES SendEmail (the stack's template of its kind, its configuration set,
tagged with the notification id).

SES takes no idempotency token, so the claim on the notification_id (shared.aws.send_claims) is
settled by SES's own record when it is in doubt: a claim found in progress (a crash or timeout
after the claim, before or after SendEmail) is completed without sending if SES's Send event for
the notification was recorded (MAIL_SENT, written by MailEventsFunction), waits for it for
MAIL_SEND_EVENT_WAIT_SECONDS after the claim (template parameter MailSendEventWaitSeconds), and
only then sends again, unless SES events wait unrecorded in MailEventsDeadLetterQueue (one may be
this notification's Send event). A SendEmail whose answer is lost (a 5xx, a timeout) is in doubt
the same way: never retried by the SDK, its claim kept. A 4xx is SES's refusal: nothing was sent,
the claim is released. docs/design.md says what this holds.

A notification without an address, or to an address that bounced for good, complained or that SES
suppresses (MAIL_UNDELIVERABLE), is recorded under its claim and counted, never sent nor retried.
A message that is not a valid notification fails every time and ends in MailDeadLetterQueue.
Addresses are never logged.
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.config import Config
from botocore.exceptions import ClientError
from shared import idempotency, mail, notifications
from shared.aws import mail as ses_mail
from shared.aws.send_claims import Claim, SendClaims, SendUnconfirmed
from shared.mail import MailOutcome

logger = Logger()
metrics = Metrics()
# SES has no idempotency token: the SDK's own retry of a SendEmail whose answer was lost (a 5xx,
# a timeout, a dropped connection) may send it twice. One attempt; the claim decides the next.
sesv2 = boto3.client("sesv2", config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
dynamodb = boto3.client("dynamodb")
sqs = boto3.client("sqs")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
MAIL_FROM_ADDRESS = os.environ["MAIL_FROM_ADDRESS"]
MAIL_IDENTITY_ARN = os.environ["MAIL_IDENTITY_ARN"]
MAIL_CONFIGURATION_SET = os.environ["MAIL_CONFIGURATION_SET"]
MAIL_TEMPLATE_PREFIX = os.environ["MAIL_TEMPLATE_PREFIX"]
MAIL_EVENTS_DEAD_LETTER_QUEUE_URL = os.environ["MAIL_EVENTS_DEAD_LETTER_QUEUE_URL"]
MAIL_SEND_EVENT_WAIT_SECONDS = int(
    os.environ.get("MAIL_SEND_EVENT_WAIT_SECONDS", idempotency.MAIL_SEND_EVENT_WAIT_SECONDS)
)

claims = SendClaims(
    idempotency.persistence_layer(dynamodb),
    idempotency.MAIL.config(),
    key_prefix=idempotency.MAIL.key_prefix,
    confirmed=lambda notification: (
        ses_mail.sent_record(dynamodb, CONTACTS_TABLE_NAME, notification["notification_id"])
        is not None
    ),
    evidence_held=lambda: ses_mail.sending_events_held(sqs, MAIL_EVENTS_DEAD_LETTER_QUEUE_URL),
    wait_seconds=MAIL_SEND_EVENT_WAIT_SECONDS,
)
METRIC = {
    MailOutcome.SENT: "EmailsSent",
    MailOutcome.NO_ADDRESS: "EmailsWithoutAddress",
    MailOutcome.UNDELIVERABLE: "EmailsToUndeliverableAddress",
}


def record_handler(record: SQSRecord) -> None:
    try:
        notification = notifications.parse(record.body)
    except notifications.InvalidNotification as poison:
        logger.error("invalid notification", message_id=record.message_id, reason=str(poison))
        raise
    notification_id = notification["notification_id"]
    letter = mail.letter(notification)
    outcome = MailOutcome.SENT
    if letter is None:
        outcome = MailOutcome.NO_ADDRESS
    elif ses_mail.undeliverable(dynamodb, CONTACTS_TABLE_NAME, letter.recipient):
        outcome = MailOutcome.UNDELIVERABLE
    result = {"notification_id": notification_id, "outcome": outcome.value}
    try:
        claim = claims.claim(notification, result)
    except SendUnconfirmed as in_doubt:  # asked again after the queue's visibility timeout
        logger.warning("e-mail in doubt", notification_id=notification_id, reason=str(in_doubt))
        raise
    if claim in (Claim.DONE, Claim.CONFIRMED):
        metrics.add_metric(name="DuplicatesSuppressed", unit=MetricUnit.Count, value=1)
        logger.info("e-mail sent before", notification_id=notification_id, claim=claim.name)
        return
    if outcome is MailOutcome.SENT:
        try:
            message_id = ses_mail.send(
                sesv2,
                letter,
                from_address=MAIL_FROM_ADDRESS,
                identity_arn=MAIL_IDENTITY_ARN,
                configuration_set=MAIL_CONFIGURATION_SET,
                template_prefix=MAIL_TEMPLATE_PREFIX,
            )
        except ClientError as error:
            if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500) >= 500:
                raise  # SES may have sent it: the claim stays in doubt, its Send event decides
            claims.release(notification, error)  # SES answered no: nothing sent, claimed anew
            raise
        result["message_id"] = message_id
    claims.done(notification, result)
    metrics.add_metric(name=METRIC[outcome], unit=MetricUnit.Count, value=1)
    logger.info(
        "notification mailed" if outcome is MailOutcome.SENT else "notification not mailed",
        notification_id=notification_id,
        kind=notification["kind"],
        outcome=outcome.value,
        claim=claim.name,
    )


processor = SqsFifoPartialProcessor()


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
