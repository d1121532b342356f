"""`make run`: the whole application on the local stack, demo data in, a summary out.

Starts `python -m emulator up` on a free port (4800-4899), puts Amazon Connect's contact records
of the demo's interactions (harness.demo_data) into the stack's delivery stream as Connect does
(Firehose writes them under contact-records/, which notifies IngestQueue), uploads two files of
the flat export format between them (with bad rows), then Connect's re-deliveries of some
records (newer with fields changed, older, same time, exact duplicates), waits (bounded) for
the pipeline to settle and prints what happened: records in, objects Firehose wrote, contacts
stored and rejected, the last agent of a few callers (through RouteFunction), surveys and gift
cards that reached NotificationsTopic, duplicates suppressed (the functions' own metrics),
dead-letter depths and throughput.

Every number is checked against what the data must give under the layer's own rules
(harness.expected); the exit status is 0 only if they all agree. The demo is a client of the
stack: it talks to it with boto3 only, exactly as any AWS client would. While it runs, `python -m
ops dashboard` serves the stack's dashboard; the demo prints the page's address.

`--chaos` (`make chaos`) runs the same data through the local stack's faults: every S3 event, SQS
message and stream batch delivered 3 times, two pollers per SQS mapping, SQS batches shuffled and
a fifth of their messages held back to a later batch, a crash after a random AWS call in 5% of
invocations and random throttles; and an operator who, at random moments, breaks and recovers
functions and runs every `python -m ops` command without --resend while SNS's deduplication
window passes (harness.chaos). It ends with a verdict table (contacts lost, duplicate and missing
notifications, wrong last agents, failing operator commands, dead-letter and failure queue
depths, each expected 0, and what each operator command did and refused).

`--fan-out lambda|pipe|router` (`make run FANOUT=pipe`; default: the FANOUT environment variable,
else samconfig's) deploys the local stack in that fan-out mode; the summary and the verdict then
count the consumers' own DLQs too.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared import keys

from emulator.process import LocalStackProcess, free_port
from harness import chaos, ops_process
from harness import mail as last_hop
from harness.demo_data import DEMO_PREFIX, FIREHOSE_PREFIX, DemoData, DemoFile, Step, generate
from harness.metrics import FunctionMetrics
from harness.polling import say, wait_until
from harness.stack import StackClient, fan_out_args
from harness.topic import TopicCapture
from ops import fan_out
from ops.callers import mask

PORTS = range(4800, 4900)


@dataclass
class Run:
    """Where a demo run got to: what the summary and the verdict report."""

    stack: StackClient
    topic: TopicCapture
    metrics: FunctionMetrics
    data: DemoData
    settled: bool = False
    elapsed: float = 0.0
    ingest_seconds: float = 0.0
    contacts: int = 0
    contacts_not_newest: int = 0  # stored, but not as their newest copy
    files: list[dict] = field(default_factory=list)
    file_ids: list[str] = field(default_factory=list)  # bucket/key#version, as uploaded
    records_in: int = 0  # contact records put into the delivery stream
    firehose_calls: int = 0  # PutRecordBatch calls
    objects: set[tuple[str, str]] = field(default_factory=set)  # (key, version) Firehose wrote
    wrong_last_agents: dict[str, tuple[dict | None, dict]] = field(default_factory=dict)
    reuploads: list[str] = field(default_factory=list)  # file ids of objects put again (chaos)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--contacts",
        type=int,
        default=3000,
        help="interactions (Connect contacts of one or more legs, a contact record each)",
    )
    parser.add_argument("--callers", type=int, default=None, help="default: a tenth of contacts")
    parser.add_argument("--seed", type=int, default=20261102)
    parser.add_argument("--port", type=int, default=None, help="default: a free one in 4800-4899")
    parser.add_argument(
        "--duplicate-deliveries",
        type=int,
        default=1,
        help="fault switch: deliver every SQS message and stream batch N times",
    )
    parser.add_argument(
        "--sqs-pollers",
        type=int,
        default=4,
        help="concurrent batches per SQS mapping (Lambda starts with 5 on AWS; local default 1)",
    )
    parser.add_argument(
        "--stack-output", action="store_true", help="echo the local stack's output lines"
    )
    parser.add_argument(
        "--burst",
        action="store_true",
        help="upload every file at once (default: one after another, each once ingested)",
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="bound (s) from the first upload to settled"
    )
    parser.add_argument(
        "--chaos",
        action="store_true",
        help="duplicates, two pollers, crashes and throttles inside the functions; a verdict",
    )
    parser.add_argument("--chaos-seed", type=int, default=1, help="the faults' random seed")
    parser.add_argument(
        "--fan-out",
        choices=fan_out.NAMES,
        default=os.environ.get("FANOUT") or None,
        help="the stack's fan-out mode (default: FANOUT, else samconfig's)",
    )
    args = parser.parse_args(argv)
    if args.fan_out and args.fan_out not in fan_out.NAMES:  # a default from FANOUT
        parser.error(f"FANOUT={args.fan_out}: not one of {', '.join(fan_out.NAMES)}")
    if args.timeout is None:
        # chaos: its drills' waits, and a tenth of a second a contact (10,000: 1,900 s)
        args.timeout = 900.0 + args.contacts / 10 if args.chaos else 150.0
    if args.callers is None:
        args.callers = max(1, args.contacts // 10)

    echo = (lambda line: say("  | " + line)) if args.stack_output else None
    with tempfile.TemporaryDirectory(prefix="demo-logs-", dir=os.environ.get("DEMO_LOGS"), delete="DEMO_LOGS" not in os.environ) as log_dir:  # fmt: skip  # noqa: E501 (kept for harness.trace)
        local = LocalStackProcess(
            args.port or free_port(PORTS),
            up_args=["--log-dir", log_dir, *fan_out_args(args.fan_out)],
            echo=echo,
            # beside the functions' logs, kept with them (a failed chaos run's, for reading)
            log_path=Path(log_dir) / "stack-output.txt",
        )
        say(f"Starting the local stack on {local.endpoint} ...")
        began = time.monotonic()
        try:
            local.start(timeout=90, ports=None if args.port else PORTS)
        except RuntimeError as error:
            say(f"FAILED: {error}")
            say("\n".join(local.lines()))
            local.stop()
            return 1
        try:
            stack = StackClient.local_stack(local)
            say(
                f"  ready in {time.monotonic() - began:.1f} s (stack {local.stack_name}, "
                f"fan-out {stack.fan_out})"
            )
            with ops_process.dashboard(stack) as page:
                say(f"  dashboard: {page} (python -m ops dashboard; reloads itself during the run)")
                return run(stack, Path(log_dir), args)
        except Exception as error:  # the summary of a broken run: what and where
            say(f"FAILED: {type(error).__name__}: {error}")
            say("  last lines of the local stack:")
            for line in local.lines(20):
                say("    " + line)
            return 1
        finally:
            say("Stopping the local stack.")
            local.stop()


def run(stack: StackClient, log_dir: Path, args: argparse.Namespace) -> int:
    data = generate(args.contacts, args.callers, args.seed, stack.goodwill_wait_seconds)
    demo = Run(stack, TopicCapture(stack, "demo-topic-capture"), FunctionMetrics(log_dir), data)
    stack.faults(sqs_pollers=args.sqs_pollers)
    operator = chaos.Operator(demo, args.chaos_seed) if args.chaos else None
    if args.chaos:
        stack.faults(**chaos.CHAOS, seed=args.chaos_seed)
        say(
            "  chaos: every S3 event, message and stream batch delivered 3x, 2 pollers per queue, "
            "SQS batches shuffled and 20% of messages held back, a crash after a random call in "
            "5% of invocations, 1% of calls throttled; at random moments, an operator's outages, "
            "recoveries and commands (python -m ops, never --resend) while SNS's 5-minute "
            "deduplication window passes"
        )
    elif args.duplicate_deliveries > 1:
        stack.faults(duplicate_deliveries=args.duplicate_deliveries)
        say(
            f"  fault switch: every message and stream batch delivered {args.duplicate_deliveries}x"
        )

    kinds = data.redelivery_kinds
    say(
        f"\nPutting {len(data.records):,} contact records ({data.interactions:,} interactions) "
        f"into the delivery stream {stack.delivery_stream} in "
        f"{sum(bool(step.records) for step in data.steps)} deliveries as Connect streams them, "
        f"and {len(data.files)} flat files ({sum(f.bad_rows for f in data.files)} bad rows) "
        f"to s3://{stack.bucket}/{DEMO_PREFIX} between them"
        + ("" if args.burst else ", one after another, each once it is in")
    )
    started = time.monotonic()
    deadline = started + args.timeout

    def put(step: Step, wait: bool) -> bool:
        return put_step(demo, step, wait=wait and not args.burst, deadline=deadline)

    if operator is not None:
        first_in = operator.put_steps(put)
    else:
        first_in = all([put(step, True) for step in data.steps])

    files_in = [0]  # as the last check read them, for its progress line

    def first_export_in() -> bool:
        files_in[0] = files_done(demo)
        return firehose_done(demo) and files_in[0] == len(demo.file_ids)

    if first_in and args.burst:  # paced puts already saw each one's outcome
        say("\nWaiting for the first deliveries and files to be in the table")
        first_in = wait_until(
            first_export_in,
            deadline - time.monotonic(),
            lambda: f"objects and files processed: {files_in[0]}/{len(demo.file_ids)}",
        )
    demo.ingest_seconds = time.monotonic() - started
    if first_in:
        say(
            f"\nConnect re-delivers {len(data.redeliveries)} records: {kinds['newer']} newer "
            f"(fields changed that would make them due a survey or a gift card), "
            f"{kinds['older']} older, {kinds['equal']} with the same LastUpdateTimestamp and "
            f"another e-mail, {kinds['duplicate']} exact duplicates: nothing new may come of them"
        )
        put_records(demo, data.redeliveries, wait=True, deadline=deadline)
    if operator is not None:
        operator.sweep()

    last_activity: list[tuple[int, int]] = []

    def settled() -> bool:
        # Done: every notification out, every file's outcome final (Firehose's objects too),
        # nothing in flight or left to deliver (the engine idle), and quiet: one poll interval
        # with nothing new at the topic or in the logs (a worker's output reaches its log file
        # just after its invocation ends). What the pipeline wrote is counted after, by the
        # summary.
        activity = (len(demo.topic.collect()), demo.metrics.read())
        quiet = last_activity == [activity]
        last_activity[:] = [activity]
        return (
            first_in
            and activity[0] >= len(data.notifications)
            and quiet
            and stack.idle()
            and firehose_done(demo)
            and files_done(demo) == len(demo.file_ids)
            and demo.metrics.read() == activity[1]
        )

    say("\nWaiting for the pipeline to settle (notifications at the topic, functions quiet)")
    demo.settled = wait_until(
        settled,
        deadline - time.monotonic(),
        lambda: (
            f"notifications {len(demo.topic.messages):,}/{len(data.notifications):,} | "
            f"in flight: ingest {stack.queue_depth('IngestQueueUrl')}, "
            f"notifications {stack.queue_depth('NotificationQueueUrl')}"
        ),
    )
    demo.elapsed = time.monotonic() - started
    # What the summary counts, by type (Scans: an item nobody expected, a contact stored twice
    # or a log of a file never uploaded, counts too).
    demo.files = stack.items_of_type(keys.PROCESSING_LOG)
    contacts = stack.items_of_type(keys.CONTACT)
    demo.contacts = len(contacts)
    demo.contacts_not_newest = not_newest(data, contacts)
    if args.chaos:  # counted and shown while they are off: the pipeline has settled
        stack.faults(crash_invocations=None, throttle=[])
    status = summary(demo)
    return chaos.verdict(demo, operator) if operator is not None else status


def not_newest(data: DemoData, contacts: list[dict]) -> int:
    """How many expected contacts are missing or stored as another copy than their newest (its
    updated_at and e-mail, the fields the re-deliveries change)."""

    def copy(item: dict) -> tuple:
        return tuple(item.get(name) for name in ("updated_at", "email"))

    stored = {
        item["contact_id"]["S"]: copy({name: value.get("S") for name, value in item.items()})
        for item in contacts
    }
    return sum(stored.get(cid) != copy(item) for cid, item in data.stored.items())


def files_done(demo: Run) -> int:
    """How many of the files put so far (uploaded, or written by Firehose) have a final outcome
    (their processing logs, by key)."""
    logs = demo.stack.get_items([keys.processing_log_key(file_id) for file_id in demo.file_ids])
    return sum(log["outcome"]["S"] != "IN_PROGRESS" for log in logs)


def firehose_done(demo: Run) -> bool:
    """Whether every object of the records put so far is known (the local stack's Firehose
    writes one per call, at once), the new ones added to the run's files."""
    new_objects(demo)
    return len(demo.objects) >= demo.firehose_calls


def new_objects(demo: Run) -> list[tuple[str, str]]:
    """The objects Firehose wrote under contact-records/ since the last look: (key, version),
    added to the run's objects and files."""
    stack, found = demo.stack, []
    paginator = stack.s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=stack.bucket, Prefix=FIREHOSE_PREFIX):
        for version in page.get("Versions", []):
            written = (version["Key"], version["VersionId"])
            if written not in demo.objects:
                demo.objects.add(written)
                demo.file_ids.append(stack.file_id(*written))
                found.append(written)
    return found


def put_step(demo: Run, step: Step, *, wait: bool, deadline: float) -> bool:
    if step.file is not None:
        return upload(demo, step.file, wait=wait, deadline=deadline)
    return put_records(demo, step.records or [], wait=wait, deadline=deadline)


def put_records(demo: Run, records: list[dict], *, wait: bool, deadline: float) -> bool:
    """Put contact records into the delivery stream (StackClient.put_contact_records); with
    ``wait``, until the processing logs of the objects Firehose wrote of them say what became of
    them."""
    stack = demo.stack
    began = time.monotonic()
    calls = stack.put_contact_records(records)
    demo.firehose_calls += calls
    demo.records_in += len(records)
    size = sum(len(json.dumps(record)) for record in records) / 1024
    line = (
        f"  put {len(records):>5,} records {size:>6,.0f} KiB -> Firehose "
        f"({calls} PutRecordBatch call{'s' * (calls > 1)})"
    )
    if not wait:  # the local stack's Firehose wrote them at once: theirs, not a later put's
        new_objects(demo)
        say(line)
        return True
    written: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        written += new_objects(demo)
        logs = [stack.file_outcome(key, version) for key, version in written]
        if len(written) >= calls and all(logs):
            counts = {
                name: sum(int(log[name]["N"]) for log in logs)
                for name in ("rows_ok", "rows_superseded", "rows_rejected")
            }
            outcomes = collections.Counter(log["outcome"]["S"] for log in logs)
            say(
                f"{line} -> {len(written)} object{'s' * (len(written) > 1)} "
                f"{', '.join(f'{o} {n}' for o, n in sorted(outcomes.items()))} in "
                f"{time.monotonic() - began:.1f} s ({counts['rows_ok']:,} ok, "
                f"{counts['rows_superseded']:,} superseded, {counts['rows_rejected']} rejected)"
            )
            return True
        time.sleep(0.2)
    say(f"{line}  -> not processed in time")
    return False


def upload(demo: Run, demo_file: DemoFile, *, wait: bool, deadline: float) -> bool:
    """Put one file; with ``wait``, until its processing log says what became of it (a file
    still IN_PROGRESS, resumed by continuations or retried after a timeout, is not done)."""
    stack = demo.stack
    began = time.monotonic()
    version = stack.s3.put_object(Bucket=stack.bucket, Key=demo_file.key, Body=demo_file.body)[
        "VersionId"  # ContactsBucket is versioned: a file's id names its version
    ]
    demo.file_ids.append(stack.file_id(demo_file.key, version))
    size = len(demo_file.body) / 1024
    line = f"  put {demo_file.key:<40} {demo_file.rows:>5,} rows {size:>6.1f} KiB"
    if not wait:
        say(line)
        return True
    while time.monotonic() < deadline:
        if log := stack.file_outcome(demo_file.key, version):
            say(
                f"{line}  -> {log['outcome']['S']} in {time.monotonic() - began:.1f} s "
                f"({int(log['rows_ok']['N']):,} ok, {int(log['rows_rejected']['N'])} rejected)"
            )
            return True
        time.sleep(0.2)
    say(f"{line}  -> not processed in time")
    return False


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------
class Report:
    """Checked lines of the summary; every mismatch is kept as a problem."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def check(self, label: str, actual: Any, wanted: Any, detail: str = "") -> None:
        mark = "ok" if actual == wanted else "MISMATCH"
        if actual != wanted:
            self.problems.append(f"{label}: {actual} (expected {wanted})")
        wanted_text = f"{wanted:,}" if isinstance(wanted, int) else str(wanted)
        actual_text = f"{actual:,}" if isinstance(actual, int) else str(actual)
        say(f"  {label:<26} {actual_text:>8}   expected {wanted_text:<8} {mark}  {detail}")


def summary(demo: Run) -> int:
    data, stack = demo.data, demo.stack
    report = Report()
    say("\nSummary")
    if not demo.settled:
        report.problems.append(
            f"the pipeline did not settle within the bound ({demo.elapsed:.0f} s)"
        )
        say(f"  NOT SETTLED after {demo.elapsed:.0f} s: the counts below are where it stopped")

    kinds = data.redelivery_kinds
    say(
        f"  {'contact records in':<26} {demo.records_in:>8,}   through Firehose: "
        f"{demo.firehose_calls} PutRecordBatch calls, {len(demo.objects)} objects written "
        f"under {FIREHOSE_PREFIX}"
    )
    say(
        f"  {'interactions':<26} {data.interactions:>8,}   {len(data.records):,} legs; "
        f"{len(data.redeliveries)} re-deliveries (newer {kinds['newer']}, older "
        f"{kinds['older']}, same time {kinds['equal']}, exact duplicates {kinds['duplicate']})"
    )
    outcomes = collections.Counter(item["outcome"]["S"] for item in demo.files)
    rows_ok = sum(int(item["rows_ok"]["N"]) for item in demo.files)
    superseded = sum(int(item.get("rows_superseded", {"N": "0"})["N"]) for item in demo.files)
    rejected = sum(int(item["rows_rejected"]["N"]) for item in demo.files)
    outcome_text = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    # The chaos run's re-uploads: their rows are read again (and change nothing).
    again = [log for log in demo.files if log["pk"]["S"].removeprefix("FILE#") in demo.reuploads]
    read_again = sum(
        int(log["rows_ok"]["N"]) + int(log.get("rows_superseded", {"N": "0"})["N"]) for log in again
    )
    rejected_again = sum(int(log["rows_rejected"]["N"]) for log in again)
    say(
        f"  {'files':<26} {len(demo.files):>8}   {outcome_text} "
        f"({len(demo.objects)} of Firehose, {len(data.files)} flat"
        + (f", {len(demo.reuploads)} re-uploaded" if demo.reuploads else "")
        + ")"
    )
    report.check(
        "contacts stored", demo.contacts, len(data.stored), "one per contact, whatever came twice"
    )
    report.check(
        "at their newest copy",
        len(data.stored) - demo.contacts_not_newest,
        len(data.stored),
        "by LastUpdateTimestamp / updated_at, never the upload",
    )
    report.check(
        "records and rows read",
        rows_ok + superseded,
        data.good_rows + read_again,
        f"{superseded:,} of them superseded by a newer copy stored"
        + (f", {read_again:,} read again from re-uploads" if again else ""),
    )
    report.check(
        "rows rejected",
        rejected,
        data.bad_rows + rejected_again,
        f"reports: rejected/{DEMO_PREFIX}..." + (f", {rejected_again} again" if again else ""),
    )

    messages = demo.topic.collect()
    kinds = collections.Counter(m.get("kind") for m in messages)
    unique = {m.get("notification_id") for m in messages}
    report.check("surveys sent", kinds[keys.SURVEY], data.surveys, "at NotificationsTopic")
    report.check("gift cards sent", kinds[keys.GIFT_CARD], data.gift_cards, "at NotificationsTopic")
    report.check("duplicate notifications", len(messages) - len(unique), 0)
    last_hop.check(stack, messages, report)
    check_last_agents(demo, report)
    demo.metrics.read()
    show_metric(demo.metrics, "DuplicatesSuppressed", "duplicates suppressed", "none needed")
    show_metric(
        demo.metrics, "LastAgentStale", "stale last-agent writes", "older contacts, refused"
    )
    say(
        "    (normal: a caller's contacts arrive in no order of time, legs and re-deliveries\n"
        "    late, flat rows in any order; a contact that ended before the caller's stored last\n"
        "    agent is refused, so the newest stays: that refusal keeps the last agents right)"
    )
    show_failed_invocations(demo.stack)
    show_routes(demo, report)
    show_dead_letters(stack, report)

    total_rows = demo.records_in + sum(f.rows for f in data.files)
    contacts = len(data.stored)
    say(
        f"\n  elapsed: {demo.elapsed:.1f} s from the first put to settled "
        f"(first deliveries and files ingested in {demo.ingest_seconds:.1f} s)"
    )
    say(
        f"  throughput: {contacts / demo.elapsed:,.0f} contacts/s end to end "
        f"({total_rows:,} records and rows in, {len(messages):,} notifications out); "
        f"ingest alone {contacts / max(demo.ingest_seconds, 0.001):,.0f} contacts/s"
    )
    if report.problems:
        say("\nFAILED: " + "; ".join(report.problems))
        return 1
    say("\nAll numbers add up.")
    return 0


def check_last_agents(demo: Run, report: Report) -> None:
    """Every caller's LAST_AGENT item against the newest contact with an agent."""
    expected = demo.data.last_agents

    def wrong() -> dict[str, tuple[dict | None, dict]]:
        stored = demo.stack.last_agents(expected)
        return {c: (stored.get(c), want) for c, want in expected.items() if stored.get(c) != want}

    mismatches = wrong()
    began = time.monotonic()
    while mismatches and time.monotonic() - began < 15:  # still converging?
        time.sleep(1)
        mismatches = wrong()
    late = time.monotonic() - began
    detail = "callers with an agent"
    if late >= 1 and not mismatches:
        detail += f" (converged {late:.0f} s after the settle signal)"
    demo.wrong_last_agents = mismatches
    report.check("last agents right", len(expected) - len(mismatches), len(expected), detail)
    for caller, (stored, want) in list(mismatches.items())[:3]:
        say(
            f"      {mask(caller)}: stored {stored and stored['contact_id']} "
            f"({stored and stored['ended_at']}), expected {want['contact_id']} ({want['ended_at']})"
        )


def show_routes(demo: Run, report: Report) -> None:
    expected = demo.data.last_agents
    say("\n  Last agent for a few callers (RouteFunction, as Amazon Connect asks it):")
    frequent = collections.Counter(
        item["caller"] for item in demo.data.stored.values() if item.get("caller")
    )
    for caller, n in [*frequent.most_common(4), ("+15550000000", 0)]:
        answer = demo.stack.route(caller)
        want = expected.get(caller)
        right = (want is None and answer.get("found") == "false") or (
            want is not None and answer.get("agent_id") == want["agent_id"]
        )
        if not right:
            report.problems.append(f"route {mask(caller)}: {answer}")
        if answer.get("found") == "true":
            text = (
                f"{answer['agent_id']:<10} (contact {answer['contact_id']}, "
                f"ended {answer['ended_at']})"
            )
        else:
            text = "no last agent: found=false"
        say(f"    {mask(caller)} {n:>3} contacts -> {text}  {'ok' if right else 'MISMATCH'}")


def show_metric(metrics: FunctionMetrics, metric: str, label: str, none: str) -> None:
    """One of the functions' EMF metrics, in total and per function."""
    counts = metrics.by_function(metric)
    detail = ", ".join(f"{fn.removesuffix('Function')} {n}" for fn, n in sorted(counts.items()))
    say(f"  {label:<26} {sum(counts.values()):>8,}   {detail or none} ({metric})")


def show_failed_invocations(stack: StackClient) -> None:
    """Invocations the event sources saw fail (and retried), by function."""
    failures = stack.failures()
    failed = collections.Counter(failure.function for failure in failures)
    detail = ", ".join(f"{name.removesuffix('Function')} {n}" for name, n in sorted(failed.items()))
    outcomes = collections.Counter(failure.outcome for failure in failures)
    say(
        f"  {'failed invocations':<26} {sum(failed.values()):>8,}   {detail or 'none'}"
        + (f" ({', '.join(f'{o} {n}' for o, n in sorted(outcomes.items()))})" if outcomes else "")
        + ", retried by their event source"
    )


def show_dead_letters(stack: StackClient, report: Report) -> None:
    say("\n  Dead-letter and failure queues:")
    for output in stack.failure_queues:
        depth = stack.queue_depth(output)
        if depth:
            report.problems.append(f"{output}: {depth} messages")
        say(f"    {output.removesuffix('Url'):<32} {depth}")


if __name__ == "__main__":
    raise SystemExit(main())
