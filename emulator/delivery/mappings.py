"""What the event-source-mapping engine (engine.py) and its pollers (sqs_poller.py,
stream_poller.py) share.

- ``MappingConfig``: one mapping as moto's Lambda backend holds it, with Lambda's defaults.
- ``MappingStats``: a mapping's counters (``GET /_emulator/status`` ``deliveries``).
- ``BatchOutcome`` / ``read_outcome``: how Lambda reads an invocation's result for a batch.
- ``log_invocation``: the one log line per invocation (emulator/process.py parses it).
- ``report_stream_invocation``: a stream mapping's LastProcessingResult and IteratorAge.
- ``EngineContext``: runtime, faults, timings and the activity counter the pollers share.
- ``MappingPoller``: what the engine needs of a poller (SQS or stream), as a Protocol.
- ``QueueSource`` / ``StreamShards``: what the pollers need of a source
  (emulator/delivery/sources.py implements them on moto's backends, in process; tests pass fakes).
- ``encode_event``: the event JSON, built from records encoded once (the 6 MB cut needs sizes).

This module imports neither poller nor the engine: no import cycle.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from emulator.core.arns import parse_arn, service_of, source_kind
from emulator.core.filters import FilterCriteria
from emulator.core.values import parse_bool, parse_int
from emulator.monitoring.service_metrics import ServiceMetrics
from emulator.services import awslambda

if TYPE_CHECKING:
    from emulator.core.faults import Faults
    from emulator.lambda_.workers import InvokeResult

log = logging.getLogger("emulator.esm")

REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"
# Lambda's synchronous invocation payload limit: a stream batch is cut before its event would pass
# it (Lambda developer guide, "Lambda quotas": 6 MB each for request and response).
MAX_EVENT_BYTES = 6 * 1024 * 1024
_EVENT_HEAD = b'{"Records": ['
_EVENT_TAIL = b"]}"
_SEPARATOR = b", "

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
    "duplicates",  # extra deliveries of a batch (duplicate_deliveries, duplicate_rate)
)


@dataclass(frozen=True)
class MappingConfig:
    """One mapping as GetEventSourceMapping returns it, with Lambda's defaults applied."""

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
    parallelization: int = 1  # ParallelizationFactor (streams), 1-10
    max_concurrency: int | None = None  # ScalingConfig.MaximumConcurrency (SQS)
    event_counts: bool = False  # MetricsConfig.Metrics has EventCount

    @classmethod
    def from_api(cls, m: dict[str, Any]) -> MappingConfig:
        arn = m.get("EventSourceArn", "")
        kind = source_kind(arn)
        destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        scaling = m.get("ScalingConfig") or {}
        maximum = scaling.get("MaximumConcurrency")
        return cls(
            uuid=m["UUID"],
            function_arn=m.get("FunctionArn", ""),
            source_arn=arn,
            kind=kind,
            enabled=m.get("State") == "Enabled",
            batch_size=max(1, parse_int(m.get("BatchSize"), 10 if kind == "sqs" else 100)),
            window=max(0.0, float(parse_int(m.get("MaximumBatchingWindowInSeconds"), 0))),
            filter_criteria=m.get("FilterCriteria") or None,
            report_failures=REPORT_BATCH_ITEM_FAILURES in (m.get("FunctionResponseTypes") or []),
            bisect=parse_bool(m.get("BisectBatchOnFunctionError")),
            max_retry=parse_int(m.get("MaximumRetryAttempts"), -1),
            max_age=parse_int(m.get("MaximumRecordAgeInSeconds"), -1),
            on_failure=destination or None,
            starting_position=m.get("StartingPosition") or "TRIM_HORIZON",
            parallelization=min(10, max(1, parse_int(m.get("ParallelizationFactor"), 1))),
            max_concurrency=(parse_int(maximum, 0) or None) if maximum is not None else None,
            event_counts="EventCount" in ((m.get("MetricsConfig") or {}).get("Metrics") or []),
        )

    @property
    def short(self) -> str:
        return self.uuid[:8]

    @property
    def function_name(self) -> str:
        """The function's name (what the runtime is invoked with), from its possibly qualified
        ARN ``arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]``."""
        try:
            resource = parse_arn(self.function_arn).resource.split(":")
        except ValueError:
            return self.function_arn
        return resource[1] if resource[0] == "function" and len(resource) > 1 else self.function_arn


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


_filter_cache: dict[str, FilterCriteria] = {}
_filter_cache_lock = threading.Lock()


def compile_filters(criteria: dict | None) -> FilterCriteria | None:
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


def matches(filters: FilterCriteria | None, record: dict[str, Any]) -> bool:
    return filters is None or filters.matches(record)


def encoded(record: dict[str, Any]) -> bytes:
    """A record as it appears in the event JSON (the runtime's own json.dumps separators)."""
    return json.dumps(record).encode()


def event_size(parts: list[bytes]) -> int:
    """Bytes of ``encode_event(parts)`` without building it."""
    body = sum(len(p) for p in parts) + len(_SEPARATOR) * max(0, len(parts) - 1)
    return len(_EVENT_HEAD) + body + len(_EVENT_TAIL)


def encode_event(parts: list[bytes]) -> bytes:
    """``{"Records": [...]}`` from encoded records: byte for byte json.dumps of the event."""
    return _EVENT_HEAD + _SEPARATOR.join(parts) + _EVENT_TAIL


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


def read_outcome(  # noqa: PLR0911 - one return per documented condition
    result: InvokeResult, identifiers: list[str], report_failures: bool
) -> BatchOutcome:
    """Apply Lambda's success and failure conditions to an invocation result.

    Success: any response without ReportBatchItemFailures; with it, a null response, an object
    without ``batchItemFailures``, a null or empty list. Whole-batch failure: a function error, a
    response that is not an object, ``batchItemFailures`` not a list, an entry without a non-empty
    string ``itemIdentifier`` or with an identifier that is not in the batch.
    """
    if not result.ok:
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


def report_stream_invocation(
    cfg: MappingConfig, outcome: BatchOutcome, iterator_age: float | None
) -> None:
    """What Lambda reports of a stream mapping's invocation: the mapping's LastProcessingResult
    and the function's IteratorAge metric (``iterator_age``: seconds from the batch's last
    record being written to the batch being received). Pipes report neither."""
    if service_of(cfg.function_arn) != "lambda":
        return
    arn = parse_arn(cfg.function_arn)
    failed = outcome.kind in ("error", "malformed")
    result = "PROBLEM: Function call failed" if failed else "OK"
    awslambda.set_last_processing_result(arn.account, arn.region, cfg.uuid, result)
    if iterator_age is not None:
        metrics = ServiceMetrics(arn.account, arn.region)
        metrics.iterator_age(cfg.function_name, iterator_age * 1000)


def count_events(cfg: MappingConfig, **counts: int) -> None:
    """The mapping's event-count metrics (MetricsConfig EventCount): ``counts`` by their AWS
    names (PolledEventCount, FilteredOutEventCount, InvokedEventCount, FailedInvokeEventCount,
    DeletedEventCount, DroppedEventCount, OnFailureDestinationDeliveredEventCount), put in
    AWS/Lambda per EventSourceMappingUUID as Lambda publishes them. Pipes have none."""
    counted = {name: value for name, value in counts.items() if value}
    if not counted or not cfg.event_counts or service_of(cfg.function_arn) != "lambda":
        return  # nothing to put: no datapoint, as Lambda puts none for an idle mapping
    arn = parse_arn(cfg.function_arn)
    ServiceMetrics(arn.account, arn.region).mapping_events(cfg.uuid, counted)


# --- what the engine needs of a poller, and the pollers of a source ------------------------------
class MappingPoller(Protocol):
    """The pollers of one mapping (SQS: sqs_poller.SqsMappingPoller; streams:
    stream_poller.StreamMappingPoller). Every method is called by the engine, thread-safe."""

    config: MappingConfig

    def update(self, config: MappingConfig) -> None:
        """The mapping as last read (takes effect at the next batch)."""

    def reconcile(self) -> None:
        """Start or stop poller threads to match the configuration (enabled, pollers, shards);
        returns once every started poller holds its starting position."""

    def running(self) -> bool:
        """At least one poller runs and has not been told to stop."""

    def active_pollers(self) -> int:
        """Poller threads alive (SQS pollers, stream shard workers), stopping ones included."""

    def idle(self) -> bool:
        """Nothing held (received, buffered, invoking, retrying) and nothing left at the source."""

    def stop(self) -> None:
        """Tell every poller to stop (an invocation in progress finishes)."""

    def join(self, timeout: float) -> None:
        """Wait (up to ``timeout`` s) for the stopped pollers to end."""


class Invoker(Protocol):
    """The runtime as the pollers use it (emulator.lambda_.workers.Runtime; tests pass a double)."""

    def invoke(self, function_name: str, event: Any) -> InvokeResult: ...
    def runnable(self, function_name: str) -> bool:
        """Whether it runs the function now (a stack's functions register once deployed)."""
        ...


class QueueSource(Protocol):
    """An SQS queue, read in process (emulator.delivery.sources.SqsSource)."""

    arn: str
    visibility_timeout: int
    max_receive_count: int | None

    def receive(self, max_messages: int) -> list[dict]: ...
    def delete(self, receipt_handles: list[str]) -> None: ...
    def counts(self) -> tuple[int, int, int]: ...
    def next_visible_at(self) -> float | None: ...


class Shard(NamedTuple):
    shard_id: str
    parent_shard_id: str | None
    closed: bool


class StreamShards(Protocol):
    """A DynamoDB stream, read in process (emulator.delivery.sources.StreamSource)."""

    def shards(self) -> list[Any]: ...  # Shard-like: shard_id, parent_shard_id, closed
    def records(self, shard_id: str, after: str | None, limit: int) -> list[dict]: ...
    def last_sequence(self, shard_id: str) -> str | None: ...


class EngineContext:
    """What the pollers share: runtime, faults, region, timings, the activity counter, and (for
    OnFailure destinations only) clients of the local endpoint."""

    def __init__(
        self,
        runtime: Invoker,
        faults: Faults,
        *,
        region: str,
        endpoint_url: str | None,
        retry_delay: float,
        max_sqs_pollers: int,
    ):
        self.runtime = runtime
        self.faults = faults
        self.region = region
        self.endpoint_url = endpoint_url
        self.retry_delay = retry_delay
        self.max_sqs_pollers = max_sqs_pollers
        self._activity = 0
        self._activity_lock = threading.Lock()
        self._clients: dict[str, Any] = {}

    def touch(self) -> None:
        """Record progress (messages received, records read, an invocation finished)."""
        with self._activity_lock:
            self._activity += 1

    @property
    def activity(self) -> int:
        with self._activity_lock:
            return self._activity

    def deliveries(self) -> int:
        """How many times the next batch goes to the function: ``duplicate_deliveries``, plus
        one with probability ``duplicate_rate`` (drawn from the faults' seeded random)."""
        return self.faults.duplicate_deliveries + int(self.faults.draw_duplicate())

    def fixed_sqs_pollers(self) -> int | None:
        """The ``sqs_pollers`` fault switch: a fixed number of pollers per SQS mapping, or None
        (Lambda's scaling)."""
        return self.faults.sqs_pollers

    def client(self, service: str) -> Any:
        """A boto3 client of the local endpoint (OnFailure destinations: rare, so over HTTP)."""
        if self.endpoint_url is None:
            raise RuntimeError("no endpoint for OnFailure destinations")
        with self._activity_lock:
            existing = self._clients.get(service)
        if existing is not None:
            return existing
        import boto3  # noqa: PLC0415 - only an OnFailure destination needs it
        from botocore.config import Config  # noqa: PLC0415

        made = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - the local endpoint's dummy credentials
            region_name=self.region,
        ).client(
            service,
            endpoint_url=self.endpoint_url,
            config=Config(
                retries={"max_attempts": 3, "mode": "standard"},
                account_id_endpoint_mode="disabled",
            ),
        )
        with self._activity_lock:
            return self._clients.setdefault(service, made)
