"""The messages the functions send: notifications to NotificationQueue (SQS) and
NotificationsTopic (SNS), the ingest's continuations to IngestQueue (SQS), and the router's table
changes to ChangeTopic (SNS).

Clients are passed in, built once per execution environment by the handler. Notification
messages are JSON as shared.notifications builds them, changes are stream records; both carry
contact data, so callers log ids, never bodies.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from shared import contacts, s3_events
from shared.s3_events import FileTask

# SendMessageBatch and PublishBatch take at most 10 entries a call.
BATCH_ENTRIES = 10


class EntryFailed(Exception):
    """An entry of a batch call that the service refused (the response's Failed list)."""

    def __init__(self, code: str, sender_fault: bool):
        super().__init__(f"{code} (sender fault: {sender_fault})")
        self.code = code
        self.sender_fault = sender_fault


def enqueue_all(
    sqs_client, queue_url: str, notifications: Sequence[Mapping[str, Any]]
) -> dict[int, Exception]:
    """SendMessageBatch, 10 a call. NotificationQueue is a standard queue: no message group; the
    notifier dedupes by id. The failed notifications by position, each with its error."""
    return _in_batches(
        notifications,
        lambda entries: sqs_client.send_message_batch(QueueUrl=queue_url, Entries=entries),
        lambda notification: {"MessageBody": json.dumps(notification)},
    )


def publish_all(
    sns_client, topic_arn: str, notifications: Sequence[Mapping[str, Any]]
) -> dict[int, Exception]:
    """PublishBatch, 10 a call; the failed notifications by position, each with its error.

    NotificationsTopic is a FIFO topic: the notification_id is the deduplication id, so a
    publish repeated within SNS's 5-minute deduplication interval (a retry after a crash between
    the publish and the notifier recording it) reaches no subscriber a second time. The group is
    the contact: its notifications keep their order, others go in parallel. The `kind` attribute
    lets subscribers filter (surveys vs gift cards) without parsing."""
    return _in_batches(
        notifications,
        lambda entries: sns_client.publish_batch(
            TopicArn=topic_arn, PublishBatchRequestEntries=entries
        ),
        lambda notification: {
            "Message": json.dumps(notification),
            "MessageGroupId": notification["contact_id"],
            "MessageDeduplicationId": notification["notification_id"],
            "MessageAttributes": {
                "kind": {"DataType": "String", "StringValue": notification["kind"]}
            },
        },
    )


def _in_batches(
    items: Sequence[Mapping[str, Any]],
    call: Callable[[list[dict]], Mapping[str, Any]],
    entry: Callable[[Mapping[str, Any]], dict],
) -> dict[int, Exception]:
    """Each call's entries are Id'd by their position in `items`. A call that raises (throttled
    past boto3's retries, unreachable) fails each of its entries; the next call is still made."""
    failures: dict[int, Exception] = {}
    for start in range(0, len(items), BATCH_ENTRIES):
        positions = range(start, min(start + BATCH_ENTRIES, len(items)))
        try:
            response = call([{"Id": str(p), **entry(items[p])} for p in positions])
        except Exception as error:  # each entry's record fails with it
            failures.update(dict.fromkeys(positions, error))
            continue
        for failed in response.get("Failed", []):
            failures[int(failed["Id"])] = EntryFailed(failed["Code"], failed["SenderFault"])
    return failures


def enqueue_continuation(sqs_client, queue_url: str, task: FileTask) -> None:
    sqs_client.send_message(QueueUrl=queue_url, MessageBody=s3_events.continuation(task))


def publish_change(sns_client, topic_arn: str, record: DynamoDBRecord) -> None:
    """ChangeTopic is a standard topic: the body is the stream record exactly as the stream gave
    it (the consumers' queues subscribe with raw delivery, so a queue message is what a stream
    mapping would have handed the consumer); the attributes are what the subscriptions' filter
    policies select on (shared.contacts.change_attributes)."""
    sns_client.publish(
        TopicArn=topic_arn,
        Message=json.dumps(record.raw_event),
        MessageAttributes={
            name: {"DataType": "String", "StringValue": value}
            for name, value in contacts.change_attributes(record).items()
        },
    )
