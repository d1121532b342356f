"""SQS event source mappings: pollers that receive, filter, batch, invoke and delete as Lambda does.

Per batch: ReceiveMessage (all system and message attributes; the queue's own visibility timeout
keeps the messages invisible while the function runs) until BatchSize messages are gathered or
MaximumBatchingWindowInSeconds has passed since the first one (window 0: one receive). Messages
that match no filter are deleted without an invocation. The function gets ``{"Records": [...]}``
built as Lambda builds them. Then:

- success: every message is deleted;
- function error, or an invalid partial response: nothing is deleted; every message reappears
  when its visibility timeout expires;
- ReportBatchItemFailures with a valid ``batchItemFailures``: every message except the listed
  ones is deleted; the listed ones reappear after their visibility timeout (not earlier).

Redrive to the DLQ is SQS's: the queue moves a message whose receive count reached
maxReceiveCount at the next receive (moto does it at receive time). ``sent_to_dlq`` counts the
messages that failed on their last allowed receive.

Faults: ``sqs_pollers`` concurrent pollers per mapping (each one receives its own batches, as
Lambda's scaled-out pollers do); ``duplicate_deliveries`` N invokes each batch N times, applying
every result (deletes are idempotent: a message is deleted once any delivery succeeded for it).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

from emulator.esm import (
    BatchOutcome,
    EngineContext,
    MappingConfig,
    MappingStats,
    compile_filters,
    log,
    log_invocation,
    matches,
    read_outcome,
)

MAX_RECEIVE = 10  # ReceiveMessage's MaxNumberOfMessages limit


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
        "awsRegion": queue_arn.split(":")[3],
    }


class SqsMappingPoller:
    """The pollers of one SQS mapping (``faults.sqs_pollers`` threads while it is enabled)."""

    kind = "sqs"

    def __init__(self, ctx: EngineContext, config: MappingConfig, stats: MappingStats):
        self.ctx = ctx
        self.config = config
        self.stats = stats
        self._lock = threading.Lock()
        self._threads: list[tuple[threading.Thread, threading.Event]] = []
        self._busy = 0
        self._queue_url: str | None = None
        self._max_receive: int | None = None
        self._serial = 0

    # -- control (called by the engine's refresh) --------------------------------------------------
    def update(self, config: MappingConfig) -> None:
        self.config = config

    def reconcile(self) -> None:
        cfg = self.config
        if cfg.enabled:
            try:
                self._read_queue()
            except Exception as error:
                log.warning("esm %s: queue %s not readable: %s", cfg.short, cfg.source_arn, error)
                return
        desired = self.ctx.sqs_pollers() if cfg.enabled else 0
        with self._lock:
            self._threads = [(t, s) for t, s in self._threads if t.is_alive()]
            active = [(t, s) for t, s in self._threads if not s.is_set()]
            for _, stop in active[desired:]:
                stop.set()
            for _ in range(desired - len(active)):
                self._serial += 1
                stop = threading.Event()
                thread = threading.Thread(
                    target=self._run,
                    args=(stop,),
                    name=f"esm-sqs-{cfg.short}-{self._serial}",
                    daemon=True,
                )
                self._threads.append((thread, stop))
                thread.start()

    def _read_queue(self) -> None:
        if self._queue_url is None:
            self._queue_url = self.ctx.queue_url(self.config.source_arn)
        attrs = self.ctx.sqs.get_queue_attributes(
            QueueUrl=self._queue_url, AttributeNames=["RedrivePolicy"]
        ).get("Attributes", {})
        policy = json.loads(attrs.get("RedrivePolicy") or "{}")
        max_receive = policy.get("maxReceiveCount")
        self._max_receive = int(max_receive) if max_receive is not None else None

    def running(self) -> bool:
        """At least one poller thread runs and has not been told to stop."""
        with self._lock:
            return any(t.is_alive() and not s.is_set() for t, s in self._threads)

    def active_pollers(self) -> int:
        """Poller threads alive, including stopping ones still finishing a receive or batch."""
        with self._lock:
            return sum(1 for t, _ in self._threads if t.is_alive())

    def stop(self) -> None:
        with self._lock:
            for _, stop in self._threads:
                stop.set()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = [t for t, _ in self._threads]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def idle(self) -> bool:
        with self._lock:
            if self._busy:
                return False
        if self._queue_url is None:
            return False
        attrs = self.ctx.sqs.get_queue_attributes(
            QueueUrl=self._queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        ).get("Attributes", {})
        if any(int(v) for v in attrs.values()):
            return False
        with self._lock:
            return not self._busy

    # -- polling -----------------------------------------------------------------------------------
    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                received = self._poll_once(stop)
            except Exception as error:
                if stop.is_set():
                    return
                log.warning("esm %s: polling failed: %s", self.config.short, error)
                stop.wait(1.0)
                continue
            if not received and not self.ctx.long_poll_seconds:
                stop.wait(self.ctx.poll_interval)

    def _set_busy(self, delta: int) -> None:
        with self._lock:
            self._busy += delta

    def _receive(self, count: int, wait: int) -> list[dict[str, Any]]:
        return self.ctx.sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=max(1, min(MAX_RECEIVE, count)),
            WaitTimeSeconds=wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])

    def _poll_once(self, stop: threading.Event) -> bool:
        """Gather one batch and deliver it; False when the queue had nothing."""
        if self._queue_url is None:
            return False
        cfg = self.config
        filters = compile_filters(cfg.filter_criteria)
        batch: list[dict[str, Any]] = []
        received_any = False
        deadline: float | None = None
        try:
            while not stop.is_set():
                # Long polling while the queue is empty (as Lambda's pollers do; a SendMessage
                # wakes it at once), short receives while a batch is being gathered.
                wait = self.ctx.long_poll_seconds if not received_any else 0
                messages = self._receive(cfg.batch_size - len(batch), wait)
                if messages:
                    if not received_any:
                        self._set_busy(1)
                        received_any = True
                    self.ctx.touch()
                    kept = self._filter(cfg, filters, messages)
                    # A message received again while the window is open (its visibility timeout
                    # ran out) replaces its older copy: one record per message, newest receipt.
                    again = {r["messageId"] for r in kept}
                    batch = [r for r in batch if r["messageId"] not in again] + kept
                    if deadline is None and batch:
                        deadline = time.monotonic() + cfg.window
                if len(batch) >= cfg.batch_size or cfg.window <= 0 or deadline is None:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if not messages:
                    stop.wait(min(self.ctx.poll_interval, remaining))
            if batch and not stop.is_set():  # stopped: the messages reappear after the timeout
                self._deliver(cfg, batch)
            return received_any
        finally:
            if received_any:
                self._set_busy(-1)
                self.ctx.touch()

    def _filter(
        self, cfg: MappingConfig, filters: Any, messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        records = [lambda_record(m, cfg.source_arn) for m in messages]
        if filters is None:
            return records
        kept, dropped = [], []
        for record in records:
            (kept if matches(filters, record) else dropped).append(record)
        if dropped:
            self._delete(cfg, dropped)
            self.stats.add(records_filtered=len(dropped))
            log.info(
                "esm %s fn=%s filtered out %d message(s): deleted without invoking",
                cfg.short,
                cfg.function_name,
                len(dropped),
            )
        return kept

    def _delete(self, cfg: MappingConfig, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), MAX_RECEIVE):
            chunk = records[start : start + MAX_RECEIVE]
            response = self.ctx.sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(chunk)
                ],
            )
            for failure in response.get("Failed", []):
                log.warning(
                    "esm %s: delete of message %s failed: %s",
                    cfg.short,
                    chunk[int(failure["Id"])]["messageId"],
                    failure.get("Code"),
                )

    def _deliver(self, cfg: MappingConfig, records: list[dict[str, Any]]) -> None:
        ids = [r["messageId"] for r in records]
        event = {"Records": records}
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
                self._delete(cfg, to_delete)
                deleted.update(r["messageId"] for r in to_delete)
            failed_count = len(records) - len(succeeded)
            self.stats.add(
                invocations=1,
                records_delivered=len(records),
                failures=int(outcome.kind != "ok"),
                records_failed=failed_count,
            )
            log_invocation(
                cfg,
                len(records),
                outcome,
                time.monotonic() - started,
                delivery=delivery,
                deliveries=deliveries,
            )
        self._count_redrives(cfg, [r for r in records if r["messageId"] not in deleted])

    def _count_redrives(self, cfg: MappingConfig, kept: list[dict[str, Any]]) -> None:
        if not kept or self._max_receive is None:
            return
        last = [
            r
            for r in kept
            if int(r["attributes"].get("ApproximateReceiveCount", "0")) >= self._max_receive
        ]
        if last:
            self.stats.add(sent_to_dlq=len(last))
            log.warning(
                "esm %s fn=%s %d message(s) failed on receive %d of %d: SQS moves them to the DLQ",
                cfg.short,
                cfg.function_name,
                len(last),
                self._max_receive,
                self._max_receive,
            )
