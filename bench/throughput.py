"""P5: contacts per second end to end through the local stack, and the latency from an S3 put to
its notifications reaching NotificationsTopic.

`python -m emulator up` runs as a subprocess on a free bench port; once it prints `ready`, a
capture queue is subscribed to NotificationsTopic (raw delivery) and FILES objects of
RECORDS_PER_FILE of Amazon Connect's contact records (bench.inprocess.contact_records: one contact
per record, ~3.5 KB each) are put under contact-records/, back to back, as template.yaml's
Firehose delivery stream writes them (newline-delimited, GZIP, `.gz` keys; the local stack's
delivery stream writes one object per PutRecordBatch, so the objects are put into the bucket
directly, which is what S3 then notifies either way). Done means all three: every object's
PROCESSING_LOG item counts all its records in, every LAST_AGENT item is the one the data says
(newest voice contact with an agent per caller, by shared.rules over the contacts as
shared.model maps the records), and every SURVEY and GIFT_CARD notification the data calls for
(shared.rules, one per interaction) reached the topic. No scans while it runs: they
would load the local stack they measure. Throughput is contacts over the time from the first put
to the poll that saw done (polls are ~1 s apart); latency is each notification's receive time
against its file's put time. The wait is bounded (DONE_WITHIN_SECONDS); the stack is stopped at
the end either way.

Per fan-out mode: BENCH_P5_MODES (`make bench`: "lambda pipe router") runs all of it once per
mode, each on a stack of its own deployed in that mode (`--parameter-overrides FanOut=<mode>`),
its figures named and tagged with the mode; unset, once on samconfig's. Before the load, each run
also measures the latency of single contacts on the idle stack (PROBES objects of one abandoned
call's record, one after another, each until its gift card notification arrives): the path
without any backlog, where the fan-out's own added latency shows; then warms the pools: an object
of WARM_UP_RECORDS records of other callers, until the stack is idle, so the load meets the
workers it would meet in steady use (their cold starts are not the load's CPU).

The budgets (issue 23, two cores; the rate issue 41's): in mode lambda (BUDGET_MODE), at least
RATE_BUDGET contacts/s
end to end, and per contact at most STACK_MS_BUDGET ms of the local stack's CPU and
WORKERS_MS_BUDGET ms of the function workers'; the other modes are reported against none. The
CPU counts from the first put to done, the bench's own calls included (a poll a second: a
GetItem per file still in progress, the capture queue's receives; a few hundred calls against
the load's tens of thousands).
"""

import os
import random
import statistics
import threading
import time
from datetime import timedelta
from pathlib import Path

from bench.common import ROOT, Figure, percentile
from bench.inprocess import (
    RECORDS_START,
    contact_records,
    firehose_key,
    firehose_object,
    notifications_due,
    stored_contacts,
)
from emulator.process import LocalStackProcess, describe_failures, free_port
from harness import connect_records, expected
from harness.stack import StackClient, fan_out_args
from harness.topic import TopicCapture
from ops.stack import Stack

FILES = int(os.environ.get("BENCH_P5_FILES", "20"))
RECORDS_PER_FILE = 1_000  # contact records (one contact each) per Firehose object
CONTACTS = FILES * RECORDS_PER_FILE
CALLERS = 5_000
READY_WITHIN_SECONDS = 90
DONE_WITHIN_SECONDS = int(os.environ.get("BENCH_P5_TIMEOUT", "240"))
PORTS = range(4950, 5000)
IDLE_SECONDS = 10
# An experiment's samconfig (e.g. other local timeouts); `make bench` uses the repository's.
CONFIG_FILE = os.environ.get("BENCH_P5_SAMCONFIG")
LOG = ROOT / "bench" / "out" / "p5-local-stack.log"  # the stack's output, for a post-mortem
MODES = os.environ.get("BENCH_P5_MODES", "").split()  # fan-out modes; none: samconfig's
PROBES = 5  # single contacts on the idle stack, before the load
PROBE_WITHIN_SECONDS = 60
WARM_UP_RECORDS = 1_000
WARM_UP_WITHIN_SECONDS = 120
BUDGET_MODE = "lambda"  # the mode the budgets hold for; the others are reported
RATE_BUDGET = 200  # contacts/s end to end over CONTACTS (issue 41; issue 23's was 150)
STACK_MS_BUDGET = 7.0  # CPU per contact: the local stack's process
WORKERS_MS_BUDGET = 4.5  # CPU per contact: the function workers


def cpu(stack: LocalStackProcess) -> tuple[float, float]:
    """CPU seconds so far of the stack's own process (moto, ESM pollers, HTTP server: one
    interpreter, one GIL) and of its descendants (the function workers)."""
    parents, times = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    own = times.get(stack.process.pid, 0.0)
    descendants, frontier = set(), {stack.process.pid}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - descendants
        descendants |= frontier
    return own, sum(times[pid] for pid in descendants)


def contacts_in(stack: Stack, file_ids: list[str], logged: dict[str, int]) -> int:
    """Contacts in the table of the files ``file_ids`` (bucket/key#version), by their
    processing logs, never a scan: the rows of the files done so far, plus the progress of those
    still IN_PROGRESS (a file's log exists from its first step on). A final log's rows are kept
    in ``logged``, not read again."""
    progress = 0
    for file_id in set(file_ids) - logged.keys():
        item = stack.file_log(file_id)
        if item is None:
            continue
        if item["outcome"]["S"] == "IN_PROGRESS":
            progress += int(item.get("rows_ok", {}).get("N", 0))
        else:
            logged[file_id] = int(item["rows_ok"]["N"])
    return sum(logged.values()) + progress


class Collector(threading.Thread):
    """Collects from the topic capture until stopped, so each notification's receive time is
    taken when it arrives (long polls of 1 s), not at the next poll of the main loop."""

    def __init__(self, topic: TopicCapture):
        super().__init__(daemon=True)
        self.topic = topic
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.topic.collect(wait_seconds=1)
            except Exception:  # the stack is going away; the figures say what arrived
                time.sleep(0.2)

    def received(self) -> tuple[dict[tuple[str, str], float], int]:
        """(kind, contact_id) -> when it first arrived; and how many arrived again."""
        first: dict[tuple[str, str], float] = {}
        again = 0
        for message in list(self.topic.messages):
            key = (message.get("kind"), message.get("contact_id"))
            again += key in first
            first.setdefault(key, message["_received_at"])
        return first, again


def _probe_latencies(stack: StackClient, collector: Collector) -> tuple[list[float], set]:
    """Put-to-notification seconds of PROBES single abandoned calls (a gift card each), one
    at a time on the idle stack; and their notifications' keys (not the load's)."""
    rng = random.Random("p5-probes")
    latencies, probes = [], set()
    for index in range(PROBES):
        legs = connect_records.interaction(
            rng,
            caller=f"+1404555{index:04d}",  # callers of their own
            started=RECORDS_START - timedelta(days=1, minutes=index),
            kind="abandoned",
        )
        wait = stack.goodwill_wait_seconds
        (key,) = notifications_due(stored_contacts(legs, wait), wait)
        probes.add(key)
        put = time.monotonic()
        stack.s3.put_object(
            Bucket=stack.bucket, Key=firehose_key(FILES + index), Body=firehose_object(iter(legs))
        )
        while time.monotonic() - put < PROBE_WITHIN_SECONDS:
            if key in (arrived := collector.received()[0]):
                latencies.append(arrived[key] - put)
                break
            time.sleep(0.05)
    return latencies, probes


def _warm_up(stack: StackClient, collector: Collector) -> set:
    """An object of WARM_UP_RECORDS contact records of callers the load does not have, until the
    stack is idle and their notifications arrived: every pool at the size the load will use.
    Their notifications' keys (not the load's)."""
    callers = [f"+1303555{n:04d}" for n in range(500)]  # callers of their own
    records = list(contact_records(WARM_UP_RECORDS, seed=29, callers=callers))
    wait = stack.goodwill_wait_seconds
    notified = set(notifications_due(stored_contacts(records, wait), wait))
    stack.s3.put_object(
        Bucket=stack.bucket,
        Key=firehose_key(FILES + PROBES),
        Body=firehose_object(iter(records)),
    )
    deadline = time.monotonic() + WARM_UP_WITHIN_SECONDS
    while time.monotonic() < deadline:
        if notified <= collector.received()[0].keys() and stack.idle():
            break
        time.sleep(0.5)
    return notified


def _not_measured(reason: str) -> list[Figure]:
    return [
        Figure(
            "P5",
            "throughput end to end",
            0,
            "contacts/s",
            f">= {RATE_BUDGET} contacts/s",
            None,
            f"NOT MEASURED: {reason}",
        )
    ]


def run() -> list[Figure]:
    """P5 once per mode of BENCH_P5_MODES (once on samconfig's without)."""
    figures: list[Figure] = []
    for mode in MODES or [None]:
        figures += [figure.for_mode(mode) for figure in run_mode(mode)]
    return figures


def run_mode(mode: str | None) -> list[Figure]:
    log = LOG if mode is None else LOG.with_name(f"{LOG.stem}-{mode}.log")
    stack = LocalStackProcess(
        free_port(PORTS), config_file=CONFIG_FILE, log_path=log, up_args=fan_out_args(mode)
    )
    try:
        try:
            stack.start(READY_WITHIN_SECONDS)
        except RuntimeError as error:
            tail = " | ".join(stack.lines(3)) or "no output"
            return _not_measured(f"{error} (python -m emulator up): {tail}")
        return _measure(stack, budgeted=mode in (None, BUDGET_MODE))
    finally:
        stack.stop(grace=20)


def _measure(process: LocalStackProcess, *, budgeted: bool) -> list[Figure]:
    """The figures of one run; ``budgeted``: the mode the budgets hold for."""
    stack = StackClient.local_stack(process)
    rng = random.Random("p5-callers")
    callers = [connect_records.new_caller(rng) for _ in range(CALLERS)]
    records = list(contact_records(CONTACTS, seed=23, callers=callers))
    contacts = stored_contacts(records, stack.goodwill_wait_seconds)
    want_last_agents = expected.last_agents(contacts)
    # notification -> the index of the object whose record first makes it due
    want = {
        key: index // RECORDS_PER_FILE
        for key, index in notifications_due(contacts, stack.goodwill_wait_seconds).items()
    }
    bodies = [
        firehose_object(iter(records[i * RECORDS_PER_FILE : (i + 1) * RECORDS_PER_FILE]))
        for i in range(FILES)
    ]
    collector = Collector(TopicCapture(stack, "bench-topic-capture"))
    collector.start()
    probe_latencies, probes = _probe_latencies(stack, collector)
    probes |= _warm_up(stack, collector)

    put_times, file_ids = [], []
    cpu_before = cpu(process)
    started = time.monotonic()
    for index, body in enumerate(bodies):
        put_times.append(time.monotonic())
        key = firehose_key(index)
        put = stack.s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
        file_ids.append(f"{stack.bucket}/{key}#{put.get('VersionId')}")
    put_seconds = time.monotonic() - started

    # Done is watched without scans: a Scan of the 20k-item table costs the local stack (one
    # interpreter) seconds of CPU, a third of its time when polled every 5 s (py-spy). Contacts:
    # each file's PROCESSING_LOG item and its rows_ok (final once its outcome is); last agents:
    # BatchGetItem of the expected keys, only once everything else is done.
    state = {"contacts": 0, "last_agents_ok": 0, "notifications": 0}
    logged: dict[str, int] = {}
    stages: dict[str, float] = {}

    def last_agents_right() -> bool:
        stored = stack.last_agents(want_last_agents)
        state["last_agents_ok"] = sum(
            stored.get(caller) == value for caller, value in want_last_agents.items()
        )
        return state["last_agents_ok"] == len(want_last_agents)

    def done(poll: int) -> bool:
        """Cheap checks first: notifications (counted as they arrive), then the file logs."""
        state["notifications"] = len(collector.received()[0].keys() & want.keys())
        notified = state["notifications"] == len(want)
        if state["contacts"] < CONTACTS and (notified or poll % 3 == 0):
            state["contacts"] = contacts_in(stack, file_ids, logged)
            if state["contacts"] == CONTACTS:
                stages.setdefault("ingested_at", time.monotonic() - started)
        return notified and state["contacts"] == CONTACTS and last_agents_right()

    finished, poll = None, 0
    while time.monotonic() - started < DONE_WITHIN_SECONDS:
        poll += 1
        if done(poll):
            finished = time.monotonic()
            break
        time.sleep(1)
    wall = time.monotonic() - started
    cpu_after = cpu(process)
    if finished is None:  # where it got to, for the report
        state["contacts"] = contacts_in(stack, file_ids, logged)
        last_agents_right()
    collector.stopping.set()
    collector.join(5)
    received, duplicates = collector.received()
    own_cpu, workers_cpu = (a - b for a, b in zip(cpu_after, cpu_before, strict=True))
    load = (
        f"CPU over {wall:.0f} s: local stack process {own_cpu:.0f} s "
        f"({own_cpu / wall * 100:.0f}% of one core), function workers {workers_cpu:.0f} s"
    )

    want_n = len(want)
    latencies = [at - put_times[want[key]] for key, at in received.items() if key in want]
    extra = len(received.keys() - want.keys() - probes) + duplicates
    recent = sum(1 for at in received.values() if at > started + wall - 60)
    ingested = (
        f" (all ingested {stages['ingested_at']:.0f} s after the first put)"
        if "ingested_at" in stages
        else ""
    )
    progress = (
        f"{state['contacts']}/{CONTACTS} contacts{ingested}, {state['last_agents_ok']}/"
        f"{len(want_last_agents)} last agents right, {state['notifications']}/{want_n} "
        f"notifications ({recent / 60:.1f}/s over the last 60 s)"
    )
    rate_budget = f">= {RATE_BUDGET} contacts/s" if budgeted else "-"
    if finished is None:
        throughput = Figure(
            "P5",
            "throughput end to end",
            0,
            "contacts/s",
            rate_budget,
            False if budgeted or extra else None,
            (
                f"NOT DONE after {DONE_WITHIN_SECONDS} s: {progress}; invocations not ok: "
                f"{describe_failures(stack.failures())}; {load}"
            ),
        )
    else:
        elapsed = finished - started
        rate = CONTACTS / elapsed
        throughput = Figure(
            "P5",
            "throughput end to end",
            round(rate, 1),
            "contacts/s",
            rate_budget,
            False if extra else (rate >= RATE_BUDGET if budgeted else None),
            (
                f"{FILES} Firehose objects x {RECORDS_PER_FILE} contact records (one contact "
                f"each; {sum(map(len, bodies)) / 1e6:.1f} MB gzipped) put in {put_seconds:.1f} s, "
                f"all done "
                f"in {elapsed:.1f} s (first put to done, polled ~1 s): {progress}; "
                f"{extra} unexpected or duplicate notifications; invocations not ok: "
                f"{describe_failures(stack.failures())}; {load}"
            ),
        )
    contacts = CONTACTS if finished is not None else max(state["contacts"], 1)
    per_contact = (
        "over the whole load" if finished is not None else f"over the {contacts} contacts in"
    )
    cpu_figures = [
        Figure(
            "P5",
            f"CPU per contact, {side}",
            round(seconds * 1000 / contacts, 2),
            "ms",
            f"<= {budget}" if budgeted else "-",
            (seconds * 1000 / contacts <= budget) if budgeted else None,
            f"{seconds:.1f} s of CPU {per_contact}, pools warmed ({WARM_UP_RECORDS} records) first",
        )
        for side, seconds, budget in (
            ("local stack process", own_cpu, STACK_MS_BUDGET),
            ("function workers", workers_cpu, WORKERS_MS_BUDGET),
        )
    ]
    figures = [throughput, *cpu_figures, _probe_figure(probe_latencies)]
    if latencies:
        for name, fraction in (("p50", 0.5), ("p95", 0.95)):
            figures.append(
                Figure(
                    "P5",
                    f"put-to-notification latency {name}",
                    round(percentile(latencies, fraction), 2),
                    "s",
                    "-",
                    None,
                    (
                        f"{len(latencies)} notifications ({want_n} expected), receive time at a "
                        f"capture queue subscribed to NotificationsTopic minus the put of the "
                        f"object of the record that made it due; max {max(latencies):.1f} s"
                    ),
                )
            )
    if finished is not None:
        figures.append(idle_cpu(process))
    return figures


def _probe_figure(latencies: list[float]) -> Figure:
    detail = (
        f"{len(latencies)} of {PROBES} single abandoned calls (one contact record each), put one "
        f"at a time on the idle stack before the load, to their gift card notification at the "
        f"capture queue"
    )
    if not latencies:
        return Figure("P5", "put-to-notification latency, idle", 0, "s", "-", None, detail)
    return Figure(
        "P5",
        "put-to-notification latency, idle",
        round(statistics.median(latencies), 2),
        "s",
        "-",
        None,
        f"median; {detail}; min {min(latencies):.2f} s, max {max(latencies):.2f} s",
    )


def idle_cpu(stack: LocalStackProcess) -> Figure:
    """The caught-up stack's CPU (its own process and the warm workers) over IDLE_SECONDS: what
    pollers with nothing to do cost."""
    time.sleep(2)  # the last deletes and log flushes
    before = cpu(stack)
    time.sleep(IDLE_SECONDS)
    own, workers = (a - b for a, b in zip(cpu(stack), before, strict=True))
    share = (own + workers) / IDLE_SECONDS * 100
    return Figure(
        "P5",
        "idle CPU of a caught-up stack",
        round(share, 1),
        "% of a core",
        "<= 5",
        share <= 5,
        f"over {IDLE_SECONDS} s after done: local stack process {own:.2f} s, "
        f"workers {workers:.2f} s",
    )


if __name__ == "__main__":
    for figure in run():
        print(figure)
