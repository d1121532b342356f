"""The messages the functions send: notifications to NotificationQueue (SQS) and
NotificationsTopic (SNS), the ingest's continuations to IngestQueue (SQS), and the router's table
changes to ChangeTopic (SNS).

Clients are passed in, built once per execution environment by the handler. Notification
messages are JSON as shared.notifications builds them, changes are stream records; both carry
contact data, so callers log ids, never bodies.
"""

import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from shared import contacts, s3_events
from shared.s3_events import FileTask


def enqueue(sqs_client, queue_url: str, notification: Mapping[str, Any]) -> None:
    """NotificationQueue is a standard queue: no message group; the notifier dedupes by id."""
    sqs_client.send_message(QueueUrl=queue_url, MessageBody=json.dumps(notification))


def publish(sns_client, topic_arn: str, notification: Mapping[str, Any]) -> None:
    """NotificationsTopic is a FIFO topic: the notification_id is the deduplication id, so a
    publish repeated within SNS's 5-minute deduplication interval (a retry after a crash between
    the publish and the notifier recording it) reaches no subscriber a second time. The group is
    the contact: its notifications keep their order, others go in parallel. The `kind` attribute
    lets subscribers filter (surveys vs gift cards) without parsing."""
    sns_client.publish(
        TopicArn=topic_arn,
        Message=json.dumps(notification),
        MessageGroupId=notification["contact_id"],
        MessageDeduplicationId=notification["notification_id"],
        MessageAttributes={"kind": {"DataType": "String", "StringValue": notification["kind"]}},
    )


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
