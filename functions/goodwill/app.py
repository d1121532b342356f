"""GoodwillFunction: ContactsTable changes -> one gift card and its GIFT_CARD notification per
contact, ever (abandoned contacts and long waits, by a contact's first export: a re-export gets
nothing new), a batch's notifications enqueued in SendMessageBatch calls. The changes arrive
from the table's stream or, in fan-out modes pipe and router (template parameter FanOut), from
GoodwillQueue as the same stream records (shared.batches.table_changes).

No idempotency store here: the card's id is derived from the contact_id and written with a
conditional put, so every delivery, retry or re-export finds the one card; its notification id is
derived from (GIFT_CARD, contact_id), so NotifierFunction publishes it once however often it is
enqueued. A claim here would add nothing but a window where a crash after the claim loses the card
(the stream retries at once, while the claim stays in progress until the invocation's deadline).
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from shared import contacts, gift_cards, notifications, rules
from shared.aws import messaging, table
from shared.batches.table_changes import TableChanges

logger = Logger()
metrics = Metrics()
sqs = boto3.client("sqs")
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
NOTIFICATION_QUEUE_URL = os.environ["NOTIFICATION_QUEUE_URL"]
GOODWILL_WAIT_SECONDS = int(
    os.environ.get("GOODWILL_WAIT_SECONDS", rules.DEFAULT_GOODWILL_WAIT_SECONDS)
)


def record_handler(record: DynamoDBRecord) -> dict | None:
    """The record's gift card, issued now (once ever), and its GIFT_CARD notification, enqueued with
    the batch's others (enqueue_batch)."""
    contact = contacts.first_export(record)
    if contact is None or not rules.gift_card_due(contact, GOODWILL_WAIT_SECONDS):
        logger.debug("record skipped: no gift card due", event_id=record.event_id)
        return None
    card, created = table.create_gift_card(
        dynamodb, CONTACTS_TABLE_NAME, gift_cards.new_gift_card(contact)
    )
    if created:
        metrics.add_metric(name="GiftCardsIssued", unit=MetricUnit.Count, value=1)
        logger.info(
            "gift card issued", contact_id=card["contact_id"], gift_card_id=card["gift_card_id"]
        )
    return notifications.gift_card(card, contact.get("email"))


def enqueue_batch(batch: list[dict]) -> dict[int, Exception]:
    failures = messaging.enqueue_all(sqs, NOTIFICATION_QUEUE_URL, batch)
    enqueued = len(batch) - len(failures)
    logger.info("gift card notifications enqueued", enqueued=enqueued, failed=len(failures))
    for position, notification in enumerate(batch):
        ids = {
            "contact_id": notification["contact_id"],
            "gift_card_id": notification["gift_card_id"],
        }
        if position in failures:
            logger.warning(
                "gift card notification not enqueued", **ids, reason=str(failures[position])
            )
        else:
            logger.info(
                "gift card notification enqueued",
                **ids,
                notification_id=notification["notification_id"],
            )
    return failures


changes = TableChanges(record_handler, enqueue_batch)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return changes.process(event, context)
