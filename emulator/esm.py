"""Event source mappings, delivered as Lambda delivers them (the local stack's only deliverer).

``EventSourceMappingEngine`` reads the mappings from moto's Lambda API
(ListEventSourceMappings, re-read every ``refresh_interval`` seconds so that
UpdateEventSourceMapping takes effect), runs pollers for them and invokes functions through the
runtime:

- SQS queues (emulator/esm_sqs.py): BatchSize, MaximumBatchingWindowInSeconds, the queue's own
  visibility timeout, FilterCriteria on the JSON body (non-matching messages deleted without an
  invocation), ReportBatchItemFailures, DLQ redrive left to SQS (moto redrives at receive time).
- DynamoDB streams (emulator/esm_streams.py): StartingPosition, BatchSize, batching window, one
  batch in flight per shard, FilterCriteria, ReportBatchItemFailures (checkpoint at the lowest
  failed sequence number), BisectBatchOnFunctionError, MaximumRetryAttempts,
  MaximumRecordAgeInSeconds, OnFailure destination (SQS or SNS) with the DDBStreamBatchInfo record.

Faults (emulator/faults.py) are read live: ``duplicate_deliveries`` (each SQS batch / stream batch
invoked N times, every result applied) and ``sqs_pollers`` (concurrent pollers per SQS mapping).

One log line per invocation on the ``emulator.esm`` logger: mapping uuid (8 chars), function,
record count, outcome. Record contents are never logged.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from emulator.filters import FilterCriteria

if TYPE_CHECKING:
    from emulator.faults import Faults
    from emulator.runtime import Runtime

log = logging.getLogger("emulator.esm")

REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"

# Counters every mapping reports in stats(), whatever its kind.
STAT_KEYS = (
    "invocations",  # function invocations (each duplicate delivery counts)
    "records_delivered",  # records in those invocations
    "records_filtered",  # records that matched no filter: deleted (SQS) / skipped (streams)
    "failures",  # invocations that failed: function error, malformed or partial response
    "records_failed",  # records left to retry by those failures
    "sent_to_dlq",  # SQS: messages that failed on their last allowed receive (maxReceiveCount)
    "sent_to_on_failure",  # streams: records discarded to the OnFailure destination (or dropped)
    "bisections",  # streams: failed batches split in two
)


def _as_int(value: Any, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def source_kind(arn: str) -> str:
    """ "sqs", "dynamodb" (a DynamoDB stream) or the ARN's service for anything unsupported."""
    parts = arn.split(":")
    service = parts[2] if len(parts) > 2 else ""
    if service == "dynamodb" and "/stream/" in arn:
        return "dynamodb"
    return service


@dataclass(frozen=True)
class MappingConfig:
    """One mapping as ListEventSourceMappings returns it, with Lambda's defaults applied."""

    uuid: str
    function_arn: str
    source_arn: str
    kind: str
    enabled: bool
    batch_size: int
    window: float  # MaximumBatchingWindowInSeconds
    filter_criteria: dict | None
    report_failures: bool  # FunctionResponseTypes contains ReportBatchItemFailures
    bisect: bool
    max_retry: int  # -1: infinite
    max_age: int  # -1: infinite
    on_failure: str | None  # destination ARN
    starting_position: str

    @classmethod
    def from_api(cls, m: dict[str, Any]) -> MappingConfig:
        arn = m.get("EventSourceArn", "")
        kind = source_kind(arn)
        destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        return cls(
            uuid=m["UUID"],
            function_arn=m.get("FunctionArn", ""),
            source_arn=arn,
            kind=kind,
            enabled=m.get("State") == "Enabled",
            batch_size=max(1, _as_int(m.get("BatchSize"), 10 if kind == "sqs" else 100)),
            window=max(0.0, float(_as_int(m.get("MaximumBatchingWindowInSeconds"), 0))),
            filter_criteria=m.get("FilterCriteria") or None,
            report_failures=REPORT_BATCH_ITEM_FAILURES in (m.get("FunctionResponseTypes") or []),
            bisect=_as_bool(m.get("BisectBatchOnFunctionError")),
            max_retry=_as_int(m.get("MaximumRetryAttempts"), -1),
            max_age=_as_int(m.get("MaximumRecordAgeInSeconds"), -1),
            on_failure=destination or None,
            starting_position=m.get("StartingPosition") or "TRIM_HORIZON",
        )

    @property
    def short(self) -> str:
        return self.uuid[:8]

    @property
    def function_name(self) -> str:
        """The function's name (what the runtime is invoked with), from its possibly qualified
        ARN ``arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]``."""
        parts = self.function_arn.split(":")
        return parts[6] if len(parts) > 6 else self.function_arn


class MappingStats:
    """Thread-safe counters of one mapping."""

    def __init__(self, config: MappingConfig):
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(STAT_KEYS, 0)
        self.config = config

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                self._counts[name] += value

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
        cfg = self.config
        return {
            "function": cfg.function_name,
            "source": cfg.source_arn,
            "kind": cfg.kind,
            "state": "Enabled" if cfg.enabled else "Disabled",
            **counts,
        }


_filter_cache: dict[str, Any] = {}
_filter_cache_lock = threading.Lock()


def compile_filters(criteria: dict | None) -> Any:
    """The mapping's FilterCriteria, compiled once per distinct value (None: match everything)."""
    if not criteria or not criteria.get("Filters"):
        return None
    key = json.dumps(criteria, sort_keys=True)
    with _filter_cache_lock:
        compiled = _filter_cache.get(key)
        if compiled is None:
            compiled = FilterCriteria.from_mapping(criteria)
            _filter_cache[key] = compiled
        return compiled


def matches(filters: Any, record: dict[str, Any]) -> bool:
    return filters is None or filters.matches(record)


@dataclass
class BatchOutcome:
    """How Lambda reads one invocation's result for a batch.

    ``kind``: "ok" (every record succeeded), "partial" (valid batchItemFailures),
    "error" (function error, timeout, crash) or "malformed" (an invalid partial response, which
    fails the whole batch). ``failed`` holds the failed item identifiers; None means all of them.
    """

    kind: str
    failed: set[str] | None = field(default_factory=set)
    function_error: str | None = None

    @property
    def all_failed(self) -> bool:
        return self.failed is None


def read_outcome(  # noqa: PLR0911 - one return per documented condition
    result: Any, identifiers: list[str], report_failures: bool
) -> BatchOutcome:
    """Apply Lambda's success and failure conditions to an invocation result.

    Success: any response without ReportBatchItemFailures; with it, a null response, an object
    without ``batchItemFailures``, a null or empty list. Whole-batch failure: a function error, a
    response that is not an object, ``batchItemFailures`` not a list, an entry without a non-empty
    string ``itemIdentifier`` or with an identifier that is not in the batch.
    """
    if not getattr(result, "ok", False):
        return BatchOutcome("error", None, "Unhandled")
    if not report_failures:
        return BatchOutcome("ok")
    payload = result.payload
    if payload is None:
        return BatchOutcome("ok")
    if not isinstance(payload, dict):
        return BatchOutcome("malformed", None)
    failures = payload.get("batchItemFailures")
    if failures is None or failures == []:
        return BatchOutcome("ok")
    if not isinstance(failures, list):
        return BatchOutcome("malformed", None)
    known = set(identifiers)
    failed: set[str] = set()
    for item in failures:
        ident = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(ident, str) or not ident or ident not in known:
            return BatchOutcome("malformed", None)
        failed.add(ident)
    return BatchOutcome("partial", failed)


def log_invocation(
    cfg: MappingConfig,
    records: int,
    outcome: BatchOutcome,
    elapsed: float,
    *,
    delivery: int = 1,
    deliveries: int = 1,
    extra: str = "",
) -> None:
    text = outcome.kind
    if outcome.kind == "partial":
        text = f"partial failed={len(outcome.failed or ())}"
    dup = f" delivery={delivery}/{deliveries}" if deliveries > 1 else ""
    level = logging.INFO if outcome.kind == "ok" else logging.WARNING
    log.log(
        level,
        "esm %s fn=%s records=%d outcome=%s%s %dms%s",
        cfg.short,
        cfg.function_name,
        records,
        text,
        dup,
        elapsed * 1000,
        f" {extra}" if extra else "",
    )


class EngineContext:
    """What the pollers share: clients, runtime, faults, timings and the activity counter."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        runtime: Runtime,
        faults: Faults,
        *,
        poll_interval: float,
        retry_delay: float,
        long_poll_seconds: int,
    ):
        self.endpoint_url = endpoint_url
        self.long_poll_seconds = long_poll_seconds
        self.region = region
        self.runtime = runtime
        self.faults = faults
        self.poll_interval = poll_interval
        self.retry_delay = retry_delay
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - the local endpoint's dummy credentials
            region_name=region,
        )
        config = Config(
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
            max_pool_connections=64,
            account_id_endpoint_mode="disabled",
        )

        def client(service: str) -> Any:
            return session.client(service, endpoint_url=endpoint_url, config=config)

        self.lambda_ = client("lambda")
        self.sqs = client("sqs")
        self.sns = client("sns")
        self.streams = client("dynamodbstreams")
        self._activity = 0
        self._activity_lock = threading.Lock()

    def touch(self) -> None:
        """Record progress (messages received, records fetched, an invocation finished)."""
        with self._activity_lock:
            self._activity += 1

    @property
    def activity(self) -> int:
        with self._activity_lock:
            return self._activity

    def deliveries(self) -> int:
        return max(1, _as_int(getattr(self.faults, "duplicate_deliveries", 1), 1))

    def sqs_pollers(self) -> int:
        return max(1, _as_int(getattr(self.faults, "sqs_pollers", 1), 1))

    def queue_url(self, queue_arn: str) -> str:
        parts = queue_arn.split(":")
        return self.sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])[
            "QueueUrl"
        ]


class EventSourceMappingEngine:
    """Runs every event source mapping that moto's Lambda API lists."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        runtime: Runtime,
        faults: Faults,
        *,
        refresh_interval: float = 1.0,
        poll_interval: float = 0.1,
        retry_delay: float = 0.2,
        long_poll_seconds: int = 1,
    ):
        """``refresh_interval``: seconds between reads of the mappings. ``poll_interval``: pause
        between polls of an active stream shard (and of a queue without long polling).
        ``retry_delay``: first pause before a stream batch is retried (doubling, up to 2 s).
        ``long_poll_seconds``: ReceiveMessage WaitTimeSeconds while a queue is empty (0: short
        polling every poll_interval); it bounds how long stop() waits for a poller."""
        self.endpoint_url = endpoint_url
        self.region = region
        self.refresh_interval = refresh_interval
        self._ctx = EngineContext(
            endpoint_url,
            region,
            runtime,
            faults,
            poll_interval=poll_interval,
            retry_delay=retry_delay,
            long_poll_seconds=long_poll_seconds,
        )
        self._pollers: dict[str, Any] = {}
        self._stats: dict[str, MappingStats] = {}
        self._unsupported: set[str] = set()
        self._retired: list[Any] = []  # pollers of deleted mappings, joined by stop()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Read the mappings once (pollers start now), then re-read them in the background."""
        if self._thread is not None:
            return
        self._stop.clear()
        try:
            self.refresh()
        except Exception:
            log.exception("esm: first read of the event source mappings failed; retrying")
        self._thread = threading.Thread(target=self._supervise, name="esm-supervisor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every poller; an invocation in progress is allowed to finish (up to timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            pollers = list(self._pollers.values()) + self._retired
        for poller in pollers:
            poller.stop()
        deadline = time.monotonic() + timeout
        for poller in pollers:
            poller.join(max(0.0, deadline - time.monotonic()))

    def _supervise(self) -> None:
        while not self._stop.wait(self.refresh_interval):
            try:
                self.refresh()
            except Exception as error:  # the server going away while stopping, a transient error
                if not self._stop.is_set():
                    log.warning("esm: reading the event source mappings failed: %s", error)

    # -- mappings --------------------------------------------------------------------------------
    def _list_mappings(self) -> list[dict[str, Any]]:
        mappings: list[dict[str, Any]] = []
        for page in self._ctx.lambda_.get_paginator("list_event_source_mappings").paginate():
            mappings.extend(page.get("EventSourceMappings", []))
        return mappings

    def refresh(self) -> None:
        """Re-read the mappings now: start, reconfigure and stop pollers to match them."""
        if self._stop.is_set() and self._thread is None:
            return
        mappings = self._list_mappings()
        with self._lock:
            seen = set()
            for raw in mappings:
                cfg = MappingConfig.from_api(raw)
                seen.add(cfg.uuid)
                if cfg.kind not in ("sqs", "dynamodb"):
                    if cfg.uuid not in self._unsupported:
                        self._unsupported.add(cfg.uuid)
                        log.warning(
                            "esm %s: %s sources are not supported; mapping ignored",
                            cfg.short,
                            cfg.kind,
                        )
                    continue
                stats = self._stats.get(cfg.uuid)
                if stats is None:
                    stats = self._stats[cfg.uuid] = MappingStats(cfg)
                stats.config = cfg
                poller = self._pollers.get(cfg.uuid)
                if poller is None:
                    poller = self._pollers[cfg.uuid] = self._make_poller(cfg, stats)
                    log.info(
                        "esm %s: %s -> %s (%s)",
                        cfg.short,
                        cfg.source_arn.split(":")[-1],
                        cfg.function_name,
                        "enabled" if cfg.enabled else "disabled",
                    )
                poller.update(cfg)
                if not self._stop.is_set():
                    poller.reconcile()
            for uuid in [u for u in self._pollers if u not in seen]:
                log.info("esm %s: mapping deleted; stopping its pollers", uuid[:8])
                retired = self._pollers.pop(uuid)
                retired.stop()
                self._retired.append(retired)

    def _make_poller(self, cfg: MappingConfig, stats: MappingStats) -> Any:
        # Imported here: the poller modules import this one (shared config, stats, outcomes).
        if cfg.kind == "sqs":
            from emulator.esm_sqs import SqsMappingPoller  # noqa: PLC0415

            return SqsMappingPoller(self._ctx, cfg, stats)
        from emulator.esm_streams import StreamMappingPoller  # noqa: PLC0415

        return StreamMappingPoller(self._ctx, cfg, stats)

    # -- state -----------------------------------------------------------------------------------
    def all_enabled(self) -> bool:
        """Every supported mapping that moto lists is Enabled and has a running poller
        (vacuously true when there are none)."""
        mappings = self._list_mappings()
        with self._lock:
            for raw in mappings:
                cfg = MappingConfig.from_api(raw)
                if cfg.kind not in ("sqs", "dynamodb"):
                    continue
                poller = self._pollers.get(cfg.uuid)
                if not cfg.enabled or poller is None or not poller.running():
                    return False
        return True

    def idle(self) -> bool:
        """Nothing is in flight and nothing is waiting to be delivered.

        True when, for every enabled mapping moto lists: a poller runs for it; no poller holds
        messages or records (receiving, gathering a batch, invoking, retrying); its SQS queue has
        no visible, in-flight (e.g. waiting for a failed message's visibility timeout) or delayed
        messages; every stream shard has no record after the last one handled. And no poller made
        progress while these were checked (so work handed from one mapping to another is seen).
        Disabled mappings are not waited for. A message waiting to be redriven to a DLQ counts as
        pending until SQS moves it (at the next receive after its visibility timeout).
        """
        before = self._ctx.activity
        mappings = self._list_mappings()
        with self._lock:
            pollers = []
            for raw in mappings:
                cfg = MappingConfig.from_api(raw)
                if cfg.kind not in ("sqs", "dynamodb") or not cfg.enabled:
                    continue
                poller = self._pollers.get(cfg.uuid)
                if poller is None or not poller.running():
                    return False
                pollers.append(poller)
        for poller in pollers:
            if not poller.idle():
                return False
        return self._ctx.activity == before

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per mapping uuid: function, source, kind, state (as last read), pollers (running poller
        threads: SQS pollers or stream shard workers) and the STAT_KEYS counters."""
        with self._lock:
            snapshot = {uuid: stats.snapshot() for uuid, stats in self._stats.items()}
            for uuid, entry in snapshot.items():
                poller = self._pollers.get(uuid)
                entry["pollers"] = poller.active_pollers() if poller is not None else 0
        return snapshot

    def wait_idle(self, timeout: float = 30.0, interval: float = 0.1) -> bool:
        """Poll idle() until it is true (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.idle():
                return True
            time.sleep(interval)
        return False
