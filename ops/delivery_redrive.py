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

A message that holds no stream record (no notification) is left in the DLQ and reported (by
message id and reason, never its content: it carries contact data), and the command exits 1.
Each message is sent before it is deleted: an interruption between the two sends it again on the
next redrive, which the consumers (the mail sender) take as the duplicate it is. Ctrl-C stops;
what moved stays moved.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from shared import notifications
from shared.batches.table_changes import NotAStreamRecord, stream_record

from ops.errors import OpsError
from ops.fan_out import FanOutMode
from ops.stack import MAIL_DELIVERIES, Stack

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
    destination = stack.delivery_dead_letter_queues.get(queue)
    if destination is None:
        raise OpsError(f"{queue} is not a delivery dead-letter queue of this stack")
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
        moved += move_batch(stack, queue, fresh, stack.outputs[destination], kept)
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
        "to": destination.removesuffix("Url"),
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
    if sending:
        stack.sqs.delete_message_batch(
            QueueUrl=stack.outputs[f"{queue}Url"],
            Entries=[
                {"Id": entry_id, "ReceiptHandle": message["ReceiptHandle"]}
                for entry_id, message in sending.items()
            ],
        )
    return len(sending)
