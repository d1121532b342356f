"""P5: contacts per second end to end through the local stack, and the latency from an S3 put to
its notifications reaching NotificationsTopic.

`python -m emulator up` runs as a subprocess on a free bench port; once it prints `ready`, a
capture queue is subscribed to NotificationsTopic (raw delivery) and FILES .jsonl files of
ROWS_PER_FILE generated contacts are put under incoming/, back to back. Done means all three:
every file's PROCESSING_LOG item counts all its rows in, every LAST_AGENT item is the one the data
says (newest contact with an agent per caller, by shared.rules), and every SURVEY and GIFT_CARD
notification the data calls for (shared.rules) reached the topic. No scans while it runs: they
would load the local stack they measure. Throughput is contacts over the time from the first put
to the poll that saw done (polls are ~1 s apart); latency is each notification's receive time
against its file's put time. The wait is bounded (DONE_WITHIN_SECONDS); the stack is stopped at
the end either way.
"""

import collections
import json
import os
import re
import shlex
import statistics
import threading
import time
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.common import REGION, ROOT, Figure, percentile
from bench.inprocess import generate_contacts, import_shared, jsonl_lines
from emulator.process import LocalStackProcess, free_port

FILES = int(os.environ.get("BENCH_P5_FILES", "20"))
ROWS_PER_FILE = 1_000
CONTACTS = FILES * ROWS_PER_FILE
READY_WITHIN_SECONDS = 90
DONE_WITHIN_SECONDS = int(os.environ.get("BENCH_P5_TIMEOUT", "240"))
PORTS = range(4950, 5000)
IDLE_SECONDS = 10
# An experiment's samconfig (e.g. other local timeouts); `make bench` uses the repository's.
CONFIG_FILE = os.environ.get("BENCH_P5_SAMCONFIG")
PREFIX = "incoming/bench/"
LOG = ROOT / "bench" / "out" / "p5-local-stack.log"  # the stack's output, for a post-mortem


def failures(stack: LocalStackProcess) -> str:
    """Invocations that did not end ok, by function and outcome, with their median time."""
    groups: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for name, outcome, millis in list(stack.failed_invocations):
        logical = re.search(r"(\w+Function)", name)
        groups[(logical[1] if logical else name, outcome)].append(millis)
    return (
        ", ".join(
            f"{function} {outcome} x{len(times)} (median {statistics.median(times):.0f} ms)"
            for (function, outcome), times in sorted(groups.items())
        )
        or "none"
    )


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


def _local_parameters() -> tuple[str, dict[str, str]]:
    """Stack name and parameter overrides the local stack deploys with (samconfig.toml)."""
    path = os.environ.get("BENCH_P5_SAMCONFIG", ROOT / "samconfig.toml")
    config = tomllib.loads(Path(path).read_text()).get("default", {})
    name = config.get("global", {}).get("parameters", {}).get("stack_name", "last-agent-routing")
    overrides = config.get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
    if isinstance(overrides, list):
        overrides = " ".join(overrides)
    return name, dict(item.split("=", 1) for item in shlex.split(overrides) if "=" in item)


def expected(files: list[list[dict]], goodwill_wait_seconds: int) -> dict[str, Any]:
    """What the data should give, by the layer's own rules."""
    import_shared()
    from shared import keys, rules  # noqa: PLC0415 (the layer is on sys.path now)

    last_agents: dict[str, tuple[str, str, str]] = {}
    notifications: dict[tuple[str, str], int] = {}  # (kind, contact_id) -> file index
    for index, contacts in enumerate(files):
        for contact in contacts:
            if rules.sets_last_agent(contact):
                ended = keys.utc_timestamp(datetime.fromisoformat(contact["ended_at"]))
                candidate = (ended, contact["contact_id"], contact["agent_id"])
                current = last_agents.get(contact["caller"])
                if rules.is_newer(candidate[:2], current[:2] if current else None):
                    last_agents[contact["caller"]] = candidate
            if rules.survey_due(contact):
                notifications[(keys.SURVEY, contact["contact_id"])] = index
            if rules.gift_card_due(contact, goodwill_wait_seconds):
                notifications[(keys.GIFT_CARD, contact["contact_id"])] = index
    return {
        "last_agents": {
            caller: {"agent_id": agent, "contact_id": contact_id, "ended_at": ended}
            for caller, (ended, contact_id, agent) in last_agents.items()
        },
        "notifications": notifications,
    }


class Capture(threading.Thread):
    """Receives from the capture queue until stopped, noting when each notification arrived."""

    def __init__(self, sqs, url: str):
        super().__init__(daemon=True)
        self.sqs, self.url = sqs, url
        self.received: dict[tuple[str, str], float] = {}
        self.duplicates = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                batch = self.sqs.receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
            except Exception:  # the stack is going away; the figures say what arrived
                time.sleep(0.2)
                continue
            now = time.monotonic()
            for message in batch:
                body = json.loads(message["Body"])
                key = (body.get("kind"), body.get("contact_id"))
                if key in self.received:
                    self.duplicates += 1
                else:
                    self.received[key] = now
            if batch:
                self.sqs.delete_message_batch(
                    QueueUrl=self.url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(batch)
                    ],
                )


def _not_measured(reason: str) -> list[Figure]:
    return [
        Figure(
            "P5",
            "throughput end to end",
            0,
            "contacts/s",
            f"all {CONTACTS} done <= {DONE_WITHIN_SECONDS} s",
            None,
            f"NOT MEASURED: {reason}",
        )
    ]


def run() -> list[Figure]:
    stack = LocalStackProcess(free_port(PORTS), config_file=CONFIG_FILE, log_path=LOG)
    try:
        try:
            stack.start(READY_WITHIN_SECONDS)
        except RuntimeError as error:
            tail = " | ".join(stack.lines(3)) or "no output"
            return _not_measured(f"{error} (python -m emulator up): {tail}")
        return _measure(stack)
    finally:
        stack.stop(grace=20)


def _measure(stack: LocalStackProcess) -> list[Figure]:
    stack_name, parameters = _local_parameters()
    goodwill_wait = int(parameters.get("GoodwillWaitSeconds", "600"))
    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=REGION,
    )
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    clients = {
        name: session.client(name, endpoint_url=stack.endpoint, config=config)
        for name in ("cloudformation", "s3", "sqs", "sns", "dynamodb")
    }
    stacks = clients["cloudformation"].describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    table, bucket = outputs["ContactsTableName"], outputs["ContactsBucketName"]

    sqs = clients["sqs"]
    capture_url = sqs.create_queue(QueueName="bench-topic-capture")["QueueUrl"]
    capture_arn = sqs.get_queue_attributes(QueueUrl=capture_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    clients["sns"].subscribe(
        TopicArn=outputs["NotificationsTopicArn"],
        Protocol="sqs",
        Endpoint=capture_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    capture = Capture(session.client("sqs", endpoint_url=stack.endpoint), capture_url)
    capture.start()

    files = [
        list(generate_contacts(ROWS_PER_FILE, seed=23, first=i * ROWS_PER_FILE, callers=5_000))
        for i in range(FILES)
    ]
    want = expected(files, goodwill_wait)
    bodies = [b"".join(jsonl_lines(iter(contacts))) for contacts in files]

    put_times, file_ids = [], []
    cpu_before = cpu(stack)
    started = time.monotonic()
    for index, body in enumerate(bodies):
        put_times.append(time.monotonic())
        key = f"{PREFIX}file-{index:03d}.jsonl"
        put = clients["s3"].put_object(Bucket=bucket, Key=key, Body=body)
        file_ids.append(f"{bucket}/{key}#{put.get('VersionId')}")
    put_seconds = time.monotonic() - started

    # Done is watched without scans: a Scan of the 20k-item table costs the local stack (one
    # interpreter) seconds of CPU, a third of its time when polled every 5 s (py-spy). Contacts:
    # each file's PROCESSING_LOG item (written after all its rows) and its rows_ok; last agents:
    # BatchGetItem of the expected keys, only once everything else is done.
    import_shared()
    from shared import keys  # noqa: PLC0415 (the layer is on sys.path now)

    state = {"contacts": 0, "last_agents_ok": 0, "notifications": 0}
    logged: dict[str, int] = {}
    stages: dict[str, float] = {}

    def contacts_in() -> int:
        for file_id in file_ids:
            if file_id not in logged:
                item = (
                    clients["dynamodb"]
                    .get_item(
                        TableName=table,
                        Key={k: {"S": v} for k, v in keys.processing_log_key(file_id).items()},
                        ProjectionExpression="rows_ok",
                    )
                    .get("Item")
                )
                if item:
                    logged[file_id] = int(item["rows_ok"]["N"])
        return sum(logged.values())

    def last_agents_right() -> bool:
        stored = {}
        callers = list(want["last_agents"])
        for start in range(0, len(callers), 100):
            request = {
                table: {
                    "Keys": [
                        {k: {"S": v} for k, v in keys.last_agent_key(caller).items()}
                        for caller in callers[start : start + 100]
                    ],
                    "ProjectionExpression": "pk, agent_id, contact_id, ended_at",
                }
            }
            while request:
                page = clients["dynamodb"].batch_get_item(RequestItems=request)
                for item in page["Responses"].get(table, []):
                    stored[item["pk"]["S"].removeprefix("CALLER#")] = {
                        name: item[name]["S"] for name in ("agent_id", "contact_id", "ended_at")
                    }
                request = page.get("UnprocessedKeys") or None
        state["last_agents_ok"] = sum(
            stored.get(caller) == value for caller, value in want["last_agents"].items()
        )
        return state["last_agents_ok"] == len(want["last_agents"])

    def done(poll: int) -> bool:
        """Cheap checks first: notifications (counted as they arrive), then the file logs."""
        state["notifications"] = len(capture.received.keys() & want["notifications"].keys())
        notified = state["notifications"] == len(want["notifications"])
        if state["contacts"] < CONTACTS and (notified or poll % 3 == 0):
            state["contacts"] = contacts_in()
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
    cpu_after = cpu(stack)
    if finished is None:  # where it got to, for the report
        state["contacts"] = contacts_in()
        last_agents_right()
    capture.stopping.set()
    capture.join(5)
    own_cpu, workers_cpu = (a - b for a, b in zip(cpu_after, cpu_before, strict=True))
    load = (
        f"CPU over {wall:.0f} s: local stack process {own_cpu:.0f} s "
        f"({own_cpu / wall * 100:.0f}% of one core), function workers {workers_cpu:.0f} s"
    )

    want_n = len(want["notifications"])
    latencies = [
        received - put_times[want["notifications"][key]]
        for key, received in capture.received.items()
        if key in want["notifications"]
    ]
    extra = len(capture.received.keys() - want["notifications"].keys()) + capture.duplicates
    recent = sum(1 for at in capture.received.values() if at > started + wall - 60)
    ingested = (
        f" (all ingested {stages['ingested_at']:.0f} s after the first put)"
        if "ingested_at" in stages
        else ""
    )
    progress = (
        f"{state['contacts']}/{CONTACTS} contacts{ingested}, {state['last_agents_ok']}/"
        f"{len(want['last_agents'])} last agents right, {state['notifications']}/{want_n} "
        f"notifications ({recent / 60:.1f}/s over the last 60 s)"
    )
    if finished is None:
        throughput = Figure(
            "P5",
            "throughput end to end",
            0,
            "contacts/s",
            f"all {CONTACTS} done <= {DONE_WITHIN_SECONDS} s",
            False,
            (
                f"NOT DONE after {DONE_WITHIN_SECONDS} s: {progress}; invocations not ok: "
                f"{failures(stack)}; {load}"
            ),
        )
    else:
        elapsed = finished - started
        throughput = Figure(
            "P5",
            "throughput end to end",
            round(CONTACTS / elapsed, 1),
            "contacts/s",
            f"all {CONTACTS} done <= {DONE_WITHIN_SECONDS} s",
            extra == 0,
            (
                f"{FILES} files x {ROWS_PER_FILE} contacts put in {put_seconds:.1f} s, all done "
                f"in {elapsed:.1f} s (first put to done, polled ~1 s): {progress}; "
                f"{extra} unexpected or duplicate notifications; invocations not ok: "
                f"{failures(stack)}; {load}"
            ),
        )
    figures = [throughput]
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
                        f"contact's file; max {max(latencies):.1f} s"
                    ),
                )
            )
    if finished is not None:
        figures.append(idle_cpu(stack))
    return figures


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
