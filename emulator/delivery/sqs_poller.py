"""SQS event source mappings: pollers that receive, filter, batch, invoke and delete as Lambda does.

The queue is read in process (``QueueSource``: emulator/delivery/sources.py over moto's SQS
backend).

Per batch: a receive (the queue's own visibility timeout keeps the messages invisible while the
function runs), then more receives until BatchSize messages are gathered or
MaximumBatchingWindowInSeconds has passed since the first one (window 0: one receive). Messages
that match no filter are deleted without an invocation. The function gets ``{"Records": [...]}``
built as Lambda builds them. Then:

- success: every message is deleted;
- function error, or an invalid partial response: nothing is deleted; every message reappears
  when its visibility timeout expires;
- ReportBatchItemFailures with a valid ``batchItemFailures``: every message except the listed
  ones is deleted; the listed ones reappear after their visibility timeout (not earlier).

A poller told to stop (the mapping disabled or deleted, fewer pollers) closes its batching
window and delivers what it has received before it ends, so disabling strands no message for its
visibility timeout; GetEventSourceMapping says "Disabling" until then (services/awslambda.py).

Redrive to the DLQ is SQS's: the queue moves a message whose receive count reached
maxReceiveCount at the next receive (moto does it at receive time). ``sent_to_dlq`` counts the
messages that failed on their last allowed receive.

Pollers and scaling (Lambda developer guide, "Understanding SQS event source mapping scaling"):
Lambda starts 5 concurrent pollers and, while messages keep waiting, adds up to 300 a minute.
Here: ``BASE_POLLERS`` (5) poller threads while the mapping is enabled; a poller whose receive
came back full (more may be waiting) wakes an idle poller, or when none is idle adds one (at most
one per ``SCALE_UP_INTERVAL``) up to ``EngineContext.max_sqs_pollers`` (10 by default, the
runtime's workers per function: more pollers would only wait for a worker) or
ScalingConfig.MaximumConcurrency when lower; a poller that finds the queue empty while more than
the base run goes away. The ``sqs_pollers`` fault switch fixes the number instead.

Waiting without polling: an idle mapping has one poller (the watcher) waiting on
emulator.core.wakeups for the queue (a message sent), with a timeout at the moment the earliest
in-flight or delayed message becomes visible (``next_visible_at``, plus ``VISIBILITY_SLACK`` so
that messages received together reappear together and stay one batch), at most ``IDLE_WAIT``;
the other idle pollers wait for the watcher or a busy poller to hand them work. A stopped watcher
(fewer pollers, the mapping disabled) no longer counts as watching, even before its wait returns:
a poller woken with it watches in its place instead of waiting ``FOLLOWER_WAIT`` for a hand-off
that would never come.

Faults: ``duplicate_deliveries`` N invokes each batch N times, ``duplicate_rate`` p once more
with probability p, applying every result (deletes are idempotent: a message is deleted once any
delivery succeeded for it). ``reorder_rate`` p (standard queues) shuffles every batch and holds
each of its messages back with probability p, to go out with the poller's next batch (or alone
when the queue has nothing new): later than messages sent after it, as SQS may deliver them.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from typing import Any

from emulator.core import wakeups
from emulator.core.arns import parse_arn
from emulator.core.filters import FilterCriteria
from emulator.delivery.mappings import (
    BatchOutcome,
    EngineContext,
    MappingConfig,
    MappingStats,
    QueueSource,
    compile_filters,
    count_events,
    encode_event,
    encoded,
    log,
    log_invocation,
    matches,
    read_outcome,
)

MAX_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages limit
BASE_POLLERS = 5  # Lambda's starting pollers per SQS mapping
SCALE_UP_INTERVAL = 0.2  # s between two added pollers (Lambda: up to 300 a minute)
IDLE_WAIT = 20.0  # s an idle watcher waits without a signal (SQS's longest long poll)
FOLLOWER_WAIT = 60.0  # s an idle non-watching poller waits without being handed work
VISIBILITY_SLACK = 0.02  # s past the earliest message's visibility time before receiving
MIN_WAIT = 0.05  # s, the shortest watcher wait (a visible message that cannot be received)


def _b64(value: Any) -> str:
    if isinstance(value, str):
        return value
    return base64.b64encode(bytes(value)).decode("ascii")


def lambda_message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """An SQS MessageAttributeValue in the event's shape (binary values base64-encoded)."""
    shaped: dict[str, Any] = {}
    if "StringValue" in value:
        shaped["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        shaped["binaryValue"] = _b64(value["BinaryValue"])
    shaped["stringListValues"] = list(value.get("StringListValues", []))
    shaped["binaryListValues"] = [_b64(v) for v in value.get("BinaryListValues", [])]
    shaped["dataType"] = value.get("DataType", "String")
    return shaped


def lambda_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """One ReceiveMessage message as a record of the event Lambda sends."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: lambda_message_attribute(value)
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfMessageAttributes": message.get("MD5OfMessageAttributes"),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": parse_arn(queue_arn).region,
    }


class _Poller:
    """One poller thread, its stop flag and the records it holds back for its next batch (the
    ``reorder_rate`` switch)."""

    def __init__(self, target: Callable[[_Poller], None], name: str):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=target, args=(self,), name=name, daemon=True)
        self.held: list[dict[str, Any]] = []

    def alive(self) -> bool:
        return self.thread.is_alive()


class SqsMappingPoller:
    """The pollers of one SQS mapping (see the module docstring for their number)."""

    def __init__(
        self,
        ctx: EngineContext,
        config: MappingConfig,
        stats: MappingStats,
        open_source: Callable[[str], QueueSource],
    ):
        self.ctx = ctx
        self.config = config
        self.stats = stats
        self._open_source = open_source
        self._source: QueueSource | None = None
        self._cond = threading.Condition()
        self._pollers: list[_Poller] = []
        self._busy = 0  # pollers holding messages (gathering, invoking, deleting)
        self._watcher: _Poller | None = None  # the idle poller waiting on the queue's wake-ups
        self._watch_until = 0.0  # ... until this time (epoch s)
        self._waiting = 0  # idle pollers waiting to be handed work
        self._last_scale = 0.0
        self._serial = 0

    # -- control (called by the engine) -----------------------------------------------------------
    def update(self, config: MappingConfig) -> None:
        self.config = config

    def _bounds(self) -> tuple[int, int]:
        """(pollers to keep running, most pollers) for the current switches and config."""
        fixed = self.ctx.fixed_sqs_pollers()
        if fixed is not None:
            return fixed, fixed
        most = self.ctx.max_sqs_pollers
        if self.config.max_concurrency:
            most = min(most, self.config.max_concurrency)
        most = max(1, most)
        return min(BASE_POLLERS, most), most

    def reconcile(self) -> None:
        cfg = self.config
        if not cfg.enabled:
            self.stop()
            return
        if self._source is None:
            try:
                self._source = self._open_source(cfg.source_arn)
            except Exception as error:
                log.warning("esm %s: queue %s not readable: %s", cfg.short, cfg.source_arn, error)
                return
        base, most = self._bounds()
        woken = False
        with self._cond:
            self._pollers = [p for p in self._pollers if p.alive()]
            live = [p for p in self._pollers if not p.stop.is_set()]
            for poller in live[most:]:
                poller.stop.set()
                woken = True
            for _ in range(base - len(live)):
                self._start_poller()
            if woken:
                self._wake_all()
        if woken:
            wakeups.notify(cfg.source_arn)  # a stopped watcher returns at once

    def _start_poller(self) -> None:
        """A new poller thread (the caller holds ``_cond``)."""
        self._serial += 1
        poller = _Poller(self._run, f"esm-sqs-{self.config.short}-{self._serial}")
        self._pollers.append(poller)
        poller.thread.start()

    def running(self) -> bool:
        with self._cond:
            return any(p.alive() and not p.stop.is_set() for p in self._pollers)

    def active_pollers(self) -> int:
        with self._cond:
            return sum(1 for p in self._pollers if p.alive())

    def stop(self) -> None:
        with self._cond:
            if not any(not p.stop.is_set() for p in self._pollers):
                return
            for poller in self._pollers:
                poller.stop.set()
            self._wake_all()
        wakeups.notify(self.config.source_arn)  # the watcher returns at once

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            threads = [p.thread for p in self._pollers]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def idle(self) -> bool:
        with self._cond:
            if self._busy:
                return False
        source = self._source
        if source is None or any(source.counts()):
            return False
        with self._cond:
            return not self._busy

    # -- idle pollers -----------------------------------------------------------------------------
    def _wake_all(self) -> None:
        """Every poller waiting to be handed work polls again (the caller holds ``_cond``)."""
        self._waiting = 0
        self._cond.notify_all()

    def _more_waiting(self) -> None:
        """A receive came back full: hand the queue to an idle poller, else add one (bounded)."""
        with self._cond:
            if self._waiting:
                self._waiting -= 1
                self._cond.notify(1)
                return
            watching = self._watched()
            base, most = self._bounds()
            live = sum(1 for p in self._pollers if not p.stop.is_set())
            now = time.monotonic()
            if (
                not watching
                and base < most
                and live < most
                and now - self._last_scale >= SCALE_UP_INTERVAL
            ):
                self._last_scale = now
                self._start_poller()
                log.info("esm %s: backlog: %d pollers", self.config.short, live + 1)
                return
        if watching:
            wakeups.notify(self.config.source_arn)

    def _retire(self, me: _Poller) -> bool:
        """A poller that found the queue empty goes away while more than the base run."""
        with self._cond:
            base, _ = self._bounds()
            live = [p for p in self._pollers if not p.stop.is_set()]
            if len(live) <= base or me not in live:
                return False
            me.stop.set()
            self._pollers.remove(me)
            log.info("esm %s: queue drained: %d pollers", self.config.short, len(live) - 1)
            return True

    def _watched(self) -> bool:
        """A poller that keeps running watches the queue (the caller holds ``_cond``). A stopped
        watcher is leaving: the pollers woken with it must not wait for it to hand them work."""
        return self._watcher is not None and not self._watcher.stop.is_set()

    def _wait_for_work(self, me: _Poller, source: QueueSource, seen: int) -> None:
        """The queue had nothing for ``me``: watch it (one poller), or wait to be handed work."""
        with self._cond:
            if me.stop.is_set():
                return
            if self._watched():
                self._waiting += 1
                if not self._cond.wait(FOLLOWER_WAIT):
                    self._waiting = max(0, self._waiting - 1)
                return
            self._watcher = me
            timeout = IDLE_WAIT
            upcoming = source.next_visible_at()
            if upcoming is not None:
                timeout = min(timeout, max(MIN_WAIT, upcoming - time.time() + VISIBILITY_SLACK))
            self._watch_until = time.time() + timeout
        try:
            wakeups.wait(source.arn, seen, timeout)
        finally:
            with self._cond:
                if self._watcher is me:
                    self._watcher = None

    def _recheck_watch(self, source: QueueSource) -> None:
        """Messages were left to reappear: a watcher waiting past their time is woken early."""
        upcoming = source.next_visible_at()
        with self._cond:
            late = (
                self._watched()
                and upcoming is not None
                and upcoming + VISIBILITY_SLACK < self._watch_until
            )
        if late:
            wakeups.notify(source.arn)

    # -- polling -----------------------------------------------------------------------------------
    def _run(self, me: _Poller) -> None:
        while not me.stop.is_set():
            source = self._source
            if source is None:
                return
            try:
                seen = wakeups.version(source.arn)
                if self._poll_once(me, source):
                    continue
            except Exception as error:
                if me.stop.is_set():
                    return
                log.warning("esm %s: polling failed: %s", self.config.short, error)
                me.stop.wait(1.0)
                continue
            if self._retire(me):
                return
            self._wait_for_work(me, source, seen)

    def _poll_once(self, me: _Poller, source: QueueSource) -> bool:
        """Gather one batch and deliver it; False when the queue had nothing."""
        cfg = self.config
        if not cfg.enabled:
            return False
        asked = min(MAX_RECEIVE, cfg.batch_size)
        messages = source.receive(asked)
        if not messages:
            if not me.held:
                return False
            messages = []  # nothing new: what this poller held back goes out alone
        with self._cond:
            self._busy += 1
        try:
            self.ctx.touch()
            filters = compile_filters(cfg.filter_criteria)
            batch = self._filter(cfg, source, filters, messages)
            full = len(messages) == asked
            deadline = time.monotonic() + cfg.window
            while cfg.window > 0 and len(batch) < cfg.batch_size and not me.stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                seen = wakeups.version(source.arn)
                asked = min(MAX_RECEIVE, cfg.batch_size - len(batch))
                more = source.receive(asked)
                full = len(more) == asked
                if not more:
                    wakeups.wait(source.arn, seen, remaining)
                    continue
                self.ctx.touch()
                kept = self._filter(cfg, source, filters, more)
                # A message received again while the window is open (its visibility timeout ran
                # out) replaces its older copy: one record per message, newest receipt.
                again = {r["messageId"] for r in kept}
                batch = [r for r in batch if r["messageId"] not in again] + kept
            if full:
                self._more_waiting()
            if not source.arn.endswith(".fifo"):
                batch, me.held = self.ctx.faults.reorder(batch, me.held)
            if batch:  # stopped: its window closes early, what it holds still goes out
                self._deliver(cfg, source, batch)
            return True
        finally:
            with self._cond:
                self._busy -= 1
            self.ctx.touch()

    def _filter(
        self,
        cfg: MappingConfig,
        source: QueueSource,
        filters: FilterCriteria | None,
        messages: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        records = [lambda_record(m, cfg.source_arn) for m in messages]
        if filters is None:
            count_events(cfg, PolledEventCount=len(records))
            return records
        kept, dropped = [], []
        for record in records:
            (kept if matches(filters, record) else dropped).append(record)
        count_events(cfg, PolledEventCount=len(records), FilteredOutEventCount=len(dropped))
        if dropped:
            source.delete([r["receiptHandle"] for r in dropped])
            self.stats.add(records_filtered=len(dropped))
            log.info(
                "esm %s fn=%s filtered out %d message(s): deleted without invoking",
                cfg.short,
                cfg.function_name,
                len(dropped),
            )
        return kept

    def _deliver(
        self, cfg: MappingConfig, source: QueueSource, records: list[dict[str, Any]]
    ) -> None:
        ids = [r["messageId"] for r in records]
        event = encode_event([encoded(r) for r in records])
        deliveries = self.ctx.deliveries()
        deleted: set[str] = set()
        for delivery in range(1, deliveries + 1):
            started = time.monotonic()
            result = self.ctx.runtime.invoke(cfg.function_name, event)
            outcome: BatchOutcome = read_outcome(result, ids, cfg.report_failures)
            succeeded = (
                []
                if outcome.failed is None
                else [r for r in records if r["messageId"] not in outcome.failed]
            )
            to_delete = [r for r in succeeded if r["messageId"] not in deleted]
            if to_delete:
                source.delete([r["receiptHandle"] for r in to_delete])
                deleted.update(r["messageId"] for r in to_delete)
            self.stats.add(
                invocations=1,
                records_delivered=len(records),
                failures=int(outcome.kind != "ok"),
                records_failed=len(records) - len(succeeded),
                duplicates=int(delivery > 1),
            )
            count_events(
                cfg,
                InvokedEventCount=len(records),
                FailedInvokeEventCount=len(records) - len(succeeded),
                DeletedEventCount=len(to_delete),
            )
            log_invocation(
                cfg,
                len(records),
                outcome,
                time.monotonic() - started,
                delivery=delivery,
                deliveries=deliveries,
            )
        kept = [r for r in records if r["messageId"] not in deleted]
        if kept:
            self._count_redrives(cfg, source, kept)
            self._recheck_watch(source)

    def _count_redrives(
        self, cfg: MappingConfig, source: QueueSource, kept: list[dict[str, Any]]
    ) -> None:
        most = source.max_receive_count
        if most is None:
            return
        last = [r for r in kept if int(r["attributes"].get("ApproximateReceiveCount", "0")) >= most]
        if last:
            self.stats.add(sent_to_dlq=len(last))
            log.warning(
                "esm %s fn=%s %d message(s) failed on receive %d of %d: SQS moves them to the DLQ",
                cfg.short,
                cfg.function_name,
                len(last),
                most,
                most,
            )
