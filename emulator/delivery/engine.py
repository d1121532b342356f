"""Event source mappings, delivered as Lambda delivers them (the local stack's only deliverer).

``EventSourceMappingEngine`` runs in the moto server's process. It reads the mappings from moto's
Lambda backend objects (re-read every ``refresh_interval`` seconds, so that
UpdateEventSourceMapping takes effect), runs pollers for them, reads the sources through
emulator/delivery/sources.py (in process: no HTTP, no boto3) and invokes functions through the
runtime:

- SQS queues (emulator/delivery/sqs_poller.py): 5 pollers scaled with the backlog as Lambda does,
  BatchSize, MaximumBatchingWindowInSeconds, the queue's own visibility timeout, FilterCriteria on
  the JSON body (non-matching messages deleted without an invocation), ReportBatchItemFailures, DLQ
  redrive left to SQS (moto redrives at receive time).
- DynamoDB streams (emulator/delivery/stream_poller.py): a worker per shard (parents before
  children), ParallelizationFactor lanes per shard, StartingPosition, BatchSize, batching window,
  the 6 MB payload cut, FilterCriteria, ReportBatchItemFailures (checkpoint at the lowest failed
  sequence number), BisectBatchOnFunctionError, MaximumRetryAttempts, MaximumRecordAgeInSeconds,
  OnFailure destination (SQS or SNS) with the DDBStreamBatchInfo record.

EventBridge Pipes (emulator/delivery/pipes.py) run on the same stream pollers: each pipe moto holds
is a mapping (``pipe:<name>``) whose "function" is its target (``pipes.PipeTarget``).

Pollers wait on emulator.core.wakeups (moto signals a source when a message or record arrives) with
a timeout, never on a timer: a caught-up engine costs next to nothing.

The delivery fault switches (emulator/core/faults.py: duplicate deliveries, a fixed number of SQS
pollers) are read live, at every batch (mappings.EngineContext); every duplicate's result is
applied.

One log line per invocation on the ``emulator.esm`` logger: mapping uuid (8 chars), function,
record count, outcome. Record contents are never logged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from emulator.core.arns import parse_arn
from emulator.delivery import pipes
from emulator.delivery.mappings import (
    EngineContext,
    Invoker,
    MappingConfig,
    MappingPoller,
    MappingStats,
    QueueSource,
    StreamShards,
    log,
)
from emulator.delivery.sources import SqsSource, StreamSource
from emulator.delivery.sqs_poller import SqsMappingPoller
from emulator.delivery.stream_poller import StreamMappingPoller
from emulator.lambda_.workers import DEFAULT_MAX_CONCURRENCY
from emulator.services import context

if TYPE_CHECKING:
    from emulator.core.faults import Faults

SUPPORTED = ("sqs", "dynamodb")
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's


def open_queue(arn: str) -> QueueSource:
    return SqsSource(arn)


def open_stream(arn: str) -> StreamShards:
    return StreamSource(arn)


def table_hash_key(stream_arn: str) -> str | None:
    """The hash key attribute of a stream's table (a record's partition key), from moto's
    DynamoDB backend; None when unknown (lanes then go by the whole key)."""
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    try:
        stream = parse_arn(stream_arn)
        table = stream.resource.split("/")[1]
        return dynamodb_backends[stream.account][stream.region].get_table(table).hash_key_attr
    except Exception:
        return None


class EventSourceMappingEngine:
    """Runs every event source mapping moto's Lambda backend holds (one account and region)."""

    def __init__(
        self,
        runtime: Invoker,
        faults: Faults,
        *,
        region: str,
        endpoint_url: str | None = None,
        account_id: str = DEFAULT_ACCOUNT_ID,
        refresh_interval: float = 0.5,
        retry_delay: float = 0.2,
        max_sqs_pollers: int = DEFAULT_MAX_CONCURRENCY,
    ):
        """``refresh_interval``: seconds between reads of the mappings (in process, cheap).
        ``retry_delay``: first pause before a stream batch is retried (doubling, up to 2 s).
        ``endpoint_url``: the local endpoint, used only to send OnFailure records.
        ``max_sqs_pollers``: the most pollers an SQS mapping scales to (default: the runtime's
        workers per function)."""
        self.region = region
        self.account_id = account_id
        self.refresh_interval = refresh_interval
        self._ctx = EngineContext(
            runtime,
            faults,
            region=region,
            endpoint_url=endpoint_url,
            retry_delay=retry_delay,
            max_sqs_pollers=max_sqs_pollers,
        )
        self._pipe_ctx = EngineContext(
            pipes.PipeTarget(account_id, region),
            faults,
            region=region,
            endpoint_url=endpoint_url,
            retry_delay=retry_delay,
            max_sqs_pollers=max_sqs_pollers,
        )
        self._pollers: dict[str, MappingPoller] = {}
        self._stats: dict[str, MappingStats] = {}
        self._unsupported: set[str] = set()
        self._retired: list[MappingPoller] = []  # pollers of deleted mappings, joined by stop()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Read the mappings once (pollers start now), then re-read them in the background."""
        if self._thread is not None:
            return
        self._stop.clear()
        context.set_mapping_transition(self.transition)
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
        context.release_mapping_transition(self.transition)

    def _supervise(self) -> None:
        while not self._stop.wait(self.refresh_interval):
            try:
                self.refresh()
            except Exception as error:  # a transient error while stopping
                if not self._stop.is_set():
                    log.warning("esm: reading the event source mappings failed: %s", error)

    # -- mappings --------------------------------------------------------------------------------
    def _mappings(self) -> list[MappingConfig]:
        """Every mapping moto holds, as GetEventSourceMapping shows it (in process), then every
        pipe."""
        from moto.awslambda.models import lambda_backends  # noqa: PLC0415

        backend = lambda_backends[self.account_id][self.region]
        return [
            # what the mapping is set to, not the state it is reported in while pollers follow
            replace(MappingConfig.from_api(esm.get_configuration()), enabled=bool(esm.enabled))
            for esm in list(backend._event_source_mappings.values())
        ] + pipes.pipe_mappings(self.account_id, self.region)

    def refresh(self) -> None:
        """Re-read the mappings now: start, reconfigure and stop pollers to match them."""
        if self._stop.is_set() and self._thread is None:
            return
        mappings = self._mappings()
        with self._lock:
            seen = set()
            for cfg in mappings:
                seen.add(cfg.uuid)
                if cfg.kind not in SUPPORTED:
                    if cfg.uuid not in self._unsupported:
                        self._unsupported.add(cfg.uuid)
                        log.warning(
                            "esm %s: %s sources are not supported; mapping ignored",
                            cfg.short,
                            cfg.kind,
                        )
                    continue
                ctx = self._pipe_ctx if pipes.is_pipe(cfg) else self._ctx
                if cfg.uuid not in self._pollers and not ctx.runtime.runnable(cfg.function_arn):
                    # CloudFormation made the mapping before the stack's functions registered
                    # (`up` follows a stack once it is deployed): "Creating" until they are, as
                    # a mapping to a function Lambda cannot run yet delivers nothing
                    continue
                stats = self._stats.get(cfg.uuid)
                if stats is None:
                    stats = self._stats[cfg.uuid] = MappingStats(cfg)
                stats.config = cfg
                poller = self._pollers.get(cfg.uuid)
                if poller is None:
                    poller = self._pollers[cfg.uuid] = self._make_poller(cfg, stats, ctx)
                    log.info(
                        "esm %s: %s -> %s (%s)",
                        cfg.short,
                        parse_arn(cfg.source_arn).resource,
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
            self._retired = [p for p in self._retired if p.active_pollers()]

    @staticmethod
    def _make_poller(cfg: MappingConfig, stats: MappingStats, ctx: EngineContext) -> MappingPoller:
        if cfg.kind == "sqs":
            return SqsMappingPoller(ctx, cfg, stats, open_queue)
        return StreamMappingPoller(ctx, cfg, stats, open_stream, table_hash_key)

    # -- state -----------------------------------------------------------------------------------
    def transition(self, uuid: str, enabled: bool) -> str | None:
        """The state Lambda reports for a mapping while its pollers follow its setting:
        "Creating" until the engine runs it (its function registered), "Enabling" until a poller
        runs, "Disabling" until every poller has ended (what it received delivered); None once
        they match (Enabled or Disabled), and for a source the engine does not run."""
        with self._lock:
            if uuid in self._unsupported:
                return None
            poller = self._pollers.get(uuid)
        if poller is None:
            return "Creating"
        if enabled and not poller.running():
            return "Enabling"
        if not enabled and poller.active_pollers():
            return "Disabling"
        return None

    def _enabled_pollers(self) -> list[MappingPoller] | None:
        """The pollers of every enabled supported mapping, or None when one has none running."""
        mappings = self._mappings()
        with self._lock:
            pollers = []
            for cfg in mappings:
                if cfg.kind not in SUPPORTED or not cfg.enabled:
                    continue
                poller = self._pollers.get(cfg.uuid)
                if poller is None or not poller.running():
                    return None
                pollers.append(poller)
        return pollers

    def all_enabled(self) -> bool:
        """Every supported mapping moto holds is Enabled and its pollers run, holding their
        starting positions (vacuously true when there are none)."""
        mappings = self._mappings()
        if any(not cfg.enabled for cfg in mappings if cfg.kind in SUPPORTED):
            return False
        return self._enabled_pollers() is not None

    def idle(self) -> bool:
        """Nothing is in flight and nothing is waiting to be delivered.

        True when, for every enabled mapping moto holds: a poller runs for it; no poller holds
        messages or records (receiving, gathering a batch, invoking, retrying); its SQS queue has
        no visible, in-flight (e.g. waiting for a failed message's visibility timeout) or delayed
        messages; every stream shard has no record after the last one read. And no poller made
        progress while these were checked (so work handed from one mapping to another is seen).
        Disabled mappings are not waited for. A message waiting to be redriven to a DLQ counts as
        pending until SQS moves it (at the next receive after its visibility timeout).
        """
        before = self._ctx.activity
        pollers = self._enabled_pollers()
        if pollers is None:
            return False
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
