"""Amazon SES (API v2) and the table's record of what SES did with the application's e-mails.

- ``send``: one SendEmail of a letter (shared.mail) with the stack's template of its kind, through
  the stack's configuration set (which publishes SES's sending events), from the stack's sender
  identity, tagged with the notification id.
- MAIL_SENT items (``MAIL_SENT#<notification_id>``): written by MailEventsFunction from SES's
  Send event for a notification; the mail sender reads one when its claim is in doubt.
- ``sending_events_held``: whether SES events wait unrecorded in MailEventsDeadLetterQueue (the
  recorder gave up on them, or the rule could not deliver them): one of them may be the Send event
  a claim in doubt waits for.
- MAIL_UNDELIVERABLE items (``MAIL_ADDRESS#<digest of the address>``): an address that bounced
  for good, that SES suppresses or that complained; the mail sender sends it nothing more. Keyed
  by a digest: the table learns no address it did not hold.

Clients are passed in, built once per execution environment by the handler. Nothing here logs:
the letters hold addresses.
"""

import contextlib
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared import mail

MAIL_SENT = "MAIL_SENT"
MAIL_UNDELIVERABLE = "MAIL_UNDELIVERABLE"
# A MAIL_SENT item settles a claim in doubt: kept as long as a notification may wait in its
# queues and their dead-letter queue (14 days), and then some.
SENT_RECORD_SECONDS = 30 * 24 * 3600
# An undeliverable address is remembered as long as a contact (shared.model.REMEMBERED).
UNDELIVERABLE_RECORD_SECONDS = 400 * 24 * 3600


def send(
    sesv2_client,
    letter: mail.Letter,
    *,
    from_address: str,
    identity_arn: str,
    configuration_set: str,
    template_prefix: str,
) -> str:
    """SendEmail; SES's message id. Raises what the client raises (a ClientError: SES refused,
    nothing sent; anything else, a timeout: it may have been sent)."""
    response = sesv2_client.send_email(
        FromEmailAddress=from_address,
        FromEmailAddressIdentityArn=identity_arn,
        Destination={"ToAddresses": [letter.recipient]},
        Content={
            "Template": {
                "TemplateName": f"{template_prefix}-{letter.template}",
                "TemplateData": json.dumps(letter.data),
            }
        },
        ConfigurationSetName=configuration_set,
        EmailTags=[{"Name": mail.NOTIFICATION_TAG, "Value": letter.tag}],
    )
    return response["MessageId"]


def sent_key(notification_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"{MAIL_SENT}#{notification_id}"}, "sk": {"S": MAIL_SENT}}


def address_key(address: str) -> dict[str, dict[str, str]]:
    digest = mail.address_key(address)
    return {"pk": {"S": f"MAIL_ADDRESS#{digest}"}, "sk": {"S": MAIL_UNDELIVERABLE}}


def sent_record(dynamodb_client, table_name: str, notification_id: str) -> dict | None:
    """The MAIL_SENT item of a notification (SES accepted it), None if SES's Send event for it
    has not been recorded."""
    item = dynamodb_client.get_item(
        TableName=table_name, Key=sent_key(notification_id), ConsistentRead=True
    ).get("Item")
    return _plain(item) if item else None


def undeliverable(dynamodb_client, table_name: str, address: str) -> str | None:
    """Why an address is never sent to again ("bounce", "suppressed", "complaint"), or None."""
    item = dynamodb_client.get_item(
        TableName=table_name, Key=address_key(address), ConsistentRead=True
    ).get("Item")
    return item["reason"]["S"] if item else None


def record(dynamodb_client, table_name: str, event: mail.SendingEvent) -> None:
    """What a sending event tells the sender: a Send event its MAIL_SENT item (the first one
    kept: SES sends one per message), an address gone for good its MAIL_UNDELIVERABLE item."""
    now = int(time.time())
    recorded_at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if event.event_type == mail.SEND:
        # The first Send event kept: a later delivery of it finds it recorded.
        with contextlib.suppress(dynamodb_client.exceptions.ConditionalCheckFailedException):
            dynamodb_client.put_item(
                TableName=table_name,
                Item={
                    **sent_key(event.notification_id),
                    "type": {"S": MAIL_SENT},
                    "notification_id": {"S": event.notification_id},
                    "message_id": {"S": event.message_id},
                    "sent_at": {"S": event.sent_at},
                    "recorded_at": {"S": recorded_at},
                    "expires_at": {"N": str(now + SENT_RECORD_SECONDS)},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
    for address in event.undeliverable:
        dynamodb_client.put_item(
            TableName=table_name,
            Item={
                **address_key(address),
                "type": {"S": MAIL_UNDELIVERABLE},
                "reason": {"S": event.reason},
                "notification_id": {"S": event.notification_id},
                "recorded_at": {"S": recorded_at},
                "expires_at": {"N": str(now + UNDELIVERABLE_RECORD_SECONDS)},
            },
        )


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: (value["S"] if "S" in value else int(value["N"])) for name, value in item.items()}


# What a queue holds, visible or not: a message being redriven is still held.
HELD = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")


def sending_events_held(sqs_client, dead_letter_queue_url: str) -> bool:
    attributes = sqs_client.get_queue_attributes(
        QueueUrl=dead_letter_queue_url, AttributeNames=list(HELD)
    )["Attributes"]
    return any(int(attributes[name]) for name in HELD)
