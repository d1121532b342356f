"""The notification adapters: the consumers' queue (SQS) and the notifications topic (SNS).

Clients are passed in, built once per execution environment by the handler. Messages are JSON as
shared.notifications builds them; they carry contact data, so callers log ids, never bodies.
"""

import json
from collections.abc import Mapping
from typing import Any


def enqueue(sqs_client, queue_url: str, notification: Mapping[str, Any]) -> None:
    """NotificationQueue is a standard queue: no message group; the notifier dedupes by id."""
    sqs_client.send_message(QueueUrl=queue_url, MessageBody=json.dumps(notification))


def publish(sns_client, topic_arn: str, notification: Mapping[str, Any]) -> None:
    """The `kind` attribute lets subscribers filter (surveys vs gift cards) without parsing."""
    sns_client.publish(
        TopicArn=topic_arn,
        Message=json.dumps(notification),
        MessageAttributes={"kind": {"DataType": "String", "StringValue": notification["kind"]}},
    )
