"""Driving the fan-out handlers the way their event source mappings would."""

import json

from harness.events import sqs_event


def queue_arn(stack, queue_url: str) -> str:
    return stack.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]


def enqueued(stack) -> list[dict]:
    """Notifications in NotificationQueue, removed from it."""
    return [json.loads(m["Body"]) for m in stack.drain(stack.notification_queue_url)]


def notify_all(stack, notifier, lambda_context, deliveries: int = 1) -> list[dict]:
    """Deliver every queued notification to NotifierFunction (each `deliveries` times, as an
    at-least-once queue may) and return what reached the topic."""
    messages = stack.drain(stack.notification_queue_url)
    event = sqs_event(messages * deliveries, queue_arn(stack, stack.notification_queue_url))
    if event["Records"]:
        response = notifier.lambda_handler(event, lambda_context)
        assert response["batchItemFailures"] == []
    return stack.published()
