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

`--chaos` (`make chaos`) runs the same data through the local stack's faults: every S3 event, SQS
message and stream batch delivered 3 times, two pollers per SQS mapping, a crash after a random
AWS call in 5% of invocations and random throttles, and ends with a verdict table (contacts lost,
duplicate and missing notifications, wrong last agents, dead-letter and failure queue depths,
each expected 0).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import gzip
import io
import json
import random
import re
import shlex
import sys
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The layer's pure modules give the expected results; the demo never imports a function.
sys.path.insert(0, str(ROOT / "layers" / "shared"))

import boto3  # noqa: E402
from shared import ingest, keys, model, rules  # noqa: E402

from emulator.process import LocalStackProcess, free_port  # noqa: E402

REGION = "us-east-1"
PORTS = range(4800, 4900)
DEMO_PREFIX = "incoming/demo/"
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
    # The first export: six files in every shape the ingest reads, as hourly exports would come.
    names = (
        "contacts-2026-11-02.jsonl",
        "contacts-2026-11-03.csv",
        "contacts-2026-11-04.csv.gz",
        "Kontakte München 1.jsonl",
        "contacts-2026-11-05.jsonl.gz",
        "contacts-2026-11-06.csv",
    )
    files = []
    for index, name in enumerate(names):
        mixed: list[dict | str] = list(rows[index :: len(names)])
        # CSV carries only the dict-shaped bad rows (a cut-off JSON line is a JSONL problem).
        mine = [b for b in bad[index :: len(names)] if ".jsonl" in name or isinstance(b, dict)]
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
        writer = csv.DictWriter(out, fieldnames=model.INPUT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            assert isinstance(row, dict), "CSV rows are dicts"
            values = {k: row.get(k, "") for k in model.INPUT_FIELDS}
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

    def __init__(self, stack_name: str, local: LocalStackProcess):
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
        """A FIFO queue subscribed to the FIFO topic: exactly what a subscriber receives."""
        sqs = self.clients["sqs"]
        self.capture_url = sqs.create_queue(
            QueueName="demo-topic-capture.fifo", Attributes={"FifoQueue": "true"}
        )["QueueUrl"]
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
            return bool(status.get("idle", True))
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


def upload(pipeline: Pipeline, demo_file: DemoFile, *, wait: bool, deadline: float) -> bool:
    """Put one file; with ``wait``, until its processing log says what became of it (a file
    still IN_PROGRESS, resumed by continuations or retried after a timeout, is not done)."""
    bucket = pipeline.outputs["ContactsBucketName"]
    began = time.monotonic()
    version = pipeline.s3.put_object(Bucket=bucket, Key=demo_file.key, Body=demo_file.body).get(
        "VersionId"
    )
    size = len(demo_file.body) / 1024
    line = f"  put {demo_file.key:<40} {demo_file.rows:>5,} rows {size:>6.1f} KiB"
    if not wait or not version:
        say(line)
        return True
    key = keys.processing_log_key(f"{bucket}/{demo_file.key}#{version}")
    table = pipeline.outputs["ContactsTableName"]
    while time.monotonic() < deadline:
        item = pipeline.dynamodb.get_item(
            TableName=table, Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True
        ).get("Item")
        if item and item["outcome"]["S"] != ingest.IN_PROGRESS:
            say(
                f"{line}  -> {item['outcome']['S']} in {time.monotonic() - began:.1f} s "
                f"({int(item['rows_ok']['N']):,} ok, {int(item['rows_rejected']['N'])} rejected)"
            )
            return True
        time.sleep(0.2)
    say(f"{line}  -> not processed in time")
    return False


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
        time.sleep(0.5)


# --------------------------------------------------------------------------------------------
# The demo
# --------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m emulator demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--contacts", type=int, default=3000)
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
    args = parser.parse_args(argv)
    if args.timeout is None:
        args.timeout = 900.0 if args.chaos else 150.0
    if args.callers is None:
        args.callers = max(1, args.contacts // 10)

    stack_name, overrides = samconfig()
    goodwill = int(overrides.get("GoodwillWaitSeconds", rules.DEFAULT_GOODWILL_WAIT_SECONDS))
    data = generate(args.contacts, args.callers, args.seed, goodwill)

    echo = (lambda line: say("  | " + line)) if args.stack_output else None
    local = LocalStackProcess(args.port or free_port(PORTS), echo=echo)
    say(f"Starting the local stack ({stack_name}) on {local.endpoint} ...")
    began = time.monotonic()
    try:
        local.start(timeout=90)
    except RuntimeError as error:
        say(f"FAILED: {error}")
        say("\n".join(local.lines()))
        local.stop()
        return 1
    say(f"  ready in {time.monotonic() - began:.1f} s")
    try:
        return run(local, stack_name, data, args)
    except Exception as error:  # the summary of a broken run: what and where
        say(f"FAILED: {type(error).__name__}: {error}")
        say("  last lines of the local stack:")
        for line in local.lines(20):
            say("    " + line)
        return 1
    finally:
        say("Stopping the local stack.")
        local.stop()


# The chaos run's faults (docs/local-stack.md): throttles are drawn per call attempt, so boto3's
# retries see them too; a crash strikes one of an invocation's first ten calls.
CHAOS = {
    "duplicate_deliveries": 3,
    "sqs_pollers": 2,
    "crash_invocations": {"function": "*", "probability": 0.05, "within_calls": 10},
    "throttle": [{"function": "*", "operation": "*", "probability": 0.01}],
}


def run(local: LocalStackProcess, stack_name: str, data: DemoData, args: argparse.Namespace) -> int:
    pipeline = Pipeline(stack_name, local)
    names = [f["FunctionName"] for f in pipeline.clients["lambda"].list_functions()["Functions"]]
    state: dict[str, Any] = {"history": [], "logs": FunctionLogs(names)}
    pipeline.subscribe_capture()
    local.control("/_emulator/faults", {"sqs_pollers": args.sqs_pollers})
    if args.chaos:
        local.control("/_emulator/faults", CHAOS | {"seed": args.chaos_seed})
        say(
            "  chaos: every S3 event, message and stream batch delivered 3x, 2 pollers per queue, "
            "a crash after a random call in 5% of invocations, 1% of calls throttled"
        )
    elif args.duplicate_deliveries > 1:
        local.control("/_emulator/faults", {"duplicate_deliveries": args.duplicate_deliveries})
        say(
            f"  fault switch: every message and stream batch delivered {args.duplicate_deliveries}x"
        )
    expected = data.expected
    bucket = pipeline.outputs["ContactsBucketName"]

    say(
        f"\nUploading {len(data.files)} files ({expected['contacts']:,} contacts, "
        f"{sum(f.bad_rows for f in data.files)} bad rows) to s3://{bucket}/{DEMO_PREFIX}"
        + ("" if args.burst else ", one after another as an exporter drops them")
    )
    started = time.monotonic()
    deadline = started + args.timeout
    first_in = True
    for demo_file in data.files:
        first_in = upload(pipeline, demo_file, wait=not args.burst, deadline=deadline) and first_in

    def contacts_in() -> int:
        return pipeline.items(keys.CONTACT, select_count=True)

    counts = {"contacts": 0}

    def first_export_in() -> bool:
        counts["contacts"] = contacts_in()
        return counts["contacts"] >= expected["contacts"]

    if first_in and args.burst:  # paced uploads already saw each file's outcome
        say("\nWaiting for the first export to be in the table")
        first_in = wait_until(
            first_export_in,
            deadline - time.monotonic(),
            lambda: f"contacts in the table: {counts['contacts']:,}/{expected['contacts']:,}",
        )
    ingest_seconds = time.monotonic() - started
    if first_in:
        say(f"\nRe-exporting {data.reexported} contacts with changed fields")
        upload(pipeline, data.reexport, wait=True, deadline=deadline)

    want_notifications = expected["surveys"] + expected["gift_cards"]
    want_files = len(data.files) + 1

    def settled() -> bool:
        # Cheap signals first (topic count, queue depths, function log activity); the table
        # scans, which load the local stack, only once those say the pipeline may be done.
        state["notifications"] = len(pipeline.collect())
        activity = (state["notifications"], state["logs"].read())
        state["history"] = [*state["history"][-2:], activity]
        if (
            not first_in
            or state["notifications"] < want_notifications
            or len(state["history"]) < 3
            or len(set(state["history"])) > 1
            or not pipeline.idle()
        ):
            return False
        state["files"] = pipeline.items(keys.PROCESSING_LOG)
        state["last_agents"] = pipeline.items(keys.LAST_AGENT, select_count=True)
        state["contacts"] = contacts_in()
        return (
            len(state["files"]) >= want_files
            and state["contacts"] >= expected["contacts"]
            and state["last_agents"] >= len(expected["last_agents"])
            and state["logs"].read() == activity[1]
        )

    say("\nWaiting for the pipeline to settle (notifications at the topic, functions quiet)")
    ok = wait_until(
        settled,
        deadline - time.monotonic(),
        lambda: (
            f"notifications {state.get('notifications', 0):,}/{want_notifications:,} | "
            f"in flight: ingest {pipeline.depth('IngestQueueUrl')}, "
            f"notifications {pipeline.depth('NotificationQueueUrl')}"
        ),
    )
    if not ok:  # where it stopped, for the summary
        state["files"] = pipeline.items(keys.PROCESSING_LOG)
        state["contacts"] = contacts_in()
    state.update(settled=ok, elapsed=time.monotonic() - started, ingest_seconds=ingest_seconds)
    if args.chaos:  # counted and shown while they are off: the pipeline has settled
        local.control("/_emulator/faults", {"crash_invocations": None, "throttle": []})
    status = summary(pipeline, data, state)
    return verdict(pipeline, data, state) if args.chaos else status


def verdict(pipeline: Pipeline, data: DemoData, state: dict[str, Any]) -> int:
    """The chaos run's table: what the faults may never cause, each expected 0."""
    expected = data.expected
    messages = pipeline.collect()
    per_id = collections.Counter(m.get("notification_id") for m in messages)
    kinds = collections.Counter(m.get("kind") for m in messages)
    injected = pipeline.local.control("/_emulator/faults")["injected"]
    failed = len(pipeline.local.failed_invocations)
    rows = {
        "contacts lost": expected["contacts"] - min(state.get("contacts", 0), expected["contacts"]),
        "duplicate notifications": sum(n - 1 for n in per_id.values()),
        "missing notifications": max(0, expected["surveys"] - kinds[keys.SURVEY])
        + max(0, expected["gift_cards"] - kinds[keys.GIFT_CARD]),
        "wrong last agents": state.get("wrong_last_agents", len(expected["last_agents"])),
        **{
            output.removesuffix("Url"): pipeline.depth(output)
            for output in (
                "IngestDeadLetterQueueUrl",
                "NotificationDeadLetterQueueUrl",
                "StreamFailureQueueUrl",
            )
        },
    }
    say("\nChaos verdict")
    say(f"  {'':<30} {'found':>7} {'expected':>9}")
    for label, found in rows.items():
        say(f"  {label:<30} {found:>7,} {0:>9}   {'ok' if found == 0 else 'FAILED'}")
    say(
        f"  faults that struck: {injected.get('crash', 0):,} crashes inside an invocation, "
        f"{injected.get('throttle', 0):,} throttled calls; {failed:,} failed invocations, "
        "each retried by its event source"
    )
    bad = [label for label, found in rows.items() if found]
    if bad or not state["settled"]:
        say("\nCHAOS FAILED: " + ", ".join(bad or ["the pipeline did not settle"]))
        return 1
    say("\nNo contact lost, nothing sent twice or missed, every last agent right.")
    return 0


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
    check_last_agents(pipeline, data, report, state)
    state["logs"].read()
    show_duplicates(state["logs"])
    show_failed_invocations(pipeline)
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


def check_last_agents(
    pipeline: Pipeline, data: DemoData, report: Report, state: dict[str, Any]
) -> None:
    """Every caller's LAST_AGENT item against the newest contact with an agent."""
    expected = data.expected["last_agents"]

    def wrong() -> dict[str, tuple[dict | None, dict]]:
        stored = {
            item["pk"]["S"].removeprefix("CALLER#"): {
                "agent_id": item["agent_id"]["S"],
                "contact_id": item["contact_id"]["S"],
                "ended_at": item["ended_at"]["S"],
            }
            for item in pipeline.items(keys.LAST_AGENT)
        }
        return {c: (stored.get(c), want) for c, want in expected.items() if stored.get(c) != want}

    mismatches = wrong()
    began = time.monotonic()
    while mismatches and time.monotonic() - began < 15:  # still converging?
        time.sleep(1)
        mismatches = wrong()
    late = time.monotonic() - began
    detail = "callers with an agent"
    if late >= 1:
        detail += f" (converged {late:.0f} s after the settle signal)" if not mismatches else ""
    state["wrong_last_agents"] = len(mismatches)
    report.check("last agents right", len(expected) - len(mismatches), len(expected), detail)
    for caller, (stored, want) in list(mismatches.items())[:3]:
        say(
            f"      {mask(caller)}: stored {stored and stored['contact_id']} "
            f"({stored and stored['ended_at']}), expected {want['contact_id']} ({want['ended_at']})"
        )


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


def show_duplicates(logs: FunctionLogs) -> None:
    """Duplicates suppressed (idempotency hits) and stale last-agent writes, per function."""
    hits = logs.suppressed()
    detail = ", ".join(f"{name.removesuffix('Function')} {n}" for name, n in sorted(hits.items()))
    say(f"  {'duplicates suppressed':<26} {sum(hits.values()):>8,}   {detail or 'none needed'}")
    say(
        f"  {'stale last-agent writes':<26} {logs.stale():>8,}   "
        "older contacts arriving later, refused"
    )


def show_failed_invocations(pipeline: Pipeline) -> None:
    """Invocations the event sources saw fail (and retried), by function; timeouts among them."""
    timeouts = {
        f["FunctionName"]: f["Timeout"] * 1000
        for f in pipeline.clients["lambda"].list_functions()["Functions"]
    }
    failed: collections.Counter[str] = collections.Counter()
    timed_out = 0
    for name, _outcome, ms in list(pipeline.local.failed_invocations):
        logical = re.search(r"(\w+Function)", name)
        failed[logical[1] if logical else name] += 1
        timed_out += ms >= timeouts.get(name, 10**9) - 50
    detail = ", ".join(f"{name.removesuffix('Function')} {n}" for name, n in sorted(failed.items()))
    say(
        f"  {'failed invocations':<26} {sum(failed.values()):>8,}   "
        f"{detail or 'none'}{f'; {timed_out} timed out' if timed_out else ''}"
        " (retried by their event source)"
    )


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


class FunctionLogs:
    """What this stack's functions logged while the demo ran.

    The local stack appends every function's output to .emulator/logs/<LogicalId>.log, shared by
    every stack started from this checkout (tests, benchmarks, other demos). The demo reads the
    files incrementally from where they were at its start and keeps only the Powertools log lines
    of its own functions (by physical function name, unique per stack).
    """

    # Log messages (Powertools Logger, lower-cased substrings) that mean "done before: skipped".
    SUPPRESSED = ("already", "duplicate")
    STALE = "newer contact is stored"

    def __init__(self, function_names: Iterable[str], log_dir: Path = ROOT / ".emulator" / "logs"):
        self.names = set(function_names)
        self.log_dir = log_dir
        self.offsets = {path: path.stat().st_size for path in log_dir.glob("*.log")}
        self.partial: dict[Path, bytes] = {}
        self.lines = 0
        self.messages: collections.Counter[tuple[str, str]] = collections.Counter()

    def read(self) -> int:
        """Take in what was appended since the last call; the number of own lines so far."""
        for path in sorted(self.log_dir.glob("*.log")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                chunk = self.partial.pop(path, b"") + handle.read()
                self.offsets[path] = handle.tell()
            *complete, rest = chunk.split(b"\n")
            if rest:
                self.partial[path] = rest
            for raw in complete:
                self._line(path.stem, raw)
        return self.lines

    def _line(self, logical_id: str, raw: bytes) -> None:
        if not raw.startswith(b"{") or b'"function_name"' not in raw:
            return
        try:
            record = json.loads(raw)
        except ValueError:
            return
        if record.get("function_name") in self.names:
            self.lines += 1
            self.messages[(logical_id, str(record.get("message", "")).lower())] += 1

    def suppressed(self) -> collections.Counter[str]:
        counts: collections.Counter[str] = collections.Counter()
        for (logical_id, message), n in self.messages.items():
            if any(word in message for word in self.SUPPRESSED):
                counts[logical_id] += n
        return counts

    def stale(self) -> int:
        return sum(n for (_, message), n in self.messages.items() if self.STALE in message)
