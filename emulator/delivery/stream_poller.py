"""DynamoDB stream event source mappings: a worker per shard, ParallelizationFactor lanes each.

The stream is read in process (``StreamShards``: emulator/delivery/sources.py over moto's stream
shards).

Shards: one ``ShardWorker`` per shard the stream lists. A child shard (``parent_shard_id`` names a
shard the stream still lists) starts once its parent is closed and fully handled, from its first
record; the shards present when the mapping starts begin at its StartingPosition (TRIM_HORIZON or
LATEST: the shard's last sequence number then, taken before ``reconcile`` returns, so records
written after the mapping reads Enabled are delivered). After a disable/enable a shard resumes
after its checkpoint (the last record handled, with every record before it handled too).

Each worker reads its shard (``records``, up to 1,000 at a time, after the last one read), drops
records that match no filter (the checkpoint moves past them without an invocation) and hands the
rest to its lanes: ParallelizationFactor (1-10) lanes, a record's lane chosen by its partition
key (the table's hash key, so one key's records stay in order in one lane). Each lane gathers up
to BatchSize records, waits up to MaximumBatchingWindowInSeconds from its oldest record, cuts the
batch before its event would pass 6 MB (Lambda's payload limit), and invokes the function with the
records as Lambda sends them (``eventSourceARN`` = the stream ARN and ``awsRegion`` added, numeric
``ApproximateCreationDateTime``, binary values base64-encoded; ``eventVersion`` and ``SizeBytes``
as the stream gives them). A lane has one batch in flight; a shard up to ParallelizationFactor.

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
  invocation record with ``DDBStreamBatchInfo``, then processing moves past it; an S3 bucket gets
  the record with the invocation's ``payload`` (the batch's event) as one object,
  ``aws/lambda/<mapping UUID>/<shard ID>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<random UUID>`` (Lambda
  developer guide, "Retaining discarded batches": the S3 destination).

Retries wait ``retry_delay`` seconds, doubling up to 2 s. Faults: ``duplicate_deliveries`` N
invokes each batch N times, ``duplicate_rate`` p once more with probability p; a record counts as
processed once any delivery processed it.

Two readers per shard: DynamoDB Streams throttles GetRecords when more than two processes read one
shard (emulator.services.dynamodbstreams.ShardReaders); each mapping (and pipe) is one reader. A
throttled worker backs off (``THROTTLE_BACKOFF`` doubling up to ``MAX_THROTTLE_BACKOFF``) and reads
again from where it was: its records are late, never lost or reordered. A stream with more than two
enabled mappings is logged as a warning when the third starts (``up`` shows it at deploy).

Waiting without polling: a worker whose shard has nothing new waits on emulator.core.wakeups for the
stream (a record written), at most ``IDLE_WAIT``; lanes wait for their worker.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.core import wakeups
from emulator.core.arns import parse_arn
from emulator.delivery.mappings import (
    MAX_EVENT_BYTES,
    BatchOutcome,
    EngineContext,
    MappingConfig,
    MappingStats,
    StreamShards,
    compile_filters,
    count_events,
    encode_event,
    event_size,
    log,
    log_invocation,
    matches,
    read_outcome,
    report_stream_invocation,
)
from emulator.services.dynamodbstreams import READERS_PER_SHARD, shard_readers, shard_source

GET_RECORDS_LIMIT = 1000
MAX_RETRY_DELAY = 2.0
THROTTLE_BACKOFF = 0.1  # s after the first throttled GetRecords
MAX_THROTTLE_BACKOFF = 1.0
IDLE_WAIT = 20.0  # s a caught-up shard worker waits without a signal
# Records a shard worker reads ahead of its lanes, beyond a full batch per lane.
READ_AHEAD = GET_RECORDS_LIMIT


def wall_clock() -> float:
    """Epoch seconds, for record ages (tests move it forward)."""
    return time.time()


def _json_value(value: Any) -> Any:
    """A stream record value JSON has no type for, as the event carries it."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime):
        return value.timestamp()
    raise TypeError(f"{type(value).__name__} in a stream record")


def lambda_record_json(record: dict[str, Any], stream_arn: str, region: str) -> bytes:
    """A GetRecords record as Lambda puts it in the event, in the event's JSON (json.dumps in C,
    where a walk of every value in Python cost more than the mappings' filters)."""
    shaped = dict(record)
    change = shaped.get("dynamodb")
    if isinstance(change, dict):
        change = shaped["dynamodb"] = dict(change)
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, dt.datetime):
            created = created.timestamp()
        if isinstance(created, int | float):
            # DynamoDB Streams rounds down to the second; Lambda sends it as a JSON number.
            change["ApproximateCreationDateTime"] = float(int(created))
    identity = shaped.get("userIdentity")
    if isinstance(identity, dict):
        # GetRecords' Identity (a TTL delete's: Type "Service", PrincipalId
        # "dynamodb.amazonaws.com") as Lambda's event spells it
        shaped["userIdentity"] = {"type": identity["Type"], "principalId": identity["PrincipalId"]}
    shaped["awsRegion"] = region
    shaped["eventSourceARN"] = stream_arn
    return json.dumps(shaped, default=_json_value).encode()


def lambda_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record as Lambda puts it in the event."""
    return json.loads(lambda_record_json(record, stream_arn, region))


# Every mapping of a stream reads each of its records (three consumers in mode lambda): a record
# is shaped once, for all of them, and its dict shared (nothing the engine does writes to one).
# Known by its stream, sequence number and event id (a stream's sequence numbers only grow, even
# across a reset; a table created again has a stream of another ARN; event ids are random).
_SHAPED_LIMIT = 4096
_shaped: dict[tuple[str, str, str], tuple[dict[str, Any], bytes]] = {}
_shaped_lock = threading.Lock()


def shaped_record(
    raw: dict[str, Any], stream_arn: str, region: str
) -> tuple[dict[str, Any], bytes]:
    """The record as the event carries it, and its JSON there (lambda_record_json)."""
    key = (stream_arn, raw["dynamodb"]["SequenceNumber"], raw.get("eventID", ""))
    with _shaped_lock:
        found = _shaped.get(key)
    if found is not None:
        return found
    part = lambda_record_json(raw, stream_arn, region)
    found = (json.loads(part), part)
    with _shaped_lock:
        if len(_shaped) >= _SHAPED_LIMIT:
            del _shaped[next(iter(_shaped))]
        _shaped[key] = found
    return found


def _on_failure_object_key(mapping: str, shard_id: str, at: float) -> str:
    """Where an S3 OnFailure destination keeps a discarded batch's record."""
    stamp = time.gmtime(at)
    day, moment = time.strftime("%Y/%m/%d", stamp), time.strftime("%Y-%m-%dT%H.%M.%S", stamp)
    return f"aws/lambda/{mapping}/{shard_id}/{day}/{moment}-{uuid.uuid4()}"


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
class Item:
    """A record waiting in a lane: as the event carries it, encoded once, and when it came."""

    record: dict[str, Any]
    part: bytes
    arrived: float

    @property
    def seq(self) -> str:
        return sequence(self.record)


@dataclass
class Segment:
    """Records being worked on, with the retry attempts consumed and invocations made."""

    items: list[Item]
    retries: int = 0
    invokes: int = 0
    last: BatchOutcome | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        return [i.record for i in self.items]


class Checkpoint:
    """The last sequence number of a shard such that it and every record before it are handled
    (invoked successfully, discarded or filtered out), while lanes finish records out of order."""

    def __init__(self, position: str | None):
        self.position = position
        self._order: deque[str] = deque()
        self._done: set[str] = set()

    def add(self, seq: str) -> None:
        self._order.append(seq)

    def done(self, seqs: list[str]) -> bool:
        """Mark records handled; True when the position moved."""
        self._done.update(seqs)
        moved = False
        while self._order and self._order[0] in self._done:
            seq = self._order.popleft()
            self._done.discard(seq)
            self.position = seq
            moved = True
        return moved


_stream_mappings: dict[str, dict[str, str]] = {}  # stream ARN -> enabled mapping UUID -> function
_stream_mappings_lock = threading.Lock()


def _reading(cfg: MappingConfig, reads: bool) -> None:
    """Note a mapping starting or stopping to read its stream; warn when it makes more than
    two readers of each shard."""
    with _stream_mappings_lock:
        readers = _stream_mappings.setdefault(cfg.source_arn, {})
        if not reads:
            readers.pop(cfg.uuid, None)
            return
        if cfg.uuid in readers:
            return
        readers[cfg.uuid] = cfg.function_name
        names = sorted(readers.values())
    if len(names) > READERS_PER_SHARD:
        log.warning(
            "warning: stream %s has %d event source mappings (%s): DynamoDB Streams serves at most"
            " %d readers per shard; the others' GetRecords are throttled and their records late",
            parse_arn(cfg.source_arn).resource,
            len(names),
            ", ".join(names),
            READERS_PER_SHARD,
        )


class StreamMappingPoller:
    """The shard workers of one DynamoDB stream mapping."""

    def __init__(
        self,
        ctx: EngineContext,
        config: MappingConfig,
        stats: MappingStats,
        open_source: Callable[[str], StreamShards],
        hash_key: Callable[[str], str | None] = lambda arn: None,
    ):
        self.ctx = ctx
        self.config = config
        self.stats = stats
        self._open_source = open_source
        self._hash_key = hash_key
        self.source: StreamShards | None = None
        self.partition_attribute: str | None = None
        self._lock = threading.Lock()
        self._workers: dict[str, ShardWorker] = {}
        self._started = False  # the mapping's StartingPosition was applied
        # Checkpoint per shard: kept across disable/enable. A shard missing here has not been
        # started yet; None: from its first record.
        self.positions: dict[str, str | None] = {}

    def update(self, config: MappingConfig) -> None:
        self.config = config

    def reconcile(self) -> None:
        cfg = self.config
        if not cfg.enabled:
            self.stop()
            return
        _reading(cfg, True)
        try:
            if self.source is None:
                self.source = self._open_source(cfg.source_arn)
                self.partition_attribute = self._hash_key(cfg.source_arn)
            shards = self.source.shards()
        except Exception as error:
            log.warning("esm %s: stream %s not readable: %s", cfg.short, cfg.source_arn, error)
            return
        listed = {s.shard_id for s in shards}
        with self._lock:
            for shard in shards:
                shard_id = shard.shard_id
                worker = self._workers.get(shard_id)
                if worker is not None:
                    worker.closed = bool(shard.closed)
                    if worker.lanes_wanted != cfg.parallelization and not worker.stopping:
                        worker.stop()  # restarts from its checkpoint with the new factor
                    if worker.finished or worker.is_alive():
                        # running, fully handled (closed shard), or stopping: its successor
                        # starts once it has finished, from its checkpoint
                        continue
                parent = shard.parent_shard_id
                if parent in listed and not self._finished(parent):
                    continue  # parent before child
                if shard_id not in self.positions:
                    self.positions[shard_id] = self._start_position(shard_id, parent in listed)
                worker = ShardWorker(self, shard_id, bool(shard.closed))
                self._workers[shard_id] = worker
                worker.start()
            self._started = True

    def _finished(self, shard_id: str | None) -> bool:
        worker = self._workers.get(shard_id or "")
        return worker is not None and worker.finished

    def _start_position(self, shard_id: str, is_child: bool) -> str | None:
        """Where a shard seen for the first time starts: its first record for a child or a shard
        that appeared later; the mapping's StartingPosition for the shards it started with."""
        if is_child or self._started or self.config.starting_position != "LATEST":
            return None
        assert self.source is not None
        return self.source.last_sequence(shard_id)

    def running(self) -> bool:
        with self._lock:
            return any(w.is_alive() and not w.stopping for w in self._workers.values())

    def active_pollers(self) -> int:
        with self._lock:
            return sum(1 for w in self._workers.values() if w.is_alive())

    def stop(self) -> None:
        _reading(self.config, False)
        with self._lock:
            workers = [w for w in self._workers.values() if not w.stopping]
        for worker in workers:
            worker.stop()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def idle(self) -> bool:
        source = self.source
        if source is None:
            return False
        with self._lock:
            workers = dict(self._workers)
        try:
            shards = source.shards()
        except Exception:
            return False
        for shard in shards:
            worker = workers.get(shard.shard_id)
            if worker is None:  # waiting for its parent, or not yet seen
                if source.last_sequence(shard.shard_id) is not None:
                    return False
            elif not worker.finished and not worker.idle():
                return False
        return True


class ShardWorker(threading.Thread):
    """Reads one shard and feeds its lanes (``config.parallelization`` threads)."""

    def __init__(self, poller: StreamMappingPoller, shard_id: str, closed: bool):
        super().__init__(name=f"esm-ddb-{poller.config.short}-{shard_id[-8:]}", daemon=True)
        self.poller = poller
        self.ctx = poller.ctx
        self.shard_id = shard_id
        self.closed = closed
        self.stop_event = threading.Event()
        self.finished = False  # the shard is closed and fully handled
        self._cond = threading.Condition()
        start = poller.positions.get(shard_id)
        self._read_after = start  # the last record read
        self._checkpoint = Checkpoint(start)
        self.lanes_wanted = poller.config.parallelization
        self._lanes = [Lane(self, n) for n in range(self.lanes_wanted)]

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    @property
    def cfg(self) -> MappingConfig:
        return self.poller.config

    @property
    def source(self) -> StreamShards:
        assert self.poller.source is not None
        return self.poller.source

    def stop(self) -> None:
        self.stop_event.set()
        with self._cond:
            self._cond.notify_all()
        wakeups.notify(shard_source(self.cfg.source_arn, self.shard_id))  # it returns at once

    def stats_add(self, **counts: int) -> None:
        self.poller.stats.add(**counts)

    # -- checkpoint -------------------------------------------------------------------------------
    def handled(self, items: list[Item]) -> None:
        """Records invoked successfully or discarded: the checkpoint may move."""
        if not items:
            return
        with self._cond:
            if self._checkpoint.done([i.seq for i in items]):
                self.poller.positions[self.shard_id] = self._checkpoint.position
            self._cond.notify_all()

    # -- the reader -------------------------------------------------------------------------------
    def run(self) -> None:
        for lane in self._lanes:
            lane.start()
        try:
            self._read_loop()
        finally:
            self.stop_event.set()
            with self._cond:
                self._cond.notify_all()
            for lane in self._lanes:
                lane.join()
        if self.finished:  # its children may start now, not at the next refresh
            self.poller.reconcile()

    def _read_loop(self) -> None:
        stop = self.stop_event
        arn = self.cfg.source_arn
        readers = shard_readers(arn, self.shard_id)
        signal = shard_source(arn, self.shard_id)
        throttles = 0
        while not stop.is_set():
            seen = wakeups.version(signal)
            try:
                room = self._room()
                if room <= 0:
                    with self._cond:
                        if self._room() <= 0 and not stop.is_set():
                            self._cond.wait(1.0)
                    continue
                if not readers.admit(self.cfg.uuid):
                    stop.wait(min(MAX_THROTTLE_BACKOFF, THROTTLE_BACKOFF * 2**throttles))
                    throttles += 1
                    continue
                throttles = 0
                records = self.source.records(
                    self.shard_id, self._read_after, min(GET_RECORDS_LIMIT, room)
                )
            except Exception as error:
                if stop.is_set():
                    break
                log.warning("esm %s: shard %s: %s", self.cfg.short, self.shard_id, error)
                stop.wait(1.0)
                continue
            if records:
                self._distribute(records)
                continue
            if self.closed or self._closed_now():
                self.closed = True
                if self._drain():
                    return
                continue
            wakeups.wait(signal, seen, IDLE_WAIT)

    def _closed_now(self) -> bool:
        """The shard is closed (split): read when it has nothing more, not only at a refresh."""
        try:
            return any(s.shard_id == self.shard_id and s.closed for s in self.source.shards())
        except Exception:
            return False

    def _room(self) -> int:
        cfg = self.cfg
        limit = cfg.batch_size * len(self._lanes) + READ_AHEAD
        with self._cond:
            return limit - sum(len(lane.buffer) for lane in self._lanes)

    def _lane_of(self, record: dict[str, Any]) -> int:
        lanes = len(self._lanes)
        if lanes == 1:
            return 0
        keys = record.get("dynamodb", {}).get("Keys", {})
        attribute = self.poller.partition_attribute
        key = keys.get(attribute) if attribute in keys else keys
        return zlib.crc32(json.dumps(key, sort_keys=True).encode()) % lanes

    def _distribute(self, raws: list[dict[str, Any]]) -> None:
        cfg = self.cfg
        filters = compile_filters(cfg.filter_criteria)
        now = time.monotonic()
        dropped = 0
        placed: list[tuple[int, Item]] = []
        last = self._read_after
        for raw in raws:
            record, part = shaped_record(raw, cfg.source_arn, self.ctx.region)
            last = sequence(record)
            if matches(filters, record):
                placed.append((self._lane_of(record), Item(record, part, now)))
            else:
                placed.append((-1, Item(record, b"", now)))
                dropped += 1
        with self._cond:
            self._read_after = last
            for lane, item in placed:
                self._checkpoint.add(item.seq)
                if lane >= 0:
                    self._lanes[lane].buffer.append(item)
            skipped = [item.seq for lane, item in placed if lane < 0]
            if skipped and self._checkpoint.done(skipped):
                self.poller.positions[self.shard_id] = self._checkpoint.position
            self._cond.notify_all()
        self.ctx.touch()
        count_events(cfg, PolledEventCount=len(raws), FilteredOutEventCount=dropped)
        if dropped:
            self.stats_add(records_filtered=dropped)
            log.info(
                "esm %s fn=%s skipped %d record(s) that match no filter",
                cfg.short,
                cfg.function_name,
                dropped,
            )

    def _drain(self) -> bool:
        """A closed shard read to its end: True once every lane has finished its records."""
        with self._cond:
            while not self.stop_event.is_set():
                if not any(lane.buffer or lane.busy for lane in self._lanes):
                    self.finished = True
                    self._cond.notify_all()
                    return True
                self._cond.wait(1.0)
        return False

    def idle(self) -> bool:
        """No batch in flight, nothing buffered, no record after the last one read."""
        if not self.is_alive():
            return False
        with self._cond:
            if any(lane.buffer or lane.busy for lane in self._lanes):
                return False
            read = self._read_after
        return self.source.last_sequence(self.shard_id) == read

    # -- lanes (called by Lane threads) ------------------------------------------------------------
    def take(self, lane: Lane) -> list[Item] | None:
        """The lane's next batch, waiting until it is due; None when the worker stops."""
        with self._cond:
            while not self.stop_event.is_set():
                cfg = self.cfg
                buffer = lane.buffer
                if buffer:
                    waited = time.monotonic() - buffer[0].arrived
                    due = (
                        len(buffer) >= cfg.batch_size
                        or cfg.window <= 0
                        or waited >= cfg.window
                        or self.closed
                    )
                    if due:
                        batch = self._cut(buffer, cfg.batch_size)
                        lane.busy = True
                        self._cond.notify_all()  # room for the reader
                        return batch
                    self._cond.wait(cfg.window - waited)
                else:
                    self._cond.wait()
        return None

    @staticmethod
    def _cut(buffer: deque[Item], batch_size: int) -> list[Item]:
        """Up to BatchSize records whose event stays within 6 MB (at least one record)."""
        batch = [buffer.popleft()]
        parts = [batch[0].part]
        while buffer and len(batch) < batch_size:
            parts.append(buffer[0].part)
            if event_size(parts) > MAX_EVENT_BYTES:
                break
            batch.append(buffer.popleft())
        return batch

    def lane_done(self, lane: Lane) -> None:
        with self._cond:
            lane.busy = False
            self._cond.notify_all()
        self.ctx.touch()


class Lane(threading.Thread):
    """One of a shard's ParallelizationFactor lanes: one batch in flight, in order."""

    def __init__(self, worker: ShardWorker, index: int):
        super().__init__(name=f"{worker.name}-{index}", daemon=True)
        self.worker = worker
        self.ctx = worker.ctx
        self.index = index
        self.buffer: deque[Item] = deque()
        self.busy = False

    def run(self) -> None:
        worker = self.worker
        while True:
            batch = worker.take(self)
            if batch is None:
                return
            try:
                self._process(batch)
            except Exception as error:  # never lose the lane: the batch is read again later
                log.exception("esm %s: shard %s: %s", worker.cfg.short, worker.shard_id, error)
                worker.stop()
            finally:
                worker.lane_done(self)

    # -- one batch ---------------------------------------------------------------------------------
    def _process(self, batch: list[Item]) -> bool:
        """Deliver one batch until every record succeeded or was discarded (True), or the worker
        is stopped (False: the rest is read again from the checkpoint)."""
        worker = self.worker
        segments: deque[Segment] = deque([Segment(batch)])
        while segments:
            if worker.stop_event.is_set():
                return False
            cfg = worker.cfg
            seg = segments[0]
            if not self._drop_expired(cfg, seg):
                segments.popleft()
                continue
            outcome = self._invoke(cfg, seg)
            if outcome.kind == "ok":
                worker.handled(seg.items)
                segments.popleft()
                continue
            if outcome.kind == "partial":
                failed = outcome.failed or set()
                first = next(i for i, item in enumerate(seg.items) if item.seq in failed)
                if first:
                    worker.handled(seg.items[:first])
                    seg.items = seg.items[first:]
                seg.retries += 1
            elif cfg.bisect and len(seg.items) > 1:
                segments.popleft()
                half = (len(seg.items) + 1) // 2
                segments.appendleft(Segment(seg.items[half:], seg.retries))
                segments.appendleft(Segment(seg.items[:half], seg.retries))
                worker.stats_add(bisections=1)
                log.info(
                    "esm %s fn=%s bisecting a failed batch of %d into %d + %d",
                    cfg.short,
                    cfg.function_name,
                    len(seg.items),
                    half,
                    len(seg.items) - half,
                )
                continue
            else:
                seg.retries += 1
            if 0 <= cfg.max_retry < seg.retries:
                segments.popleft()
                self._send_on_failure_record(cfg, seg, seg.items, "RetryAttemptsExhausted")
                worker.handled(seg.items)
                continue
            delay = min(MAX_RETRY_DELAY, self.ctx.retry_delay * 2 ** (seg.retries - 1))
            worker.stop_event.wait(delay)
        return True

    def _drop_expired(self, cfg: MappingConfig, seg: Segment) -> bool:
        """Discard the records older than MaximumRecordAgeInSeconds (oldest first: a prefix);
        False when none is left."""
        if cfg.max_age < 0:
            return True
        now = wall_clock()
        expired = 0
        for item in seg.items:
            created = created_at(item.record)
            if created is None or now - created <= cfg.max_age:
                break
            expired += 1
        if expired:
            gone = seg.items[:expired]
            self._send_on_failure_record(cfg, seg, gone, "RecordAgeExceeded")
            self.worker.handled(gone)
            seg.items = seg.items[expired:]
        return bool(seg.items)

    def _invoke(self, cfg: MappingConfig, seg: Segment) -> BatchOutcome:
        """Deliver the segment (more than once with the duplicate faults); the furthest progress
        wins."""
        items = seg.items
        ids = [i.seq for i in items]
        event = encode_event([i.part for i in items])
        deliveries = self.ctx.deliveries()
        best: BatchOutcome | None = None
        best_progress = -1
        newest = created_at(items[-1].record)
        for delivery in range(1, deliveries + 1):
            started = time.monotonic()
            age = None if newest is None else wall_clock() - newest
            result = self.ctx.runtime.invoke(cfg.function_name, event)
            outcome = read_outcome(result, ids, cfg.report_failures)
            report_stream_invocation(cfg, outcome, age)
            if outcome.kind == "ok":
                progress = len(items)
            elif outcome.kind == "partial":
                failed = outcome.failed or set()
                progress = next(i for i, seq in enumerate(ids) if seq in failed)
            else:
                progress = 0
            self.worker.stats_add(
                invocations=1,
                records_delivered=len(items),
                failures=int(outcome.kind != "ok"),
                records_failed=len(items) - progress,
                duplicates=int(delivery > 1),
            )
            count_events(
                cfg, InvokedEventCount=len(items), FailedInvokeEventCount=len(items) - progress
            )
            lane = f" lane={self.index}" if self.worker.lanes_wanted > 1 else ""
            log_invocation(
                cfg,
                len(items),
                outcome,
                time.monotonic() - started,
                delivery=delivery,
                deliveries=deliveries,
                extra=f"shard={self.worker.shard_id[-8:]}{lane} attempt={seg.retries + 1}",
            )
            if progress > best_progress:
                best, best_progress = outcome, progress
        seg.invokes += 1
        seg.last = best
        assert best is not None
        return best

    # -- discarding -------------------------------------------------------------------------------
    def _send_on_failure_record(
        self, cfg: MappingConfig, seg: Segment, items: list[Item], condition: str
    ) -> None:
        """Lambda's OnFailure record of ``items`` (their batch info, ``condition``) sent to the
        mapping's OnFailure destination; without one, the records are logged as dropped."""
        worker = self.worker
        worker.stats_add(sent_to_on_failure=len(items))
        first, last = items[0].record, items[-1].record
        if not cfg.on_failure:
            count_events(cfg, DroppedEventCount=len(items))
            log.warning(
                "esm %s fn=%s %s: %d record(s) %s..%s dropped (no OnFailure destination)",
                cfg.short,
                cfg.function_name,
                condition,
                len(items),
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
                "shardId": worker.shard_id,
                "startSequenceNumber": sequence(first),
                "endSequenceNumber": sequence(last),
                "approximateArrivalOfFirstRecord": _iso(created_at(first)),
                "approximateArrivalOfLastRecord": _iso(created_at(last)),
                "batchSize": len(items),
                "streamArn": cfg.source_arn,
            },
        }
        body = json.dumps(document)
        destination = cfg.on_failure
        try:
            target = parse_arn(destination)
            if target.service == "s3":
                document["payload"] = encode_event([i.part for i in items]).decode()
                self.ctx.client("s3").put_object(
                    Bucket=target.resource,
                    Key=_on_failure_object_key(cfg.uuid, worker.shard_id, time.time()),
                    Body=json.dumps(document).encode(),
                )
            elif target.service == "sns":
                self.ctx.client("sns").publish(TopicArn=destination, Message=body)
            else:
                sqs = self.ctx.client("sqs")
                url = sqs.get_queue_url(
                    QueueName=target.resource, QueueOwnerAWSAccountId=target.account
                )
                sqs.send_message(QueueUrl=url["QueueUrl"], MessageBody=body)
        except Exception as error:
            log.error(
                "esm %s fn=%s could not send %s record to %s: %s",
                cfg.short,
                cfg.function_name,
                condition,
                destination,
                error,
            )
            count_events(cfg, DroppedEventCount=len(items))
            return
        count_events(cfg, OnFailureDestinationDeliveredEventCount=len(items))
        log.warning(
            "esm %s fn=%s %s: %d record(s) %s..%s sent to %s",
            cfg.short,
            cfg.function_name,
            condition,
            len(items),
            sequence(first),
            sequence(last),
            parse_arn(destination).resource,
        )
