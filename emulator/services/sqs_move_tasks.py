"""SQS message move tasks (StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask),
which moto 5.2.6 lacks: its SQSResponse has no such actions, so botocore's requests for them fail.

AWS semantics kept (API reference, SQS 2012-11-05):

- The source must be a queue that is some queue's dead-letter queue (else UnsupportedOperation);
  an unknown source or destination is ResourceNotFoundException.
- Without DestinationArn each message goes back to the queue it was dead-lettered from (sqs.py
  records that queue on the message when it redrives it); a dead-letter queue with one source
  sends the messages it cannot place (put there by hand) to that source, else the task FAILS.
- MaxNumberOfMessagesPerSecond: 1..500, the rate; without it the task moves as fast as it can.
- One RUNNING task per source queue. ApproximateNumberOfMessagesToMove is the source's visible
  messages when the task starts; the task moves that many (or until the source is empty) and is
  COMPLETED. Cancelling stops it (CANCELLED); only a RUNNING task can be cancelled.
- ListMessageMoveTasks: newest first, MaxResults 1..10 (default 1); TaskHandle only on a RUNNING
  task; DestinationArn and MaxNumberOfMessagesPerSecond only when the request gave them.

A moved message is sent to its destination as a new message (body, message attributes, FIFO group
and deduplication ids), then deleted from the source: at least once, as on AWS.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.core.responses import ActionResult
from moto.sqs.exceptions import InvalidParameterValue, QueueDoesNotExist, SQSException
from moto.sqs.models import Message, Queue, SQSBackend, sqs_backends
from moto.sqs.responses import SQSResponse

from emulator.core.arns import parse_arn
from emulator.services.patching import replace

RUNNING, COMPLETED, CANCELLED, FAILED = "RUNNING", "COMPLETED", "CANCELLED", "FAILED"
MAX_RATE = 500  # AWS's upper limit of MaxNumberOfMessagesPerSecond
RECEIVE_VISIBILITY = 30  # seconds a message being moved stays hidden in the source

# The attribute sqs.py sets on a message it moves to a dead-letter queue.
SOURCE_ATTRIBUTE = "dead_letter_source_arn"


class ResourceNotFound(SQSException):
    def __init__(self, message: str) -> None:
        super().__init__("ResourceNotFoundException", message)


class UnsupportedOperation(SQSException):
    def __init__(self, message: str) -> None:
        super().__init__("UnsupportedOperation", message)


@dataclass
class MoveTask:
    handle: str
    source_arn: str
    destination_arn: str | None
    rate: int | None
    to_move: int
    started_ms: int
    status: str = RUNNING
    moved: int = 0
    failure_reason: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "Status": self.status,
            "SourceArn": self.source_arn,
            "ApproximateNumberOfMessagesMoved": self.moved,
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": self.started_ms,
        }
        optional = {
            "TaskHandle": self.handle if self.status == RUNNING else None,
            "DestinationArn": self.destination_arn,
            "MaxNumberOfMessagesPerSecond": self.rate,
            "FailureReason": self.failure_reason,
        }
        return entry | {name: value for name, value in optional.items() if value is not None}


_tasks_lock = threading.Lock()
_tasks: list[MoveTask] = []  # in start order


def _queue(arn: str, parameter: str) -> tuple[SQSBackend, Queue]:
    try:
        queue = parse_arn(arn)
    except ValueError:
        queue = None
    if queue is None or (queue.partition, queue.service) != ("aws", "sqs"):
        raise InvalidParameterValue(f"Value {arn} for parameter {parameter} is invalid.")
    backend = sqs_backends[queue.account][queue.region]
    try:
        return backend, backend.get_queue(queue.resource)
    except QueueDoesNotExist:
        raise ResourceNotFound(
            f"The resource that you specified for the {parameter} parameter doesn't exist."
        ) from None


def _dead_letter_sources(backend: SQSBackend, queue: Queue) -> list[Queue]:
    return backend.list_dead_letter_source_queues(queue.name)


def start(source_arn: str, destination_arn: str | None, rate: int | None) -> MoveTask:
    backend, source = _queue(source_arn, "SourceArn")
    if not _dead_letter_sources(backend, source):
        raise UnsupportedOperation("Source queue must be configured as a Dead Letter Queue.")
    if destination_arn is not None:
        _queue(destination_arn, "DestinationArn")
    if rate is not None and not 1 <= rate <= MAX_RATE:
        raise InvalidParameterValue(
            f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. "
            f"Reason: must be between 1 and {MAX_RATE}."
        )
    with _tasks_lock:
        if any(t.source_arn == source_arn and t.status == RUNNING for t in _tasks):
            raise UnsupportedOperation(
                "There is already a task running. Only one active task is allowed for a source "
                "queue arn at a given time."
            )
        task_id = str(uuid.uuid4())
        handle = base64.b64encode(
            json.dumps({"taskId": task_id, "sourceArn": source_arn}).encode()
        ).decode()
        task = MoveTask(
            handle,
            source_arn,
            destination_arn,
            rate,
            to_move=int(source.approximate_number_of_messages),
            started_ms=int(time.time() * 1000),
        )
        _tasks.append(task)
    threading.Thread(target=_run, args=(task,), name="sqs-message-move", daemon=True).start()
    return task


def _destination(backend: SQSBackend, source: Queue, task: MoveTask, message: Message) -> Queue:
    arn = task.destination_arn or getattr(message, SOURCE_ATTRIBUTE, None)
    if arn is None:
        sources = _dead_letter_sources(backend, source)
        if len(sources) != 1:
            raise UnsupportedOperation(
                "a message has no original source queue; give a DestinationArn"
            )
        return sources[0]
    return _queue(arn, "DestinationArn")[1]


def _run(task: MoveTask) -> None:
    backend, source = _queue(task.source_arn, "SourceArn")
    interval = 1.0 / task.rate if task.rate else 0.0
    try:
        while task.status == RUNNING and task.moved < task.to_move:
            messages = backend.receive_message(
                source.name,
                count=min(10, task.to_move - task.moved),
                wait_seconds_timeout=0,
                visibility_timeout=RECEIVE_VISIBILITY,
                message_attribute_names=["All"],
            )
            if not messages:
                break  # someone else took them: nothing left to move
            for message in messages:
                began = time.monotonic()
                with task.lock:
                    if task.status != RUNNING:
                        backend.change_message_visibility(source.name, message.receipt_handle, 0)
                        continue
                    _move(backend, source, task, message)
                time.sleep(max(0.0, interval - (time.monotonic() - began)))
    except SQSException as error:
        with task.lock:
            task.status, task.failure_reason = FAILED, error.message
        return
    with task.lock:
        if task.status == RUNNING:
            task.status = COMPLETED


def _move(backend: SQSBackend, source: Queue, task: MoveTask, message: Message) -> None:
    destination = _destination(backend, source, task, message)
    backend.send_message(
        destination.name,
        message.body,
        message_attributes=message.message_attributes,
        deduplication_id=message.deduplication_id if destination.fifo_queue else None,
        group_id=message.group_id if destination.fifo_queue else None,
    )
    backend.delete_message(source.name, message.receipt_handle)
    task.moved += 1


def cancel(handle: str) -> MoveTask:
    with _tasks_lock:
        task = next((t for t in _tasks if t.handle == handle), None)
    if task is None:
        raise ResourceNotFound("Task does not exist.")
    with task.lock:
        if task.status != RUNNING:
            raise UnsupportedOperation("Only active tasks can be cancelled.")
        task.status = CANCELLED
    return task


def listed(source_arn: str, max_results: int | None) -> list[MoveTask]:
    _queue(source_arn, "SourceArn")
    count = 1 if max_results is None else max_results
    if not 1 <= count <= 10:
        raise InvalidParameterValue(
            f"Value {count} for parameter MaxResults is invalid. Reason: must be between 1 and 10."
        )
    with _tasks_lock:
        return [t for t in reversed(_tasks) if t.source_arn == source_arn][:count]


# --- the SQS API (JSON protocol: SQSResponse dispatches on the action's snake_case name) ----------
def _start_message_move_task(self: SQSResponse) -> ActionResult:
    task = start(
        self._get_param("SourceArn"),
        self._get_param("DestinationArn"),
        self._get_param("MaxNumberOfMessagesPerSecond"),
    )
    return ActionResult({"TaskHandle": task.handle})


def _list_message_move_tasks(self: SQSResponse) -> ActionResult:
    tasks = listed(self._get_param("SourceArn"), self._get_param("MaxResults"))
    return ActionResult({"Results": [task.entry() for task in tasks]})


def _cancel_message_move_task(self: SQSResponse) -> ActionResult:
    task = cancel(self._get_param("TaskHandle"))
    return ActionResult({"ApproximateNumberOfMessagesMoved": task.moved})


def install() -> None:
    replace(SQSResponse, "start_message_move_task", _start_message_move_task)
    replace(SQSResponse, "list_message_move_tasks", _list_message_move_tasks)
    replace(SQSResponse, "cancel_message_move_task", _cancel_message_move_task)


def reset() -> None:
    """Forget every task (tests share one process)."""
    with _tasks_lock:
        for task in _tasks:
            with task.lock:
                if task.status == RUNNING:
                    task.status = CANCELLED
        _tasks.clear()
