"""DynamoDB stream event source mappings: one worker per shard, one batch in flight per shard.

Each worker reads its shard with GetRecords from StartingPosition (TRIM_HORIZON or LATEST; after a
disable/enable, from the last record handled), drops records that match no filter (the
checkpoint moves past them without an invocation), gathers up to BatchSize records or waits up to
MaximumBatchingWindowInSeconds from the first one, and invokes the function with the records as
Lambda sends them (``eventSourceARN`` = the stream ARN and ``awsRegion`` added, numeric
``ApproximateCreationDateTime``, binary values base64-encoded).

A batch that fails is handled as Lambda's stream pollers do (Lambda developer guide:
"Configuring partial batch response with DynamoDB and Lambda", "Retain discarded records for a
DynamoDB event source"):

- ReportBatchItemFailures with valid ``batchItemFailures`` (itemIdentifier =
  ``dynamodb.SequenceNumber``): the checkpoint moves to the lowest failed sequence number and the
  records from there on are retried (one retry attempt consumed).
- Function error or invalid partial response: with BisectBatchOnFunctionError the batch is split
  in two halves retried in order, the first half first (a split consumes no retry attempt;
  halves keep the attempts already consumed); otherwise, or for a single record, the batch is
  retried (one attempt consumed).
- MaximumRetryAttempts (-1: forever): past it, the batch is discarded with condition
  ``RetryAttemptsExhausted``. MaximumRecordAgeInSeconds (-1: forever): before every invocation,
  records older than that are discarded with condition ``RecordAgeExceeded``.
- A discarded batch goes to the OnFailure destination (SQS queue or SNS topic) as Lambda's
  invocation record with ``DDBStreamBatchInfo``, then processing moves past it.

Retries wait ``retry_delay`` seconds, doubling up to 2 s. Faults: ``duplicate_deliveries`` N
invokes each batch N times; a record counts as processed once any delivery processed it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
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

GET_RECORDS_LIMIT = 1000
MAX_RETRY_DELAY = 2.0
IDLE_AFTER = 5.0  # seconds without records before a shard is polled at the idle rate
IDLE_POLL_INTERVAL = 0.5


def _jsonable(value: Any) -> Any:
    """A GetRecords value (as botocore parses it) back in the JSON the event carries."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return value


def lambda_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record as Lambda puts it in the event."""
    shaped = _jsonable(record)
    change = shaped.get("dynamodb", {})
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, int | float):
        # DynamoDB Streams rounds down to the second; Lambda sends it as a JSON number.
        change["ApproximateCreationDateTime"] = float(int(created))
    shaped["awsRegion"] = region
    shaped["eventSourceARN"] = stream_arn
    return shaped


def sequence(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


def created_at(record: dict[str, Any]) -> float | None:
    value = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    return float(value) if isinstance(value, int | float) else None


def _iso(epoch: float | None, millis: bool = False) -> str | None:
    if epoch is None:
        return None
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    if millis:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Segment:
    """Records being worked on, with the retry attempts consumed and invocations made."""

    records: list[dict[str, Any]]
    retries: int = 0
    invokes: int = 0
    last: BatchOutcome | None = None


class StreamMappingPoller:
    """The shard workers of one DynamoDB stream mapping."""

    kind = "dynamodb"

    def __init__(self, ctx: EngineContext, config: MappingConfig, stats: MappingStats):
        self.ctx = ctx
        self.config = config
        self.stats = stats
        self._lock = threading.Lock()
        self._workers: dict[str, ShardWorker] = {}
        # Last sequence number handled per shard: kept across disable/enable, like a checkpoint.
        self.positions: dict[str, str | None] = {}

    def update(self, config: MappingConfig) -> None:
        self.config = config

    def reconcile(self) -> None:
        cfg = self.config
        if not cfg.enabled:
            self.stop()
            return
        try:
            description = self.ctx.streams.describe_stream(StreamArn=cfg.source_arn)[
                "StreamDescription"
            ]
        except Exception as error:
            log.warning("esm %s: stream %s not readable: %s", cfg.short, cfg.source_arn, error)
            return
        with self._lock:
            for shard in description.get("Shards", []):
                shard_id = shard["ShardId"]
                worker = self._workers.get(shard_id)
                if worker is not None and (worker.finished or worker.is_alive()):
                    # running, fully handled (closed shard), or stopping: its successor starts
                    # once it has finished, from the last record it handled
                    continue
                worker = ShardWorker(self, shard_id)
                self._workers[shard_id] = worker
                worker.start()

    def running(self) -> bool:
        """At least one shard worker runs and has not been told to stop."""
        with self._lock:
            return any(w.is_alive() and not w.stopping for w in self._workers.values())

    def active_pollers(self) -> int:
        """Shard workers alive, including stopping ones still finishing a batch."""
        with self._lock:
            return sum(1 for w in self._workers.values() if w.is_alive())

    def stop(self) -> None:
        with self._lock:
            for worker in self._workers.values():
                worker.stop_event.set()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def idle(self) -> bool:
        with self._lock:
            workers = list(self._workers.values())
        return all(w.idle() for w in workers if not w.finished)


class ShardWorker(threading.Thread):
    def __init__(self, poller: StreamMappingPoller, shard_id: str):
        super().__init__(name=f"esm-ddb-{poller.config.short}-{shard_id[-8:]}", daemon=True)
        self.poller = poller
        self.ctx = poller.ctx
        self.shard_id = shard_id
        self.stop_event = threading.Event()
        self.finished = False  # the shard is closed and fully handled
        self._lock = threading.Lock()
        self._busy = False
        self._buffer: deque[dict[str, Any]] = deque()
        self._iterator: str | None = None
        self._first_buffered: float | None = None
        self._fetched_upto: str | None = None
        self._last_records = time.monotonic()

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    @property
    def cfg(self) -> MappingConfig:
        return self.poller.config

    # -- position ----------------------------------------------------------------------------------
    def _set_position(self, seq: str) -> None:
        self.poller.positions[self.shard_id] = seq

    def _initial_iterator(self) -> str:
        position = self.poller.positions.get(self.shard_id)
        args: dict[str, Any] = {"StreamArn": self.cfg.source_arn, "ShardId": self.shard_id}
        if position is not None:
            args.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=position)
        else:
            start = self.cfg.starting_position
            args["ShardIteratorType"] = "LATEST" if start == "LATEST" else "TRIM_HORIZON"
        return self.ctx.streams.get_shard_iterator(**args)["ShardIterator"]

    # -- the loop ----------------------------------------------------------------------------------
    def _idle_interval(self) -> float:
        """poll_interval while records flow; IDLE_POLL_INTERVAL once the shard has been quiet
        for IDLE_AFTER seconds (every moto GetRecords call stores a new iterator for good)."""
        if time.monotonic() - self._last_records < IDLE_AFTER:
            return self.ctx.poll_interval
        return max(self.ctx.poll_interval, IDLE_POLL_INTERVAL)

    def run(self) -> None:
        stop = self.stop_event
        while not stop.is_set():
            try:
                if not self._step():
                    stop.wait(self._idle_interval())
            except Exception as error:
                if stop.is_set():
                    break
                log.warning("esm %s: shard %s: %s", self.cfg.short, self.shard_id, error)
                with self._lock:
                    self._buffer.clear()
                    self._first_buffered = None
                    self._iterator = None  # re-read from the last record handled
                stop.wait(1.0)
            if self.finished:
                break

    def _step(self) -> bool:
        """Fetch and deliver at most one batch; False when there was nothing to do."""
        cfg = self.cfg
        with self._lock:
            if self._iterator is None and not self.finished:
                self._iterator = self._initial_iterator()
            fetched = self._fetch(cfg)
            if not self._buffer:
                if self._iterator is None:  # closed shard, fully read
                    self.finished = True
                return fetched
            waited = time.monotonic() - (self._first_buffered or time.monotonic())
            if (
                len(self._buffer) < cfg.batch_size
                and cfg.window > 0
                and waited < cfg.window
                and self._iterator is not None
            ):
                return False
            batch = [self._buffer.popleft() for _ in range(min(cfg.batch_size, len(self._buffer)))]
            if not self._buffer:  # records left over (BatchSize lowered) have waited already
                self._first_buffered = None
            self._busy = True
        completed = False
        try:
            completed = self._process(cfg, batch)
        finally:
            with self._lock:
                self._busy = False
                if completed and not self._buffer and self._fetched_upto is not None:
                    self._set_position(self._fetched_upto)
            self.ctx.touch()
        return True

    def _fetch(self, cfg: MappingConfig) -> bool:
        """Read records into the buffer (matching ones only) until it holds a batch."""
        filters = compile_filters(cfg.filter_criteria)
        got = False
        while self._iterator is not None and len(self._buffer) < cfg.batch_size:
            response = self.ctx.streams.get_records(
                ShardIterator=self._iterator,
                Limit=max(1, min(GET_RECORDS_LIMIT, cfg.batch_size - len(self._buffer))),
            )
            records = response.get("Records", [])
            if records:
                self._iterator = response.get("NextShardIterator")
            elif response.get("NextShardIterator") is None:
                self._iterator = None
            if not records:
                break
            got = True
            self._last_records = time.monotonic()
            self.ctx.touch()
            dropped = 0
            for raw in records:
                record = lambda_record(raw, cfg.source_arn, self.ctx.region)
                self._fetched_upto = sequence(record)
                if matches(filters, record):
                    if self._first_buffered is None:
                        self._first_buffered = time.monotonic()
                    self._buffer.append(record)
                else:
                    dropped += 1
            if dropped:
                self.stats_add(records_filtered=dropped)
                log.info(
                    "esm %s fn=%s skipped %d record(s) that match no filter",
                    cfg.short,
                    cfg.function_name,
                    dropped,
                )
            if not self._buffer and self._fetched_upto is not None and not self._busy:
                self._set_position(self._fetched_upto)
        return got

    def idle(self) -> bool:
        """No batch in flight, nothing buffered, no record after the last one read."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._busy or self._buffer or not self.is_alive():
                return False
            if self._iterator is None:
                return self.finished
            response = self.ctx.streams.get_records(ShardIterator=self._iterator, Limit=1)
            return not response.get("Records")
        finally:
            self._lock.release()

    def stats_add(self, **counts: int) -> None:
        self.poller.stats.add(**counts)

    # -- one batch ---------------------------------------------------------------------------------
    def _process(self, cfg: MappingConfig, batch: list[dict[str, Any]]) -> bool:
        """Deliver one batch until every record succeeded or was discarded (True), or the worker
        is stopped (False: the rest is read again from the last record handled)."""
        segments: deque[Segment] = deque([Segment(batch)])
        while segments:
            if self.stop_event.is_set():
                return False
            cfg = self.poller.config
            seg = segments[0]
            if not self._drop_expired(cfg, seg):
                segments.popleft()
                continue
            outcome = self._invoke(cfg, seg)
            if outcome.kind == "ok":
                self._set_position(sequence(seg.records[-1]))
                segments.popleft()
                continue
            if outcome.kind == "partial":
                failed = outcome.failed or set()
                first = next(i for i, r in enumerate(seg.records) if sequence(r) in failed)
                if first:
                    self._set_position(sequence(seg.records[first - 1]))
                    seg.records = seg.records[first:]
                seg.retries += 1
            elif cfg.bisect and len(seg.records) > 1:
                segments.popleft()
                half = (len(seg.records) + 1) // 2
                segments.appendleft(Segment(seg.records[half:], seg.retries))
                segments.appendleft(Segment(seg.records[:half], seg.retries))
                self.stats_add(bisections=1)
                log.info(
                    "esm %s fn=%s bisecting a failed batch of %d into %d + %d",
                    cfg.short,
                    cfg.function_name,
                    len(seg.records),
                    half,
                    len(seg.records) - half,
                )
                continue
            else:
                seg.retries += 1
            if 0 <= cfg.max_retry < seg.retries:
                segments.popleft()
                self._discard(cfg, seg, seg.records, "RetryAttemptsExhausted")
                self._set_position(sequence(seg.records[-1]))
                continue
            delay = min(MAX_RETRY_DELAY, self.ctx.retry_delay * 2 ** (seg.retries - 1))
            self.stop_event.wait(delay)
        return True

    def _drop_expired(self, cfg: MappingConfig, seg: Segment) -> bool:
        """Discard the records older than MaximumRecordAgeInSeconds (oldest first: a prefix);
        False when none is left."""
        if cfg.max_age < 0:
            return True
        now = time.time()
        expired = 0
        for record in seg.records:
            created = created_at(record)
            if created is None or now - created <= cfg.max_age:
                break
            expired += 1
        if expired:
            self._discard(cfg, seg, seg.records[:expired], "RecordAgeExceeded")
            self._set_position(sequence(seg.records[expired - 1]))
            seg.records = seg.records[expired:]
        return bool(seg.records)

    def _invoke(self, cfg: MappingConfig, seg: Segment) -> BatchOutcome:
        """Deliver the segment (N times with duplicate_deliveries); the furthest progress wins."""
        records = seg.records
        ids = [sequence(r) for r in records]
        event = {"Records": records}
        deliveries = self.ctx.deliveries()
        best: BatchOutcome | None = None
        best_progress = -1
        for delivery in range(1, deliveries + 1):
            started = time.monotonic()
            result = self.ctx.runtime.invoke(cfg.function_name, event)
            outcome = read_outcome(result, ids, cfg.report_failures)
            if outcome.kind == "ok":
                progress = len(records)
            elif outcome.kind == "partial":
                progress = next(i for i, r in enumerate(records) if sequence(r) in outcome.failed)
            else:
                progress = 0
            self.stats_add(
                invocations=1,
                records_delivered=len(records),
                failures=int(outcome.kind != "ok"),
                records_failed=len(records) - progress,
            )
            log_invocation(
                cfg,
                len(records),
                outcome,
                time.monotonic() - started,
                delivery=delivery,
                deliveries=deliveries,
                extra=f"shard={self.shard_id[-8:]} attempt={seg.retries + 1}",
            )
            if progress > best_progress:
                best, best_progress = outcome, progress
        seg.invokes += 1
        seg.last = best
        assert best is not None
        return best

    # -- discarding -------------------------------------------------------------------------------
    def _discard(
        self, cfg: MappingConfig, seg: Segment, records: list[dict[str, Any]], condition: str
    ) -> None:
        self.stats_add(sent_to_on_failure=len(records))
        first, last = records[0], records[-1]
        if not cfg.on_failure:
            log.warning(
                "esm %s fn=%s %s: %d record(s) %s..%s dropped (no OnFailure destination)",
                cfg.short,
                cfg.function_name,
                condition,
                len(records),
                sequence(first),
                sequence(last),
            )
            return
        response_context: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if seg.last is not None and seg.last.function_error:
            response_context["functionError"] = seg.last.function_error
        document = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": cfg.function_arn,
                "condition": condition,
                "approximateInvokeCount": seg.invokes,
            },
            "responseContext": response_context,
            "version": "1.0",
            "timestamp": _iso(time.time(), millis=True),
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": sequence(first),
                "endSequenceNumber": sequence(last),
                "approximateArrivalOfFirstRecord": _iso(created_at(first)),
                "approximateArrivalOfLastRecord": _iso(created_at(last)),
                "batchSize": len(records),
                "streamArn": cfg.source_arn,
            },
        }
        body = json.dumps(document)
        destination = cfg.on_failure
        try:
            if destination.split(":")[2] == "sns":
                self.ctx.sns.publish(TopicArn=destination, Message=body)
            else:
                self.ctx.sqs.send_message(
                    QueueUrl=self.ctx.queue_url(destination), MessageBody=body
                )
        except Exception as error:
            log.error(
                "esm %s fn=%s could not send %s record to %s: %s",
                cfg.short,
                cfg.function_name,
                condition,
                destination,
                error,
            )
            return
        log.warning(
            "esm %s fn=%s %s: %d record(s) %s..%s sent to %s",
            cfg.short,
            cfg.function_name,
            condition,
            len(records),
            sequence(first),
            sequence(last),
            destination.split(":")[-1],
        )
