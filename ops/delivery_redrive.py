"""`ops dlq redrive <X>ChangeDeliveryDeadLetterQueue` (fan-out modes but lambda) and `ops dlq
redrive MailDeliveryDeadLetterQueue`: what the bus or a topic could not deliver to a queue, sent to
that queue as it would have received it, then deleted from the DLQ, with a progress bar on stderr.

SQS's own redrive (StartMessageMoveTask) cannot do it: these DLQs are no queue's redrive target,
so their messages have no source queue to go back to, and in pipe mode a message is not what
the consumer's queue takes:

- pipe: EventBridge puts the event itself in the rule target's DLQ (with the RULE_ARN,
  TARGET_ARN, ERROR_CODE, ERROR_MESSAGE, EXHAUSTED_RETRY_CONDITION and RETRY_ATTEMPTS
  attributes). The queue gets its ``detail``, what the target's InputPath ``$.detail`` delivers:
  the stream record.
- router, pipe-topic: SNS puts the message in the subscription's DLQ as the raw delivery would
  have sent it: the stream record, sent on as it is.
- MailDeliveryDeadLetterQueue: NotificationsTopic's raw delivery, the notification, sent on to
  MailQueue (FIFO) in its contact's group with its notification id as deduplication id, as the
  notifier published it; the mail sender's claim decides whether it is mailed.

And `ops dlq redrive MailEventsDeadLetterQueue`: SES's sending events MailEventsFunction gave up
on (or MailEventsRule could not deliver), recorded in the table by ops itself with the layer's
code the function runs (shared.aws.mail.record), then deleted. Moved back to MailEventsQueue
instead, a Send event would for a while be in neither place a mail sender in doubt looks (the
table's MAIL_SENT, this DLQ's count), up to MailEventsQueue's 5 receives if the recorder still
fails, and the sender, past its wait, would mail the notification again.

A message that holds no stream record (no notification, no sending event) is left in the DLQ and
reported (by message id and reason, never its content: it carries contact data), and the command
exits 1. Each message is sent (recorded) before it is deleted: an interruption between the two
sends it again on the next redrive, which the consumers (the mail sender, the record's condition)
take as the duplicate it is. Ctrl-C stops; what moved stays moved.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from shared import mail, notifications
from shared.aws import mail as ses_mail
from shared.batches.table_changes import NotAStreamRecord, stream_record

from ops.errors import OpsError
from ops.fan_out import FanOutMode
from ops.stack import MAIL_DELIVERIES, MAIL_EVENTS_DLQ, Stack

BATCH = 10  # SQS's most per receive, send and delete
# A message being moved is hidden this long from another redrive running at the same time; a
# kept one is hidden for the rest of this run, then made visible again.
VISIBILITY_SECONDS = 60


def delivered_change(mode: FanOutMode, body: str) -> str:
    """What the consumer's queue takes for one message of its delivery DLQ: the stream record's
    JSON (the topic's message, or the bus event's detail). NotAStreamRecord (its reason names what
    is wrong) when the message holds none."""
    if mode.change_topic:
        stream_record(body)
        return body
    try:
        event = json.loads(body)
    except (ValueError, RecursionError):
        raise NotAStreamRecord("body is not JSON") from None
    if not isinstance(event, dict) or "detail" not in event:
        raise NotAStreamRecord("body is not an EventBridge event (no detail)")
    change = json.dumps(event["detail"])
    stream_record(change)
    return change


def delivered_notification(body: str) -> dict[str, str]:
    """MailQueue's entry for one message of MailDeliveryDeadLetterQueue (InvalidNotification
    when it holds none)."""
    notification = notifications.parse(body)
    return {
        "MessageBody": body,
        "MessageGroupId": notification["contact_id"],
        "MessageDeduplicationId": notification["notification_id"],
    }


def delivered_entry(stack: Stack, queue: str, body: str) -> dict[str, str]:
    """What the destination of ``queue`` takes for one of its messages."""
    if queue in MAIL_DELIVERIES:
        return delivered_notification(body)
    return {"MessageBody": delivered_change(stack.fan_out_mode, body)}


def redrive(
    stack: Stack,
    queue: str,
    rate: int | None,
    *,
    progress: Callable[[int, int], None] | None,
) -> tuple[dict[str, Any], str, bool]:
    """``progress(done, total)`` is called after each batch (None: quiet)."""
    if queue == MAIL_EVENTS_DLQ:
        destination = "ContactsTableName"

        def handle(messages: list[dict], kept: dict[str, tuple[str, str]]) -> int:
            return record_batch(stack, messages, kept)
    else:
        destination = stack.delivery_dead_letter_queues.get(queue)
        if destination is None:
            raise OpsError(f"{queue} is not a delivery dead-letter queue of this stack")

        def handle(messages: list[dict], kept: dict[str, tuple[str, str]]) -> int:
            return move_batch(stack, queue, messages, stack.outputs[destination], kept)

    source_url = stack.outputs[f"{queue}Url"]
    attributes = stack.queue_attributes(f"{queue}Url", "ApproximateNumberOfMessages")
    to_move = int(attributes["ApproximateNumberOfMessages"])
    moved = 0
    kept: dict[str, tuple[str, str]] = {}  # message id -> why it stays, its receipt handle
    started = time.monotonic()
    while True:
        messages = stack.sqs.receive_message(
            QueueUrl=source_url,
            MaxNumberOfMessages=BATCH,
            VisibilityTimeout=VISIBILITY_SECONDS,
            WaitTimeSeconds=0 if stack.is_local else 1,
        ).get("Messages", [])
        fresh = [m for m in messages if m["MessageId"] not in kept]
        if not fresh:
            break
        moved += handle(fresh, kept)
        if progress:
            progress(moved, max(to_move, moved + len(kept)))
        if rate is not None:  # at most `rate` messages a second, on average
            time.sleep(max(0.0, moved / rate - (time.monotonic() - started)))
    for _, handle in kept.values():  # hidden while this run went on; visible for the next
        stack.sqs.change_message_visibility(
            QueueUrl=source_url, ReceiptHandle=handle, VisibilityTimeout=0
        )
    if progress:
        print(file=sys.stderr)
    data = {
        "queue": queue,
        "to": destination.removesuffix("Url").removesuffix("Name"),
        "status": "COMPLETED" if not kept else "INCOMPLETE",
        "moved": moved,
        "to_move": to_move,
        "kept": [{"message_id": mid, "reason": why} for mid, (why, _) in sorted(kept.items())],
    }
    text = f"{queue}: {moved} messages sent to {data['to']}"
    if kept:
        text += f"; {len(kept)} kept in the DLQ:\n" + "\n".join(
            f"  {item['message_id']}: {item['reason']}" for item in data["kept"]
        )
    return data, text, not kept


def handles(stack: Stack, queue: str) -> bool:
    """Whether ``queue``'s redrive is this module's (no SQS move task)."""
    return queue == MAIL_EVENTS_DLQ or queue in stack.delivery_dead_letter_queues


def record_batch(stack: Stack, messages: list[dict], kept: dict[str, tuple[str, str]]) -> int:
    """Record one received batch of MailEventsDeadLetterQueue's events as MailEventsFunction
    does (an event of no notification of ours has nothing to record), then delete them from the
    DLQ; how many went. A message that is no sending event is added to ``kept``."""
    done = []
    for message in messages:
        try:
            event = mail.sending_event(json.loads(message["Body"])["detail"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            kept[message["MessageId"]] = ("not an SES sending event", message["ReceiptHandle"])
            continue
        if event is not None:
            ses_mail.record(stack.dynamodb, stack.contacts_table, event)
        done.append(message)
    delete(stack, MAIL_EVENTS_DLQ, done)
    return len(done)


def delete(stack: Stack, queue: str, messages: list[dict]) -> None:
    """Delete what was sent on (recorded) from the DLQ ``queue``."""
    if messages:
        stack.sqs.delete_message_batch(
            QueueUrl=stack.outputs[f"{queue}Url"],
            Entries=[
                {"Id": str(n), "ReceiptHandle": message["ReceiptHandle"]}
                for n, message in enumerate(messages)
            ],
        )


def move_batch(
    stack: Stack,
    queue: str,
    messages: list[dict],
    destination_url: str,
    kept: dict[str, tuple[str, str]],
) -> int:
    """Send one received batch of ``queue`` on and delete it from the DLQ; how many moved. A
    message with nothing to deliver, or one the destination refused, is added to ``kept``."""
    entries, sending = [], {}
    for message in messages:
        try:
            entry = delivered_entry(stack, queue, message["Body"])
        except (NotAStreamRecord, notifications.InvalidNotification) as unreadable:
            kept[message["MessageId"]] = (str(unreadable), message["ReceiptHandle"])
            continue
        entry_id = str(len(entries))
        entries.append({"Id": entry_id, **entry})
        sending[entry_id] = message
    if not entries:
        return 0
    sent = stack.sqs.send_message_batch(QueueUrl=destination_url, Entries=entries)
    for failed in sent.get("Failed", []):
        message = sending.pop(failed["Id"])
        kept[message["MessageId"]] = (f"not sent: {failed['Code']}", message["ReceiptHandle"])
    delete(stack, queue, list(sending.values()))
    return len(sending)
