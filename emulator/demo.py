"""`make run`: the whole application on the local stack, demo data in, a summary out.

Starts `python -m emulator up` on a free port (4800-4899), generates a realistic export (a few
thousand contacts over a few hundred callers, agents, a mix of dispositions, some bad rows, a
.csv.gz and a key with spaces and unicode), uploads it, then a re-export of some contacts with
fields changed, waits (bounded) for the pipeline to settle and prints what happened: contacts in
and rejected, the last agent of a few callers (through RouteFunction), surveys and gift cards that
reached NotificationsTopic, duplicates suppressed, dead-letter depths and throughput.

Every number is checked against what the generated data should give under the layer's own rules
(shared.rules, shared.keys); the exit status is 0 only if they all agree. The demo is a client of
the stack: it talks to it with boto3 only, exactly as any AWS client would.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import gzip
import io
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The layer's pure modules give the expected results; the demo never imports a function.
sys.path.insert(0, str(ROOT / "layers" / "shared"))

import boto3  # noqa: E402
from shared import keys, rules  # noqa: E402

REGION = "us-east-1"
PORTS = range(4800, 4900)
DEMO_PREFIX = "incoming/demo/"
CSV_FIELDS = (
    "contact_id",
    "caller",
    "agent_id",
    "queue",
    "started_at",
    "ended_at",
    "disposition",
    "wait_seconds",
    "email",
    "survey_opt_in",
)
QUEUES = ("billing", "support", "sales", "claims", "Kundenservice")
DISPOSITIONS = {  # weights
    rules.RESOLVED: 55,
    rules.TRANSFERRED: 15,
    rules.ESCALATED: 18,
    rules.ABANDONED: 12,
}


def say(message: str = "") -> None:
    print(message, flush=True)


def mask(caller: str) -> str:
    """+15551234567 -> +1555***4567: enough to tell callers apart, not to dial them."""
    return caller[:5] + "***" + caller[-4:]


# --------------------------------------------------------------------------------------------
# Demo data
# --------------------------------------------------------------------------------------------
@dataclass
class DemoFile:
    key: str
    body: bytes
    rows: int
    bad_rows: int


@dataclass
class DemoData:
    files: list[DemoFile]  # the first export
    reexport: DemoFile  # uploaded once the first export is in
    contacts: dict[str, dict]  # contact_id -> the row as first exported
    reexported: int
    goodwill_wait_seconds: int
    expected: dict[str, Any] = field(default_factory=dict)

    @property
    def bad_rows(self) -> int:
        return sum(f.bad_rows for f in [*self.files, self.reexport])


def generate(n_contacts: int, n_callers: int, seed: int, goodwill_wait_seconds: int) -> DemoData:
    rng = random.Random(seed)  # noqa: S311 (demo data, not secrets)
    callers = [f"+1555{n:07d}" for n in rng.sample(range(10**7), n_callers)]
    agents = [f"agent-{n:03d}" for n in range(1, 41)]
    zones = [UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-5))]
    start = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    rows: list[dict] = []
    for n in range(n_contacts):
        caller = callers[n] if n < n_callers else rng.choice(callers)
        disposition = rng.choices(list(DISPOSITIONS), weights=list(DISPOSITIONS.values()))[0]
        wait = (
            rng.randint(30, 1200)
            if disposition == rules.ABANDONED
            else min(int(rng.expovariate(1 / 150)), 3600)
        )
        ended = start + timedelta(seconds=rng.randint(0, 14 * 24 * 3600))
        talk = 0 if disposition == rules.ABANDONED else rng.randint(60, 1800)
        zone = rng.choice(zones)
        row: dict[str, Any] = {
            "contact_id": f"ctr-{n:05d}-{rng.getrandbits(32):08x}",
            "caller": caller,
            "queue": rng.choice(QUEUES),
            "started_at": (ended - timedelta(seconds=wait + talk)).astimezone(zone).isoformat(),
            "ended_at": ended.astimezone(zone).isoformat().replace("+00:00", "Z"),
            "disposition": disposition,
            "wait_seconds": wait,
        }
        if disposition != rules.ABANDONED:
            row["agent_id"] = rng.choice(agents)
        if rng.random() < 0.6:
            row["email"] = f"customer{n}@example.com"
        if rng.random() < 0.8:
            row["survey_opt_in"] = rng.random() < 0.55
        rows.append(row)

    contacts = {row["contact_id"]: row for row in rows}
    bad = bad_rows(rng, rows[0])
    # The first export: four files, four shapes.
    cut = [0, n_contacts * 35 // 100, n_contacts * 65 // 100, n_contacts * 92 // 100, n_contacts]
    parts = [rows[cut[i] : cut[i + 1]] for i in range(4)]
    names = (
        "contacts-2026-11-02.jsonl",
        "contacts-2026-11-03.csv",
        "contacts-2026-11-04.csv.gz",
        "Kontakte München 1.jsonl",
    )
    files = []
    for index, (name, part) in enumerate(zip(names, parts, strict=True)):
        mixed: list[dict | str] = list(part)
        # CSV carries only the dict-shaped bad rows (a cut-off JSON line is a JSONL problem).
        mine = [b for b in bad[index::4] if ".jsonl" in name or isinstance(b, dict)]
        for broken in mine:
            mixed.insert(rng.randrange(len(mixed) + 1), broken)
        body = encode(name, mixed)
        files.append(DemoFile(DEMO_PREFIX + name, body, len(mixed), len(mine)))

    # The re-export: some contacts again, with fields changed that would qualify them for a
    # survey or a gift card if they were new. They are not: nothing new may come of them.
    again = rng.sample(rows, max(1, n_contacts // 20))
    changed = []
    for row in again:
        copy = {**row, "queue": "re-export"}
        if copy["disposition"] == rules.RESOLVED:
            copy.update(email=f"new-{copy['contact_id']}@example.com", survey_opt_in=True)
        copy["wait_seconds"] = max(copy["wait_seconds"], goodwill_wait_seconds + 60)
        changed.append(copy)
    reexport = DemoFile(
        DEMO_PREFIX + "re-export 2026-11-05.jsonl", encode(".jsonl", changed), len(changed), 0
    )
    data = DemoData(files, reexport, contacts, len(changed), goodwill_wait_seconds)
    data.expected = expectations(data)
    return data


def bad_rows(rng: random.Random, good: dict) -> list[dict | str]:
    """Rows that break the input contract, one reason each."""

    def variant(**changes: Any) -> dict:
        row = {**good, "contact_id": f"bad-{rng.getrandbits(40):010x}", **changes}
        return {k: v for k, v in row.items() if v is not None}

    rows: list[dict | str] = []
    for _ in range(4):
        rows += [
            variant(caller="089 1234567"),
            variant(disposition="HUNG_UP"),
            variant(wait_seconds=-3),
            variant(ended_at="2026-11-01T00:00:00Z", started_at="2026-11-01T01:00:00Z"),
            variant(disposition=rules.RESOLVED, agent_id=None),
            variant(contact_id="not a valid id!"),
        ]
    rows.append('{"contact_id": "cut-off-in-the-middle", "caller": "+1')
    return rows


def encode(name: str, rows: Iterable[dict | str]) -> bytes:
    if ".jsonl" in name:
        text = "".join(
            (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows
        )
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            assert isinstance(row, dict), "CSV rows are dicts"
            values = {k: row.get(k, "") for k in CSV_FIELDS}
            if "survey_opt_in" in row:
                values["survey_opt_in"] = "true" if row["survey_opt_in"] else "false"
            writer.writerow(values)
        text = out.getvalue()
    body = text.encode()
    return gzip.compress(body) if name.endswith(".gz") else body


def expectations(data: DemoData) -> dict[str, Any]:
    """What the pipeline must produce, by the layer's rules over the first export."""
    last: dict[str, tuple[str, str, str]] = {}
    surveys = gifts = 0
    for row in data.contacts.values():
        surveys += rules.survey_due(row)
        gifts += rules.gift_card_due(row, data.goodwill_wait_seconds)
        if rules.sets_last_agent(row):
            order = (keys.utc_timestamp(datetime.fromisoformat(row["ended_at"])), row["contact_id"])
            current = last.get(row["caller"])
            if rules.is_newer(order, current[:2] if current else None):
                last[row["caller"]] = (*order, row["agent_id"])
    return {
        "contacts": len(data.contacts),
        "surveys": surveys,
        "gift_cards": gifts,
        "last_agents": {
            caller: {"ended_at": e, "contact_id": c, "agent_id": a}
            for caller, (e, c, a) in last.items()
        },
    }


# --------------------------------------------------------------------------------------------
# The local stack
# --------------------------------------------------------------------------------------------
def free_port() -> int:
    candidates = list(PORTS)
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 4800-4899")


class LocalStack:
    def __init__(self, port: int):
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.output: collections.deque[str] = collections.deque(maxlen=60)
        self.ready = threading.Event()
        self.process: subprocess.Popen[str] | None = None

    def start(self, timeout: float) -> None:
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "EMULATOR_PORT": str(self.port),
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }
        env.pop("AWS_PROFILE", None)
        self.process = subprocess.Popen(  # noqa: S603 (this interpreter, fixed argv)
            [sys.executable, "-m", "emulator", "up", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.process.poll() is not None:
                raise RuntimeError(f"the local stack exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local stack was not ready within {timeout:.0f} s")

    def _read(self) -> None:
        assert self.process and self.process.stdout
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))
            if line.startswith("ready"):
                self.ready.set()

    def stop(self) -> None:
        if not self.process or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)

    def control(self, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 only)
            self.endpoint + path,
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (localhost)
            return json.loads(response.read() or b"{}")


def samconfig() -> tuple[str, dict[str, str]]:
    """The stack name and the local parameter overrides of samconfig.toml [default]."""
    path = ROOT / "samconfig.toml"
    config = tomllib.loads(path.read_text()).get("default", {}) if path.exists() else {}
    name = config.get("global", {}).get("parameters", {}).get("stack_name", "last-agent-routing")
    overrides = config.get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
    if isinstance(overrides, list):
        overrides = " ".join(overrides)
    pairs = dict(item.split("=", 1) for item in shlex.split(overrides) if "=" in item)
    return name, pairs


# --------------------------------------------------------------------------------------------
# Watching the pipeline
# --------------------------------------------------------------------------------------------
class Pipeline:
    """The stack as a client sees it: boto3 against the local endpoint, outputs by name."""

    def __init__(self, stack_name: str, local: LocalStack):
        self.local = local
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (the local stack's dummy credentials)
            region_name=REGION,
        )
        self.clients = {
            name: session.client(name, endpoint_url=local.endpoint)
            for name in ("cloudformation", "s3", "sqs", "sns", "dynamodb", "lambda")
        }
        stacks = self.clients["cloudformation"].describe_stacks(StackName=stack_name)["Stacks"]
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        self.topic_messages: list[dict] = []
        self.capture_url = ""

    def __getattr__(self, name: str) -> Any:
        clients = self.__dict__.get("clients", {})
        if name in clients:
            return clients[name]
        raise AttributeError(name)

    def subscribe_capture(self) -> None:
        sqs = self.clients["sqs"]
        self.capture_url = sqs.create_queue(QueueName="demo-topic-capture")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.capture_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.clients["sns"].subscribe(
            TopicArn=self.outputs["NotificationsTopicArn"],
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
        )

    def collect(self) -> list[dict]:
        sqs = self.clients["sqs"]
        while True:
            batch = sqs.receive_message(QueueUrl=self.capture_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not batch:
                return self.topic_messages
            self.topic_messages += [json.loads(m["Body"]) for m in batch]
            sqs.delete_message_batch(
                QueueUrl=self.capture_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
                ],
            )

    def depth(self, output: str) -> int:
        attributes = self.clients["sqs"].get_queue_attributes(
            QueueUrl=self.outputs[output],
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def items(self, item_type: str, select_count: bool = False) -> Any:
        kwargs: dict[str, Any] = {
            "TableName": self.outputs["ContactsTableName"],
            "FilterExpression": "#t = :t",
            "ExpressionAttributeNames": {"#t": "type"},
            "ExpressionAttributeValues": {":t": {"S": item_type}},
        }
        if select_count:
            kwargs["Select"] = "COUNT"
        total, found = 0, []
        while True:
            page = self.clients["dynamodb"].scan(**kwargs)
            total += page["Count"]
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return total if select_count else found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def idle(self) -> bool:
        if self.depth("IngestQueueUrl") or self.depth("NotificationQueueUrl"):
            return False
        with contextlib.suppress(Exception):
            status = self.local.control("/_emulator/status")
            return all(status.get(flag, True) for flag in ("idle", "settled"))
        return True

    def route(self, caller: str) -> dict:
        event = {
            "Name": "ContactFlowEvent",
            "Details": {
                "ContactData": {
                    "Channel": "VOICE",
                    "ContactId": "demo",
                    "CustomerEndpoint": {"Address": caller, "Type": "TELEPHONE_NUMBER"},
                    "SystemEndpoint": {"Address": "+18005550100", "Type": "TELEPHONE_NUMBER"},
                    "InitiationMethod": "INBOUND",
                    "Attributes": {},
                },
                "Parameters": {},
            },
        }
        response = self.clients["lambda"].invoke(
            FunctionName=self.outputs["RouteFunctionName"], Payload=json.dumps(event).encode()
        )
        return json.loads(response["Payload"].read() or b"{}")


def wait_until(
    check: Callable[[], bool], timeout: float, progress: Callable[[], str], every: float = 2.0
) -> bool:
    """Poll ``check`` (bounded); print ``progress()`` when it changes, at most every ``every`` s."""
    deadline = time.monotonic() + timeout
    last_line, last_print = "", 0.0
    while True:
        done = check()
        line = progress()
        now = time.monotonic()
        if line != last_line and (now - last_print >= every or done):
            say("  " + line)
            last_line, last_print = line, now
        if done:
            return True
        if now > deadline:
            return False
        time.sleep(0.3)


# --------------------------------------------------------------------------------------------
# The demo
# --------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m emulator demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--contacts", type=int, default=3000)
    parser.add_argument("--callers", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20261102)
    parser.add_argument("--port", type=int, default=None, help="default: a free one in 4800-4899")
    parser.add_argument(
        "--duplicate-deliveries",
        type=int,
        default=1,
        help="fault switch: deliver every SQS message and stream batch N times",
    )
    parser.add_argument("--timeout", type=float, default=90.0, help="settle bound (s)")
    args = parser.parse_args(argv)

    stack_name, overrides = samconfig()
    goodwill = int(overrides.get("GoodwillWaitSeconds", rules.DEFAULT_GOODWILL_WAIT_SECONDS))
    data = generate(args.contacts, args.callers, args.seed, goodwill)

    local = LocalStack(args.port or free_port())
    say(f"Starting the local stack ({stack_name}) on {local.endpoint} ...")
    began = time.monotonic()
    try:
        local.start(timeout=90)
    except RuntimeError as error:
        say(f"FAILED: {error}")
        say("\n".join(local.output))
        local.stop()
        return 1
    say(f"  ready in {time.monotonic() - began:.1f} s")
    try:
        return run(local, stack_name, data, args)
    except Exception as error:  # the summary of a broken run: what and where
        say(f"FAILED: {type(error).__name__}: {error}")
        say("  last lines of the local stack:")
        for line in list(local.output)[-20:]:
            say("    " + line)
        return 1
    finally:
        say("Stopping the local stack.")
        local.stop()


def run(local: LocalStack, stack_name: str, data: DemoData, args: argparse.Namespace) -> int:
    pipeline = Pipeline(stack_name, local)
    state: dict[str, Any] = {"history": [], "metrics": FunctionMetrics()}
    pipeline.subscribe_capture()
    if args.duplicate_deliveries > 1:
        local.control("/_emulator/faults", {"duplicate_deliveries": args.duplicate_deliveries})
        say(
            f"  fault switch: every message and stream batch delivered {args.duplicate_deliveries}x"
        )
    expected = data.expected
    bucket = pipeline.outputs["ContactsBucketName"]

    say(
        f"\nUploading {len(data.files)} files ({expected['contacts']:,} contacts, "
        f"{sum(f.bad_rows for f in data.files)} bad rows) to s3://{bucket}/{DEMO_PREFIX}"
    )
    started = time.monotonic()
    for demo_file in data.files:
        pipeline.s3.put_object(Bucket=bucket, Key=demo_file.key, Body=demo_file.body)
        size = len(demo_file.body) / 1024
        say(f"  put {demo_file.key:<42} {demo_file.rows:>6,} rows {size:>7.1f} KiB")

    def contacts_in() -> int:
        return pipeline.items(keys.CONTACT, select_count=True)

    counts = {"contacts": 0}

    def first_export_in() -> bool:
        counts["contacts"] = contacts_in()
        return counts["contacts"] >= expected["contacts"]

    say("\nWaiting for the first export to be ingested")
    first_in = wait_until(
        first_export_in,
        args.timeout,
        lambda: f"contacts in the table: {counts['contacts']:,}/{expected['contacts']:,}",
    )
    ingest_seconds = time.monotonic() - started
    if first_in:
        say(f"\nRe-exporting {data.reexported} contacts with changed fields")
        pipeline.s3.put_object(Bucket=bucket, Key=data.reexport.key, Body=data.reexport.body)
        say(f"  put {data.reexport.key:<42} {data.reexport.rows:>6,} rows")

    want_notifications = expected["surveys"] + expected["gift_cards"]
    want_files = len(data.files) + 1

    def settled() -> bool:
        messages = pipeline.collect()
        state["files"] = pipeline.items(keys.PROCESSING_LOG)
        state["last_agents"] = pipeline.items(keys.LAST_AGENT, select_count=True)
        state["contacts"] = contacts_in()
        state["notifications"] = len(messages)
        snapshot = (state["contacts"], state["last_agents"], len(messages), len(state["files"]))
        state["history"] = [*state["history"][-2:], snapshot]
        return (
            first_in
            and len(state["files"]) >= want_files
            and state["contacts"] >= expected["contacts"]
            and state["last_agents"] >= len(expected["last_agents"])
            and len(messages) >= want_notifications
            and pipeline.idle()
            and len(state["history"]) == 3
            and len(set(state["history"])) == 1
        )

    say("\nWaiting for the pipeline to settle")
    ok = wait_until(
        settled,
        args.timeout,
        lambda: (
            f"files {len(state.get('files', []))}/{want_files} | "
            f"contacts {state.get('contacts', 0):,} | last agents "
            f"{state.get('last_agents', 0):,}/{len(expected['last_agents']):,} | notifications "
            f"{state.get('notifications', 0):,}/{want_notifications:,}"
        ),
    )
    state.update(settled=ok, elapsed=time.monotonic() - started, ingest_seconds=ingest_seconds)
    return summary(pipeline, data, state)


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


def summary(pipeline: Pipeline, data: DemoData, state: dict[str, Any]) -> int:
    expected = data.expected
    report = Report()
    elapsed = state["elapsed"]
    say("\nSummary")
    if not state["settled"]:
        report.problems.append(f"the pipeline did not settle within the bound ({elapsed:.0f} s)")
        say(f"  NOT SETTLED after {elapsed:.0f} s: the counts below are where it stopped")

    logs = state.get("files", [])
    outcomes = collections.Counter(item["outcome"]["S"] for item in logs)
    rows_ok = sum(int(item["rows_ok"]["N"]) for item in logs)
    rejected = sum(int(item["rows_rejected"]["N"]) for item in logs)
    outcome_text = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    say(f"  {'files':<26} {len(logs):>8}   {outcome_text}")
    report.check("contacts ingested", state.get("contacts", 0), expected["contacts"])
    report.check("rows rejected", rejected, data.bad_rows, f"reports: rejected/{DEMO_PREFIX}...")
    report.check(
        "re-exported rows",
        rows_ok - expected["contacts"],
        data.reexported,
        "rewritten in place: no new contact, no new notification",
    )

    messages = pipeline.collect()
    kinds = collections.Counter(m.get("kind") for m in messages)
    unique = {m.get("notification_id") for m in messages}
    report.check("surveys sent", kinds[keys.SURVEY], expected["surveys"], "at NotificationsTopic")
    report.check(
        "gift cards sent", kinds[keys.GIFT_CARD], expected["gift_cards"], "at NotificationsTopic"
    )
    report.check("duplicate notifications", len(messages) - len(unique), 0)
    check_last_agents(pipeline, data, report)
    show_duplicates(state["metrics"].totals())
    show_routes(pipeline, data, report)
    show_dead_letters(pipeline, report)

    total_rows = sum(f.rows for f in data.files) + data.reexport.rows
    ingest_seconds = state["ingest_seconds"]
    say(
        f"\n  elapsed: {elapsed:.1f} s from the first upload to settled "
        f"(first export ingested in {ingest_seconds:.1f} s)"
    )
    say(
        f"  throughput: {expected['contacts'] / elapsed:,.0f} contacts/s end to end "
        f"({total_rows:,} rows in, {len(messages):,} notifications out); "
        f"ingest alone {expected['contacts'] / max(ingest_seconds, 0.001):,.0f} contacts/s"
    )
    if report.problems:
        say("\nFAILED: " + "; ".join(report.problems))
        return 1
    say("\nAll numbers add up.")
    return 0


def check_last_agents(pipeline: Pipeline, data: DemoData, report: Report) -> None:
    expected = data.expected["last_agents"]
    stored = {
        item["pk"]["S"].removeprefix("CALLER#"): {
            "agent_id": item["agent_id"]["S"],
            "contact_id": item["contact_id"]["S"],
            "ended_at": item["ended_at"]["S"],
        }
        for item in pipeline.items(keys.LAST_AGENT)
    }
    matching = sum(stored.get(caller) == want for caller, want in expected.items())
    report.check("last agents right", matching, len(expected), "callers with an agent")


def show_routes(pipeline: Pipeline, data: DemoData, report: Report) -> None:
    expected = data.expected["last_agents"]
    say("\n  Last agent for a few callers (RouteFunction, as Amazon Connect asks it):")
    frequent = collections.Counter(row["caller"] for row in data.contacts.values())
    for caller, n in [*frequent.most_common(4), ("+15550000000", 0)]:
        answer = pipeline.route(caller)
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


def show_duplicates(totals: dict[str, collections.Counter]) -> None:
    """Duplicates suppressed (idempotency hits) and stale last-agent writes, per function."""
    hits = {name: int(c["DuplicatesSuppressed"]) for name, c in totals.items()}
    stale = int(sum(c["LastAgentStale"] for c in totals.values()))
    detail = ", ".join(f"{name.removesuffix('Function')} {n}" for name, n in hits.items() if n)
    say(f"  {'duplicates suppressed':<26} {sum(hits.values()):>8,}   {detail or 'none needed'}")
    say(f"  {'stale last-agent writes':<26} {stale:>8,}   older contacts arriving later, refused")


def show_dead_letters(pipeline: Pipeline, report: Report) -> None:
    say("\n  Dead-letter and failure queues:")
    for output in (
        "IngestDeadLetterQueueUrl",
        "NotificationDeadLetterQueueUrl",
        "StreamFailureQueueUrl",
    ):
        depth = pipeline.depth(output)
        if depth:
            report.problems.append(f"{output}: {depth} messages")
        say(f"    {output.removesuffix('Url'):<32} {depth}")


class FunctionMetrics:
    """The EMF metrics the functions printed while the demo ran, read back from the local
    stack's function logs (.emulator/logs/<LogicalId>.log, appended to by every run: the demo
    reads only what was written after its start)."""

    def __init__(self, log_dir: Path = ROOT / ".emulator" / "logs"):
        self.log_dir = log_dir
        self.offsets = {path: path.stat().st_size for path in log_dir.glob("*.log")}

    def totals(self) -> dict[str, collections.Counter]:
        totals: dict[str, collections.Counter] = {}
        for path in sorted(self.log_dir.glob("*.log")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                text = handle.read().decode("utf-8", "replace")
            counter = totals.setdefault(path.stem, collections.Counter())
            for line in text.splitlines():
                start = line.find("{")
                if start < 0 or '"_aws"' not in line:
                    continue
                try:
                    record = json.loads(line[start:])
                except ValueError:
                    continue
                for directive in record.get("_aws", {}).get("CloudWatchMetrics", []):
                    for metric in directive.get("Metrics", []):
                        value = record.get(metric["Name"], 0)
                        counter[metric["Name"]] += sum(value) if isinstance(value, list) else value
        return totals
