"""`ops dlq redrive <queue>`: SQS's own redrive (StartMessageMoveTask) of a dead-letter queue back
to the queue each message came from, followed to its end (ListMessageMoveTasks) with a progress
bar on stderr. Ctrl-C cancels the task (CancelMessageMoveTask): what moved stays moved.

The queues are the stack's DLQs by their outputs (Stack.dead_letter_queues):
IngestDeadLetterQueue, NotificationDeadLetterQueue, MailDeadLetterQueue (FIFO: its messages go
back to MailQueue, where the mail sender's claims decide again) and MailEventsDeadLetterQueue
(SES's sending events MailEventsFunction failed on: ops/delivery_redrive.py records them itself)
always, and in fan-out modes pipe and router each consumer's <X>DeadLetterQueue, whose messages
are the stream records the consumer failed on: redriven, the consumer gets them again from its
queue.
MailDeliveryDeadLetterQueue (what NotificationsTopic could not deliver to MailQueue) and each
consumer's <X>ChangeDeliveryDeadLetterQueue (what the bus or the topic could not deliver to that
queue) are no queue's redrive target: ops/delivery_redrive.py sends their messages on by hand."""

from __future__ import annotations

import sys
import time
from typing import Any

from ops import delivery_redrive
from ops.errors import OpsError
from ops.stack import Stack

FINAL = ("COMPLETED", "CANCELLED", "FAILED")
POLL_SECONDS = 0.5


def redrive(
    stack: Stack, queue: str, rate: int | None, *, progress: bool
) -> tuple[dict[str, Any], str, bool]:
    if queue not in stack.dead_letter_queues:
        raise OpsError(
            f"unknown dead-letter queue {queue!r}: {' | '.join(stack.dead_letter_queues)}"
        )
    if rate is not None and not 1 <= rate <= 500:
        raise OpsError("--rate must be 1-500 messages per second")
    if delivery_redrive.handles(stack, queue):  # sent on or recorded by hand
        return delivery_redrive.redrive(stack, queue, rate, progress=bar if progress else None)
    source_arn = stack.queue_arn(f"{queue}Url")
    request: dict[str, Any] = {"SourceArn": source_arn}
    if rate is not None:
        request["MaxNumberOfMessagesPerSecond"] = rate
    handle = stack.sqs.start_message_move_task(**request)["TaskHandle"]
    try:
        task = follow(stack, source_arn, progress)
    except KeyboardInterrupt:
        stack.sqs.cancel_message_move_task(TaskHandle=handle)
        raise
    data = {
        "queue": queue,
        "status": task["Status"],
        "moved": task.get("ApproximateNumberOfMessagesMoved", 0),
        "to_move": task.get("ApproximateNumberOfMessagesToMove", 0),
        "failure_reason": task.get("FailureReason"),
    }
    text = f"{queue}: {data['status']}, {data['moved']} of {data['to_move']} messages moved back"
    if data["failure_reason"]:
        text += f" ({data['failure_reason']})"
    return data, text, data["status"] == "COMPLETED"


def follow(stack: Stack, source_arn: str, progress: bool) -> dict:
    """The newest task of the queue (the one just started), polled until it ends."""
    while True:
        [task] = stack.sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=1)["Results"]
        if progress:
            bar(
                task.get("ApproximateNumberOfMessagesMoved", 0),
                task.get("ApproximateNumberOfMessagesToMove", 0),
            )
        if task["Status"] in FINAL:
            if progress:
                print(file=sys.stderr)
            return task
        time.sleep(POLL_SECONDS)


def bar(done: int, total: int, width: int = 30) -> None:
    filled = width if total == 0 else width * min(done, total) // total
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr)
