"""GoodwillFunction: ContactsTable stream -> one gift card and one GIFT_CARD notification per
contact, ever (abandoned contacts and long waits)."""

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
from shared import contacts, gift_cards, idempotency, keys, notifications, notify, rules, store

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
sqs = boto3.client("sqs")
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
NOTIFICATION_QUEUE_URL = os.environ["NOTIFICATION_QUEUE_URL"]
GOODWILL_WAIT_SECONDS = int(
    os.environ.get("GOODWILL_WAIT_SECONDS", rules.DEFAULT_GOODWILL_WAIT_SECONDS)
)


config = idempotency.idempotency_config(
    "[kind, contact_id]",
    idempotency.ONCE_PER_CONTACT_SECONDS,
    response_hook=idempotency.count_duplicates(metrics, logger, "gift card already issued"),
)


# key_prefix keeps the key stable when code moves (the default embeds the module path).
@idempotent_function(
    data_keyword_argument="once",
    persistence_store=idempotency.persistence_layer(dynamodb),
    config=config,
    key_prefix="GoodwillFunction",
)
def issue_gift_card(*, once: dict, contact: dict) -> dict:
    """The card write is conditional, so a run after a crash (or after this key expired) finds the
    card it wrote before and enqueues the same notification again; the notifier dedupes it."""
    card, created = store.create_gift_card(
        dynamodb, CONTACTS_TABLE_NAME, gift_cards.new_gift_card(contact)
    )
    if created:
        metrics.add_metric(name="GiftCardsIssued", unit=MetricUnit.Count, value=1)
    notification = notifications.gift_card(card)
    notify.enqueue(sqs, NOTIFICATION_QUEUE_URL, notification)
    logger.info(
        "gift card notification enqueued",
        contact_id=contact["contact_id"],
        gift_card_id=card["gift_card_id"],
        card_created=created,
    )
    return {
        "gift_card_id": card["gift_card_id"],
        "notification_id": notification["notification_id"],
    }


def record_handler(record: DynamoDBRecord) -> None:
    contact = contacts.inserted_contact(record)
    if contact is None or not rules.gift_card_due(contact, GOODWILL_WAIT_SECONDS):
        logger.info("record skipped: no gift card due", event_id=record.event_id)
        return
    once = {"kind": keys.GIFT_CARD, "contact_id": contact["contact_id"]}
    issue_gift_card(once=once, contact=contact)


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict, context) -> dict:
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
