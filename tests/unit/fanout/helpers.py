"""Driving the fan-out handlers the way their event source mappings would."""

import json
from collections.abc import Callable
from pathlib import Path

from harness.events import sqs_event

EVENTS = Path(__file__).resolve().parents[3] / "events"
# The sample stream records (events/dynamodb-*.json), each a change a consumer may select.
SAMPLES = [
    json.loads(path.read_text())["Records"][0] for path in sorted(EVENTS.glob("dynamodb-*.json"))
]


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


class Refusal:
    """Registered on a client until cleared: see refuse_entries."""

    def __init__(self, client, refused: Callable[[dict], bool]):
        self._client, self._refused = client, refused
        self._event = f"before-parameter-build.{client.meta.service_model.endpoint_prefix}"
        client.meta.events.register(self._event, self._invalidate)

    def _invalidate(self, params, model, **kwargs) -> None:
        for entry in params.get("Entries", []) + params.get("PublishBatchRequestEntries", []):
            if self._refused(json.loads(entry.get("MessageBody") or entry["Message"])):
                entry.update(INVALID_ENTRY[model.name])

    def clear(self) -> None:
        self._client.meta.events.unregister(self._event, self._invalidate)


# What makes the service refuse one entry of a batch call (in its Failed list) while it takes the
# others: a parameter value out of its range.
INVALID_ENTRY = {
    "SendMessageBatch": {"DelaySeconds": 901},
    "PublishBatch": {"MessageStructure": "not-json"},
}


def refuse_entries(client, refused: Callable[[dict], bool]) -> Refusal:
    """Until cleared, each entry of the client's SendMessageBatch / PublishBatch calls whose
    notification `refused` picks is one the service refuses, as it refuses an invalid entry: the
    call succeeds and names that entry in its Failed list."""
    return Refusal(client, refused)
