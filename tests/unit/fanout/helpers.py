"""Driving the fan-out handlers the way their event source mappings would."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emulator.services import ses
from harness.events import sqs_event
from harness.in_process import ACCOUNT, REGION, client
from tests.unit.fanout.fanout_template import resources

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


MAIL_STACK = "unit"  # the stack name SES's resources are named after
MAIL_IDENTITY = "example.com"


@dataclass
class Mail:
    """The last hop's queues: MailQueue (FIFO, NotificationsTopic's subscription), its
    dead-letter queue and MailDeliveryDeadLetterQueue (what the subscription could not deliver),
    MailEventsQueue (what MailEventsRule hands on) and its dead-letter queue."""

    queue_url: str
    dead_letter_queue_url: str
    delivery_dead_letter_queue_url: str
    events_queue_url: str
    events_dead_letter_queue_url: str
    queue_arn: str


def create_mail(stack, monkeypatch) -> Mail:
    """The stack's SES resources as template.yaml declares them, made with the local stack's
    CloudFormation models (the configuration set's events to the default bus), MailEventsRule
    (its dead-letter queue MailEventsDeadLetterQueue, no retries) and the last hop's queues with
    their redrive policies; the mail sender's environment set.
    The inbox starts empty."""
    ses.reset()
    config_set = f"{MAIL_STACK}-mail"
    ses.EmailIdentityModel.create(
        {"EmailIdentity": MAIL_IDENTITY}, ACCOUNT, REGION, MAIL_IDENTITY, "Id"
    )
    ses.ConfigurationSetModel.create({"Name": config_set}, ACCOUNT, REGION, config_set, "Set")
    ses.EventDestinationModel.create(
        {
            "ConfigurationSetName": config_set,
            "EventDestination": {
                "Name": "events",
                "Enabled": True,
                "MatchingEventTypes": ["send", "delivery", "bounce", "complaint"],
                "EventBridgeDestination": {
                    "EventBusArn": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"
                },
            },
        },
        ACCOUNT,
        REGION,
        "events",
        "Destination",
    )
    for suffix, text in (
        ("survey", "How did we do on {{contact_id}}?"),
        ("gift-card", "Code {{gift_card_code}}: {{amount}} {{currency}} ({{contact_id}})"),
    ):
        ses.TemplateModel.create(
            {
                "Template": {
                    "TemplateName": f"{MAIL_STACK}-{suffix}",
                    "SubjectPart": suffix,
                    "TextPart": text,
                    "HtmlPart": f"<p>{text}</p>",
                }
            },
            ACCOUNT,
            REGION,
            suffix,
            "Template",
        )
    mail_queue, mail_dead_letters = _queue_with_dead_letters(stack, "MailQueue", "mail", fifo=True)
    undelivered = stack.sqs.create_queue(
        QueueName="mail-delivery-dlq.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    events_queue, events_dead_letters = _queue_with_dead_letters(
        stack, "MailEventsQueue", "mail-events", fifo=False
    )
    events = client("events")
    events.put_rule(
        Name="mail-events",
        EventPattern=json.dumps(
            {
                "source": ["aws.ses"],
                "detail": {"mail": {"tags": {"ses:configuration-set": [config_set]}}},
            }
        ),
    )
    events.put_targets(  # what the rule cannot deliver goes to the DLQ at once
        Rule="mail-events",
        Targets=[
            {
                "Id": "queue",
                "Arn": queue_arn(stack, events_queue),
                "RetryPolicy": {"MaximumRetryAttempts": 0},
                "DeadLetterConfig": {"Arn": queue_arn(stack, events_dead_letters)},
            }
        ],
    )
    for name, value in {
        "MAIL_FROM_ADDRESS": f"surveys@{MAIL_IDENTITY}",
        "MAIL_IDENTITY_ARN": f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/{MAIL_IDENTITY}",
        "MAIL_CONFIGURATION_SET": config_set,
        "MAIL_TEMPLATE_PREFIX": MAIL_STACK,
        "MAIL_EVENTS_DEAD_LETTER_QUEUE_URL": events_dead_letters,
    }.items():
        monkeypatch.setenv(name, value)
    return Mail(
        mail_queue,
        mail_dead_letters,
        undelivered,
        events_queue,
        events_dead_letters,
        queue_arn(stack, mail_queue),
    )


def _queue_with_dead_letters(stack, logical_id: str, name: str, fifo: bool) -> tuple[str, str]:
    """A queue and its dead-letter queue, redriven after the receives template.yaml gives it."""
    suffix, attributes = (".fifo", {"FifoQueue": "true"}) if fifo else ("", {})
    dead = stack.sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=attributes)[
        "QueueUrl"
    ]
    redrive = {
        "deadLetterTargetArn": queue_arn(stack, dead),
        "maxReceiveCount": max_receives(logical_id),
    }
    url = stack.sqs.create_queue(
        QueueName=f"{name}{suffix}",
        Attributes=attributes | {"RedrivePolicy": json.dumps(redrive)},
    )["QueueUrl"]
    return url, dead


def max_receives(queue: str) -> int:
    """The receives after which template.yaml's queue ``queue`` (a logical id) dead-letters."""
    return resources()[queue]["Properties"]["RedrivePolicy"]["maxReceiveCount"]
