"""moto 5.2.6's SQS at queue depth: send and receive in O(batch), wake-ups on every arrival.

Where moto's time goes (moto/sqs/models.py), each replaced below:

- ``SQSBackend.receive_message`` walks ``Queue.messages`` (a list of every visible message, built
  per call with two clock reads per message), and for each message it returns runs
  ``is_message_valid_based_on_retention_period``, which calls ``get_queue_attributes`` ->
  ``Queue.attributes``: three more scans of the whole queue (ApproximateNumberOfMessages*). It
  deep-copies every returned message. Receive is O(depth) per message: 12 ms per message at a
  depth of 300, 207 ms at 6,000.
- ``Queue.delete_message`` and ``SQSBackend.change_message_visibility`` scan every message's
  receipt handles; ``Queue.add_message`` scans the queue for FIFO duplicates and
  ``SQSBackend.send_message`` builds ``Queue.attributes`` (the scans again, and the policy
  serialised twice) to read one flag: ``QueueAttributes`` reads each attribute when asked.
- ``generate_receipt_handle`` draws 185 random characters one ``random.choice`` at a time.

The replacement keeps, per queue, a ``QueueIndex`` under the queue's own ``_messages_lock``:
messages by sequence (send order), a heap of receivable messages, a heap of in-flight and delayed
messages by the time they become visible, counters for the three ApproximateNumberOf* values,
receipt handles to messages, and for FIFO queues the messages per group with the groups that have
messages in flight. Semantics kept from moto: send order, visibility timeouts, DelaySeconds,
receive counts and first-receive timestamps, old receipt handles still valid, redrive to the DLQ at
receive time once the receive count reached maxReceiveCount, FIFO: no message of a group while
one of its messages is in flight (one ReceiveMessage may return several of one group, in order),
long polling. Two behaviours follow AWS rather than moto: a message past the queue's
MessageRetentionPeriod is deleted when a receive reaches it (moto marked it received and stopped
the receive), a FIFO deduplication id is remembered for 5 minutes from its first acceptance
even after the message is deleted, per queue or per message group (DeduplicationScope); moto
compared only with messages still in the queue; and SetQueueAttributes without ``Policy`` keeps
the queue's policy (moto set it to None on every call, so changing a queue's visibility timeout
dropped the policy that lets a rule or topic deliver to it).

Every message added to a queue (SendMessage, SendMessageBatch, SNS and S3 deliveries, DLQ
redrive: all go through ``Queue.add_message``) calls ``emulator.core.wakeups.notify(queue ARN)``.
"""

from __future__ import annotations

import copy
import heapq
import json
import string
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from moto.moto_api._internal import mock_random
from moto.sqs import models as sqs_models
from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
from moto.sqs.models import DEDUPLICATION_TIME_IN_SECONDS, Message, Queue, SQSBackend, sqs_backends

from emulator.core import wakeups
from emulator.services.patching import replace

READY, IN_FLIGHT, DELAYED = 0, 1, 2
MAX_TOTAL_VISIBILITY_MS = 43200 * 1000  # moto's (and SQS's) limit on a message's visibility
_LONG_POLL_SLICE = 1.0  # seconds a long poll sleeps at most before it looks again

_index_lock = threading.Lock()
_indexed: list[weakref.ref[Queue]] = []


def now_ms() -> float:
    """Epoch milliseconds, as moto's unix_time_millis() but without building datetimes."""
    return time.time() * 1000.0


class _Group:
    """A FIFO message group: its receivable messages (a heap by sequence) and how many of its
    messages are in flight (the group is blocked while that is > 0)."""

    __slots__ = ("pending", "ready")

    def __init__(self) -> None:
        self.ready: list[tuple[int, int]] = []
        self.pending = 0


class QueueIndex:
    """The messages of one queue, indexed; every method runs under ``lock`` (the queue's
    ``_messages_lock``, a Condition: long polls wait on it)."""

    def __init__(self, queue: Queue, messages: list[Message], pending: set[Message]) -> None:
        self.lock: threading.Condition = queue._messages_lock
        self.fifo = bool(queue.fifo_queue)
        self.entries: dict[int, Message] = {}  # sequence -> message, in send order
        self.ready: list[tuple[int, int]] = []  # (sequence, token): receivable, standard queues
        self.waiting: list[tuple[float, int, int]] = []  # (visible at ms, sequence, token)
        self.counts = [0, 0, 0]  # READY, IN_FLIGHT, DELAYED
        self.handles: dict[str, int] = {}  # every receipt handle a message had -> sequence
        self.groups: dict[Any, _Group] = {}
        self.heads: list[tuple[int, Any]] = []  # (sequence of the group's first message, group)
        self.deduplication: dict[tuple[Any, str], float] = {}
        self.deduplication_order: deque[tuple[float, tuple[Any, str]]] = deque()
        self._sequence = 0
        self._token = 0
        now = now_ms()
        for message in messages:
            message._q_pending = message in pending
            self.add(message, now)

    # -- states ------------------------------------------------------------------------------------
    def _next_token(self) -> int:
        self._token += 1
        return self._token

    def _group(self, message: Message) -> _Group:
        group = self.groups.get(message.group_id)
        if group is None:
            group = self.groups[message.group_id] = _Group()
        return group

    def _head(self, group: _Group) -> int | None:
        """Sequence of the group's first receivable message (stale heap entries dropped)."""
        while group.ready:
            sequence, token = group.ready[0]
            message = self.entries.get(sequence)
            if message is not None and message._q_token == token:
                return sequence
            heapq.heappop(group.ready)
        return None

    def _to_ready(self, message: Message) -> None:
        message._q_state = READY
        message._q_token = token = self._next_token()
        self.counts[READY] += 1
        if not self.fifo:
            heapq.heappush(self.ready, (message._q_seq, token))
            return
        group = self._group(message)
        heapq.heappush(group.ready, (message._q_seq, token))
        if group.pending == 0:
            heapq.heappush(self.heads, (self._head(group), message.group_id))  # type: ignore[arg-type]

    def _to_waiting(self, message: Message, state: int) -> None:
        message._q_state = state
        message._q_token = token = self._next_token()
        self.counts[state] += 1
        due = max(message.visible_at, message.delayed_until)
        heapq.heappush(self.waiting, (due, message._q_seq, token))

    def _leave(self, message: Message) -> None:
        self.counts[message._q_state] -= 1
        message._q_token = -1

    def _unpend(self, message: Message) -> None:
        message._q_pending = False
        if self.fifo:
            group = self._group(message)
            group.pending -= 1
            if group.pending == 0:
                head = self._head(group)
                if head is not None:
                    heapq.heappush(self.heads, (head, message.group_id))

    def _place(self, message: Message, now: float) -> None:
        if message.delayed_until > now:
            self._to_waiting(message, DELAYED)
        elif message.visible_at >= now:
            self._to_waiting(message, IN_FLIGHT)
        else:
            self._to_ready(message)

    def advance(self, now: float) -> None:
        """Messages whose visibility timeout or delay ran out become receivable."""
        waiting = self.waiting
        while waiting and waiting[0][0] < now:
            _, sequence, token = heapq.heappop(waiting)
            message = self.entries.get(sequence)
            if message is None or message._q_token != token:
                continue
            self._leave(message)
            if message._q_pending:
                self._unpend(message)
            self._to_ready(message)

    # -- changes -----------------------------------------------------------------------------------
    def add(self, message: Message, now: float) -> None:
        self._sequence += 1
        message._q_seq = self._sequence
        message._q_pending = getattr(message, "_q_pending", False)
        self.entries[self._sequence] = message
        for handle in message.all_receipt_handles:
            if handle is not None:
                self.handles[handle] = self._sequence
        if message._q_pending and self.fifo:
            self._group(message).pending += 1
        self._place(message, now)

    def is_duplicate(self, queue: Queue, message: Message, now: float) -> bool:
        """FIFO: the deduplication id (or the body's SHA-256 with ContentBasedDeduplication) was
        accepted within the last 5 minutes (records it otherwise)."""
        if not message.deduplication_id:
            return False
        self._expire_deduplication(now)
        per_group = str(getattr(queue, "deduplication_scope", "queue")) == "messageGroup"
        key = (message.group_id if per_group else None, message.deduplication_id)
        if key in self.deduplication:
            return True
        self.deduplication[key] = now
        self.deduplication_order.append((now, key))
        return False

    def _expire_deduplication(self, now: float) -> None:
        """Forget the deduplication ids accepted 5 minutes or more before ``now`` (ms)."""
        horizon = now - DEDUPLICATION_TIME_IN_SECONDS * 1000
        order = self.deduplication_order
        while order and order[0][0] <= horizon:
            _, old = order.popleft()
            if self.deduplication.get(old, now) <= horizon:
                del self.deduplication[old]

    def age_deduplication(self, seconds: float) -> tuple[int, int]:
        """Every deduplication id as if accepted ``seconds`` earlier, those then past the
        interval forgotten: (ids aged, ids expired)."""
        shift = seconds * 1000
        aged = len(self.deduplication)
        self.deduplication = {key: at - shift for key, at in self.deduplication.items()}
        self.deduplication_order = deque((at - shift, key) for at, key in self.deduplication_order)
        self._expire_deduplication(now_ms())
        return aged, aged - len(self.deduplication)

    def remove(self, message: Message, *, left: bool = False) -> None:
        """Take the message out of the queue (``left``: already out of its state)."""
        if not left:
            self._leave(message)
        if message._q_pending:
            self._unpend(message)
        self.entries.pop(message._q_seq, None)
        for handle in message.all_receipt_handles:
            if handle is not None and self.handles.get(handle) == message._q_seq:
                del self.handles[handle]

    def clear(self) -> None:
        for message in self.entries.values():
            message._q_token = -1
            message._q_pending = False
        self.entries.clear()
        self.ready.clear()
        self.waiting.clear()
        self.counts[:] = [0, 0, 0]
        self.handles.clear()
        self.groups.clear()
        self.heads.clear()

    def find(self, receipt_handle: str) -> Message | None:
        sequence = self.handles.get(receipt_handle)
        return None if sequence is None else self.entries.get(sequence)

    def change_visibility(self, message: Message, timeout: int, now: float) -> None:
        if now + int(timeout) * 1000 - (message.sent_timestamp or 0) > MAX_TOTAL_VISIBILITY_MS:
            raise InvalidParameterValue(
                f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
            )
        message.change_visibility(timeout)
        self._leave(message)
        if int(timeout) == 0:
            if message._q_pending:
                self._unpend(message)
            self._to_ready(message)
        else:
            self._to_waiting(message, IN_FLIGHT)

    # -- receiving ---------------------------------------------------------------------------------
    def _next_fifo(self, taken_groups: set[Any]) -> Message | None:
        heads = self.heads
        while heads:
            sequence, group_id = heads[0]
            group = self.groups.get(group_id)
            head = None if group is None else self._head(group)
            if head != sequence or (group.pending and group_id not in taken_groups):  # type: ignore[union-attr]
                heapq.heappop(heads)  # stale, or the group has messages in flight
                continue
            heapq.heappop(heads)
            heapq.heappop(group.ready)  # type: ignore[union-attr]
            following = self._head(group)  # type: ignore[arg-type]
            if following is not None:  # the group's next message, if this call may go on
                heapq.heappush(heads, (following, group_id))
            return self.entries[sequence]
        return None

    def receivable(self, now: float) -> bool:
        self.advance(now)
        if not self.fifo:
            return self.counts[READY] > 0
        heads = self.heads
        while heads:
            sequence, group_id = heads[0]
            group = self.groups.get(group_id)
            if group is not None and not group.pending and self._head(group) == sequence:
                return True
            heapq.heappop(heads)
        return False

    def receive(  # noqa: PLR0912 - one branch per outcome of a message
        self, queue: Queue, count: int, visibility_timeout: int | None, now: float
    ) -> tuple[list[Message], list[Message]]:
        """Up to ``count`` messages received (moto's Message.mark_received), and the messages
        to move to the dead-letter queue (removed here; the caller adds them there, outside this
        queue's lock)."""
        self.advance(now)
        received: list[Message] = []
        redrive: list[Message] = []
        again: list[Message] = []  # received with visibility timeout 0: receivable at once
        taken_groups: set[Any] = set()
        policy = queue.redrive_policy if queue.dead_letter_queue is not None else None
        max_receives = policy.get("maxReceiveCount") if policy else None
        retention_ms = int(queue.message_retention_period) * 1000  # type: ignore[attr-defined]
        while len(received) < count:
            if self.fifo:
                message = self._next_fifo(taken_groups)
                if message is None:
                    break
            else:
                if not self.ready:
                    break
                sequence, token = heapq.heappop(self.ready)
                message = self.entries.get(sequence)  # type: ignore[assignment]
                if message is None or message._q_token != token:
                    continue
            self._leave(message)
            if message.sent_timestamp is not None and message.sent_timestamp + retention_ms <= now:
                self.remove(message, left=True)  # past MessageRetentionPeriod: SQS deletes it
                continue
            if max_receives is not None and message.approximate_receive_count >= max_receives:
                self.remove(message, left=True)
                redrive.append(message)
                continue
            message.mark_received(visibility_timeout=visibility_timeout)
            self.handles[message.receipt_handle] = message._q_seq  # type: ignore[index]
            received.append(message)
            if self.fifo:
                taken_groups.add(message.group_id)
            if visibility_timeout:
                message._q_pending = True
                if self.fifo:
                    self._group(message).pending += 1
                self._to_waiting(message, IN_FLIGHT)
            else:
                again.append(message)
        for message in again:
            self._to_ready(message)
        return received, redrive

    def next_due(self) -> float | None:
        """Epoch ms at which the earliest in-flight or delayed message becomes visible."""
        waiting = self.waiting
        while waiting:
            _, sequence, token = waiting[0]
            message = self.entries.get(sequence)
            if message is not None and message._q_token == token:
                return waiting[0][0]
            heapq.heappop(waiting)
        return None

    def pending(self) -> set[Message]:
        return {m for m in self.entries.values() if m._q_pending}


def index(queue: Queue) -> QueueIndex:
    """The queue's index, built on first use (from moto's own lists for a queue created before
    the patches were installed)."""
    found = queue.__dict__.get("_q_index")
    if found is not None:
        return found
    with _index_lock:
        found = queue.__dict__.get("_q_index")
        if found is None:
            state = queue.__dict__
            messages = state.pop("_q_seed", None)
            if messages is None:
                messages = state.pop("_messages", [])
            pending = state.pop("_q_seed_pending", None)
            if pending is None:
                pending = state.pop("_pending_messages", set())
            with queue._messages_lock:
                found = QueueIndex(queue, list(messages), set(pending))
            state["_q_index"] = found
            _indexed.append(weakref.ref(queue))
    return found


def oldest_sent_ms(queue: Queue) -> int | None:
    """When the queue's oldest message was sent (epoch ms; None: empty), for its
    ApproximateAgeOfOldestMessage metric (emulator/monitoring)."""
    idx = index(queue)
    with idx.lock:
        oldest = next(iter(idx.entries.values()), None)
    return None if oldest is None else oldest.sent_timestamp


# --- the Queue model ------------------------------------------------------------------------------
def _get_messages(self: Queue) -> list[Message]:
    """Queue._messages: every message, in send order (a copy: change it through the queue)."""
    idx = index(self)
    with idx.lock:
        return list(idx.entries.values())


def _set_messages(self: Queue, value: list[Message]) -> None:
    """moto assigns Queue._messages in Queue.__init__ ([]) and SQSBackend.purge_queue ([])."""
    idx = self.__dict__.get("_q_index")
    if idx is None:
        self.__dict__["_q_seed"] = list(value)
        return
    with idx.lock:
        idx.clear()
        now = now_ms()
        for message in value:
            message._q_pending = False
            idx.add(message, now)


def _get_pending(self: Queue) -> set[Message]:
    idx = index(self)
    with idx.lock:
        return idx.pending()


def _set_pending(self: Queue, value: set[Message]) -> None:
    idx = self.__dict__.get("_q_index")
    if idx is None:
        self.__dict__["_q_seed_pending"] = set(value)
        return
    with idx.lock:
        for message in list(idx.entries.values()):
            if message._q_pending and message not in value:
                idx._unpend(message)


def _visible_messages(self: Queue) -> list[Message]:
    """Queue.messages: the visible, undelayed messages (moto built this list on every receive)."""
    idx = index(self)
    with idx.lock:
        idx.advance(now_ms())
        return [m for m in idx.entries.values() if m._q_state == READY]


def _counter(state: int) -> property:
    def count(self: Queue) -> int:
        idx = index(self)
        with idx.lock:
            idx.advance(now_ms())
            return idx.counts[state]

    return property(count)


def age_deduplication(seconds: float, region: str, account: str) -> dict[str, int]:
    """Every FIFO queue's deduplication ids as if accepted ``seconds`` earlier (POST
    /_emulator/age-deduplication): FIFO queues, ids aged, ids expired."""
    counts = {"queues": 0, "aged": 0, "expired": 0}
    for queue in list(sqs_backends[account][region].queues.values()):
        if not queue.fifo_queue or "_q_index" not in queue.__dict__:  # nothing sent yet
            continue
        idx = index(queue)
        with idx.lock:
            aged, expired = idx.age_deduplication(seconds)
        counts["queues"] += 1
        counts["aged"] += aged
        counts["expired"] += expired
    return counts


def add_message(self: Queue, message: Message) -> None:
    """Queue.add_message: FIFO deduplication in O(1), the message indexed, long polls and the
    wake-ups told. (moto's own event-source-mapping delivery here is off while the emulator's
    patches are installed: moto_patches detaches every mapping.)"""
    idx = index(self)
    with idx.lock:
        now = now_ms()
        if self.fifo_queue and idx.is_duplicate(self, message, now):
            return
        idx.add(message, now)
        idx.lock.notify_all()
    wakeups.notify(self.queue_arn)


def delete_message(self: Queue, receipt_handle: str) -> None:
    """Queue.delete_message by the receipt-handle index; deleting twice stays harmless."""
    if receipt_handle in self.deleted_messages:
        return
    idx = index(self)
    with idx.lock:
        message = idx.find(receipt_handle)
        if message is None:
            raise ReceiptHandleIsInvalid()
        idx.remove(message)
        self.deleted_messages.update(h for h in message.all_receipt_handles if h is not None)
        idx.lock.notify_all()  # a FIFO group may have become receivable


def wait_for_messages(self: Queue, timeout: int) -> None:
    idx = index(self)
    with idx.lock:
        if not idx.receivable(now_ms()):
            idx.lock.wait(timeout)


# --- the SQS backend ------------------------------------------------------------------------------
def snapshot(message: Message, attribute_names: list[str]) -> Message:
    """What moto's receive returned (a deep copy): a shallow copy with the message attributes the
    request asked for; the response is built from it after the lock is released."""
    taken = copy.copy(message)
    sqs_models._filter_message_attributes(taken, attribute_names)
    return taken


def receive(
    queue: Queue,
    count: int,
    visibility_timeout: int | None,
    build: Any,
    wait_seconds: float = 0,
) -> list[Any]:
    """Receive from the queue (long polling up to ``wait_seconds``); ``build(message)`` makes each
    returned value under the queue's lock. Redrives to the DLQ happen here."""
    idx = index(queue)
    deadline = time.monotonic() + (wait_seconds or 0)
    while True:
        with idx.lock:
            messages, redrive = idx.receive(queue, count, visibility_timeout, now_ms())
            result = [build(m) for m in messages]
        dead_letter_queue = queue.dead_letter_queue
        for message in redrive:
            # where StartMessageMoveTask returns it by default (sqs_move_tasks.py)
            message.dead_letter_source_arn = queue.queue_arn  # type: ignore[attr-defined]
            dead_letter_queue.add_message(message)  # type: ignore[union-attr]
        if result or not wait_seconds:
            return result
        with idx.lock:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            now = now_ms()
            if idx.receivable(now):
                continue
            due = idx.next_due()
            sleep = min(remaining, _LONG_POLL_SLICE)
            if due is not None:
                sleep = min(sleep, max(0.001, (due - now) / 1000.0))
            idx.lock.wait(sleep)


def receive_message(  # noqa: PLR0917 - moto's signature
    self: SQSBackend,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Message]:
    """SQSBackend.receive_message in O(count): see QueueIndex.receive."""
    queue = self.get_queue(queue_name)
    names = message_attribute_names or []
    return receive(
        queue,
        count,
        visibility_timeout,
        lambda m: snapshot(m, names),
        wait_seconds=wait_seconds_timeout,
    )


def change_message_visibility(
    self: SQSBackend, queue_name: str, receipt_handle: str, visibility_timeout: int
) -> None:
    """SQSBackend.change_message_visibility by the receipt-handle index."""
    queue = self.get_queue(queue_name)
    idx = index(queue)
    with idx.lock:
        message = idx.find(receipt_handle)
        if message is None:
            raise ReceiptHandleIsInvalid
        idx.change_visibility(message, visibility_timeout, now_ms())
        idx.lock.notify_all()


# --- Message --------------------------------------------------------------------------------------
def _visible(self: Message) -> bool:
    return now_ms() > self.visible_at


def _delayed(self: Message) -> bool:
    return now_ms() < self.delayed_until


def _body_md5(self: Message) -> str:
    """Message.body_md5, computed once (a message's body never changes)."""
    cached = self.__dict__.get("_q_body_md5")
    if cached is None or cached[0] is not self.body:
        cached = (self.body, _original_body_md5.fget(self))  # type: ignore[union-attr]
        self.__dict__["_q_body_md5"] = cached
    return cached[1]


def generate_receipt_handle() -> str:
    """moto/sqs/utils.py generate_receipt_handle, one random.choices call instead of 185
    random.choice calls (same alphabet, length and random source)."""
    return "".join(mock_random.choices(string.ascii_lowercase, k=185))


_original_body_md5: property = Message.__dict__["body_md5"]


# moto's attribute names -> the Queue attributes that hold them (moto converts them per read)
_PYTHON_NAMES = {
    name: sqs_models.camelcase_to_underscores(name)
    for name in Queue.BASE_ATTRIBUTES + Queue.FIFO_ATTRIBUTES + Queue.KMS_ATTRIBUTES
}


class QueueAttributes(Mapping[str, Any]):
    """Queue.attributes with moto's names and values, each value read when asked for. moto built
    all of them (three counts, the policy serialised twice) for every SendMessage, which reads
    one flag: ContentBasedDeduplication, once per message an SNS topic or a rule delivers."""

    __slots__ = ("_queue",)

    def __init__(self, queue: Queue) -> None:
        self._queue = queue

    def _names(self) -> list[str]:
        queue = self._queue
        names = list(Queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += Queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += Queue.KMS_ATTRIBUTES
        return names

    def __getitem__(self, name: str) -> Any:
        queue = self._queue
        if name not in _PYTHON_NAMES or (
            (name in Queue.FIFO_ATTRIBUTES and not queue.fifo_queue)
            or (name in Queue.KMS_ATTRIBUTES and not queue.kms_master_key_id)
        ):
            raise KeyError(name)
        value = getattr(queue, _PYTHON_NAMES[name])
        if name == "RedrivePolicy" and value:
            return json.dumps(value)
        if isinstance(value, bool):
            return str(value).lower()
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


_original_set_attributes = Queue._set_attributes


def _set_attributes(self: Queue, attributes: dict[str, Any], now: float | None = None) -> None:
    """moto's, except that a call without Policy leaves the policy as it was (as SQS does)."""
    policy = getattr(self, "policy", None)
    _original_set_attributes(self, attributes, now)
    if "Policy" not in attributes:
        self.policy = policy


def install() -> None:
    replace(Queue, "_messages", property(_get_messages, _set_messages))
    replace(Queue, "_pending_messages", property(_get_pending, _set_pending))
    replace(Queue, "pending_messages", property(_get_pending))
    replace(Queue, "messages", property(_visible_messages))
    replace(Queue, "approximate_number_of_messages", _counter(READY))
    replace(Queue, "approximate_number_of_messages_not_visible", _counter(IN_FLIGHT))
    replace(Queue, "approximate_number_of_messages_delayed", _counter(DELAYED))
    replace(Queue, "add_message", add_message)
    replace(Queue, "delete_message", delete_message)
    replace(Queue, "wait_for_messages", wait_for_messages)
    replace(Queue, "_set_attributes", _set_attributes)
    replace(SQSBackend, "receive_message", receive_message)
    replace(SQSBackend, "change_message_visibility", change_message_visibility)
    replace(Message, "visible", property(_visible))
    replace(Message, "delayed", property(_delayed))
    replace(Message, "body_md5", property(_body_md5))
    replace(sqs_models, "generate_receipt_handle", generate_receipt_handle)
    replace(Queue, "attributes", property(QueueAttributes))


def uninstall() -> None:
    """Give every indexed queue moto's own lists back (the class attributes are restored by
    patching.restore_all)."""
    with _index_lock:
        for ref in _indexed:
            queue = ref()
            if queue is None or "_q_index" not in queue.__dict__:
                continue
            idx = queue.__dict__.pop("_q_index")
            with idx.lock:
                queue.__dict__["_messages"] = list(idx.entries.values())
                queue.__dict__["_pending_messages"] = idx.pending()
        _indexed.clear()
