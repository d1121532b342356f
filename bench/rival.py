"""P9: per AWS call, the local stack's server CPU and latency against ministack's, side by side
(issue 23, item 3).

Both servers start empty, as users get them: ours as `python -m emulator up --no-deploy` on a
free bench port, ministack (RIVAL_VERSION, PyPI) as `python -m ministack` from an environment of
its own (RIVAL_ENV, created here with uv when missing, so our boto3 / moto pins stay as they are),
bound to loopback. One boto3 client per server and service (endpoint_url, dummy credentials)
creates the same resources on each (a pk/sk table on demand, queues, a topic with a raw-delivery
SQS subscription so Publish delivers) and then runs each operation CALLS times after WARMUP
uncounted calls, the two servers interleaved call by call so machine noise hits both alike.

Per operation and server: the client's wall latency of each call (p50, p95) and the server
process's CPU (utime + stime of /proc/<pid>/stat, all its threads) over the measured calls,
less its idle CPU over the same time (measured on the idle servers first), divided by the calls.
Publish waits for its deliveries to reach the subscribed queue before the CPU is read (a server
may deliver after answering). The figure is our CPU per call over ministack's, in one run.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.common import ROOT, Figure, median, percentile
from emulator.process import REGION, LocalStackProcess, free_port
from harness.polling import eventually

CALLS = int(os.environ.get("BENCH_P9_CALLS", "300"))
WARMUP = 20
IDLE_SECONDS = 5
BATCH = 10  # entries per SendMessageBatch / PublishBatch, messages per ReceiveMessage
QUERY_ITEMS = 10
PORTS = range(5000, 5100)
READY_WITHIN_SECONDS = 90
RIVAL = "ministack"
RIVAL_VERSION = "1.5.33"
RIVAL_REQUIREMENTS = (f"{RIVAL}=={RIVAL_VERSION}",)
RIVAL_ENV = ROOT / ".tools" / "ministack"
OUT = ROOT / "bench" / "out"
BUDGET = 1.0
BUDGET_TEXT = f"<= {BUDGET}, CPU and p50 latency"
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1})  # a failed call fails, never retried
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the pure parts: /proc samples, the arithmetic, the figures ---------------------------------


@dataclass(frozen=True)
class CpuSample:
    seconds: float  # the process's CPU so far (user + system, all threads)
    at: float  # time.monotonic() when read


def cpu_seconds(stat: str, ticks_per_second: int = CLOCK_TICKS) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (the command, field 2, may hold
    spaces and parentheses: the fields are counted after its last ')')."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_second


def rss_mib(status: str) -> float:
    """VmRSS of a /proc/<pid>/status text, in MiB."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError("no VmRSS line (the process has exited?)")


def idle_rate(before: CpuSample, after: CpuSample) -> float:
    """CPU seconds per wall second of a server doing nothing asked of it."""
    return (after.seconds - before.seconds) / (after.at - before.at)


def cpu_per_call_ms(before: CpuSample, after: CpuSample, calls: int, idle: float) -> float:
    """The server's CPU for ``calls`` calls between two samples, its idle CPU over the same
    time taken off, in ms per call (never below 0: ticks are 10 ms)."""
    busy = (after.seconds - before.seconds) - idle * (after.at - before.at)
    return max(busy, 0.0) / calls * 1000


@dataclass(frozen=True)
class Measured:
    """One server's measurement of one operation."""

    cpu_ms: float  # server CPU per call
    latencies_ms: tuple[float, ...]  # client wall time of each measured call
    note: str = ""  # what the calls did, checked (delivered / received counts)

    @property
    def p50(self) -> float:
        return median(list(self.latencies_ms))

    @property
    def p95(self) -> float:
        return percentile(list(self.latencies_ms), 0.95)

    def describe(self) -> str:
        text = f"{self.cpu_ms:.2f} ms CPU/call, latency p50 {self.p50:.2f} / p95 {self.p95:.2f} ms"
        return f"{text} ({self.note})" if self.note else text


def call_figure(operation: str, ours: Measured | str, rival: Measured | str) -> Figure:
    """The P9 figure of one operation: our CPU per call over ministack's, holding when that and
    the ratio of median latencies are both within the budget (issue 23: "CPU and latency"). A
    side given as a string was not measured (why): the figure then reports, holds None, value 0."""
    name = f"per call vs {RIVAL}: {operation}"
    sides = (
        f"ours: {ours.describe() if isinstance(ours, Measured) else 'NOT MEASURED: ' + ours}; "
        f"{RIVAL}: {rival.describe() if isinstance(rival, Measured) else 'NOT MEASURED: ' + rival}"
    )
    calls = f"{CALLS} calls each after {WARMUP} warm-up, interleaved; idle CPU subtracted"
    if not (isinstance(ours, Measured) and isinstance(rival, Measured)):
        return Figure("P9", name, 0, f"x {RIVAL}", BUDGET_TEXT, None, f"{sides}; {calls}")
    if rival.cpu_ms <= 0:
        return Figure(
            "P9",
            name,
            0,
            f"x {RIVAL}",
            BUDGET_TEXT,
            None,
            f"NO RATIO: {RIVAL}'s CPU per call was below the clock's resolution; {sides}; {calls}",
        )
    ratio = ours.cpu_ms / rival.cpu_ms
    latency_ratio = ours.p50 / rival.p50
    latency = f"latency p50 {latency_ratio:.2f}x" + (
        "" if latency_ratio <= BUDGET else " (MISSES: the budget is for CPU and latency)"
    )
    return Figure(
        "P9",
        name,
        round(ratio, 2),
        f"x {RIVAL}",
        BUDGET_TEXT,
        ratio <= BUDGET and latency_ratio <= BUDGET,
        f"{sides}; {latency}; {calls}",
    )


def memory_figure(ours: tuple[float, float] | str, rival: tuple[float, float] | str) -> Figure:
    """Both servers' RSS after the workload (MiB) and idle CPU (share of a core), as
    (rss_mib, idle_rate) or why not measured; the value is the RSS ratio, no budget."""

    def side(measured: tuple[float, float] | str) -> str:
        if isinstance(measured, str):
            return f"NOT MEASURED: {measured}"
        rss, idle = measured
        return f"{rss:.0f} MiB (idle CPU before the workload {idle * 100:.1f}% of a core)"

    detail = f"RSS after the workload: ours {side(ours)}; {RIVAL} {side(rival)}"
    if isinstance(ours, str) or isinstance(rival, str):
        return Figure("P9", f"server memory vs {RIVAL}", 0, f"x {RIVAL}", "-", None, detail)
    return Figure(
        "P9",
        f"server memory vs {RIVAL}",
        round(ours[0] / rival[0], 2),
        f"x {RIVAL}",
        "-",
        None,
        detail,
    )


def rival_installed(env: Path, requirements: Sequence[str] = RIVAL_REQUIREMENTS) -> bool:
    """Whether ``env`` has every one of ``requirements`` (`name==version`) installed."""

    def installed(requirement: str) -> bool:
        name, _, version = requirement.partition("==")
        dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
        return any(env.glob(f"lib/python*/site-packages/{dist_info}"))

    return (env / "bin" / "python").exists() and all(map(installed, requirements))


# --- the servers ---------------------------------------------------------------------------------


def sample(pid: int) -> CpuSample:
    return CpuSample(cpu_seconds(Path(f"/proc/{pid}/stat").read_text()), time.monotonic())


def rival_python(env: Path, requirements: Sequence[str] = RIVAL_REQUIREMENTS) -> Path:
    """ministack's interpreter in ``env``, the environment created first when it is missing
    (on the Python ours runs on), with ``requirements`` installed. RuntimeError saying why when
    it cannot be."""
    python = env / "bin" / "python"
    if rival_installed(env, requirements):
        return python
    uv = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
    variables = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    steps = [[uv, "pip", "install", "--python", str(python), *requirements]]
    if not python.exists():  # on this interpreter's own Python: uv may not find (or fetch) one
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        base = Path(sys.base_prefix) / "bin" / f"python{version}"
        steps.insert(0, [uv, "venv", "--python", str(base), str(env)])
    for argv in steps:
        try:
            subprocess.run(
                argv, env=variables, capture_output=True, text=True, check=True, timeout=300
            )
        except (OSError, subprocess.SubprocessError) as error:
            output = getattr(error, "stderr", None) or str(error)
            tail = " | ".join(output.strip().splitlines()[-2:])
            raise RuntimeError(f"`{' '.join(argv[:3])} ...` failed: {tail}") from error
    return python


class RivalProcess:
    """ministack in the foreground on a free port, bound to loopback, its output in a log."""

    def __init__(self, python: Path, port: int, log_path: Path):
        self.endpoint = f"http://127.0.0.1:{port}"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
        env.update(GATEWAY_PORT=str(port), BIND_HOST="127.0.0.1", PYTHONUNBUFFERED="1")
        with log_path.open("w") as log:
            self.process = subprocess.Popen(
                [str(python), "-m", RIVAL],
                cwd=OUT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, timeout: float) -> None:
        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"{RIVAL} exited with {self.process.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/_ministack/health", timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                return False

        try:
            eventually(answers, timeout=timeout, interval=0.2)
        except AssertionError:
            raise RuntimeError(
                f"{RIVAL} did not answer its health check within {timeout:.0f} s"
            ) from None

    def tail(self) -> str:
        return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-2:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Server:
    """One server under measurement: its process, a client per service, the same resources."""

    def __init__(self, name: str, pid: int, endpoint: str):
        self.name = name
        self.pid = pid
        session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )

        def client(service: str) -> Any:
            return session.client(service, endpoint_url=endpoint, config=CLIENT_CONFIG)

        self.dynamodb, self.sqs, self.sns = client("dynamodb"), client("sqs"), client("sns")
        self.table = "rival-bench"
        self.published = 0  # messages the topic was given, so far

    def create_resources(self) -> None:
        self.dynamodb.create_table(
            TableName=self.table,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        eventually(
            lambda: (
                self.dynamodb.describe_table(TableName=self.table)["Table"]["TableStatus"]
                == "ACTIVE"
            ),
            timeout=30,
            interval=0.1,
        )
        for index in range(QUERY_ITEMS):
            self.dynamodb.put_item(
                TableName=self.table,
                Item={"pk": {"S": "query"}, "sk": {"S": f"{index:03d}"}, "n": {"N": str(index)}},
            )
        self.queue = self.sqs.create_queue(QueueName="rival-work")["QueueUrl"]
        self.receive_queue = self.sqs.create_queue(QueueName="rival-receive")["QueueUrl"]
        self.delivered_queue = self.sqs.create_queue(QueueName="rival-delivered")["QueueUrl"]
        self.topic = self.sns.create_topic(Name="rival-topic")["TopicArn"]
        delivered_arn = self.sqs.get_queue_attributes(
            QueueUrl=self.delivered_queue, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.sns.subscribe(
            TopicArn=self.topic,
            Protocol="sqs",
            Endpoint=delivered_arn,
            Attributes={"RawMessageDelivery": "true"},
        )

    def visible(self, queue_url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


# --- the operations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    name: str
    call: Callable[[Server, int], Any]  # the i-th call; returns what `check` counts
    prepare: Callable[[Server, int], None] | None = None  # before all `calls` calls, uncounted
    settle: Callable[[Server, list[Any]], str] | None = None  # after: waits, says what it saw


def put_conditional(server: Server, i: int) -> Any:
    return server.dynamodb.put_item(
        TableName=server.table,
        Item={"pk": {"S": f"put-{i}"}, "sk": {"S": "v"}, "n": {"N": str(i)}},
        ConditionExpression="attribute_not_exists(pk)",
    )


def update_counter(server: Server, i: int) -> Any:
    return server.dynamodb.update_item(
        TableName=server.table,
        Key={"pk": {"S": "counter"}, "sk": {"S": "c"}},
        UpdateExpression="SET last_call = :i ADD hits :one",
        ExpressionAttributeValues={":i": {"N": str(i)}, ":one": {"N": "1"}},
    )


def transact_two_puts(server: Server, i: int) -> Any:
    return server.dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": server.table, "Item": {"pk": {"S": f"tx-{i}"}, "sk": {"S": s}}}}
            for s in ("a", "b")
        ]
    )


def query_partition(server: Server, _: int) -> int:
    response = server.dynamodb.query(
        TableName=server.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "query"}},
    )
    return len(response["Items"])


def send(server: Server, i: int) -> Any:
    return server.sqs.send_message(QueueUrl=server.queue, MessageBody=f'{{"call": {i}}}')


def send_batch(server: Server, i: int, queue_url: str | None = None) -> Any:
    return server.sqs.send_message_batch(
        QueueUrl=queue_url or server.queue,
        Entries=[
            {"Id": str(j), "MessageBody": f'{{"call": {i}, "entry": {j}}}'} for j in range(BATCH)
        ],
    )


def fill_receive_queue(server: Server, calls: int) -> None:
    """BATCH messages per coming ReceiveMessage, all visible when it starts."""
    for i in range(calls):
        send_batch(server, i, server.receive_queue)


def receive(server: Server, _: int) -> int:
    # Received messages stay in flight for the whole run: every call finds BATCH visible ones.
    response = server.sqs.receive_message(
        QueueUrl=server.receive_queue, MaxNumberOfMessages=BATCH, VisibilityTimeout=900
    )
    return len(response.get("Messages", []))


def publish(server: Server, i: int) -> Any:
    server.published += 1
    return server.sns.publish(TopicArn=server.topic, Message=f'{{"call": {i}}}')


def publish_batch(server: Server, i: int) -> Any:
    server.published += BATCH
    return server.sns.publish_batch(
        TopicArn=server.topic,
        PublishBatchRequestEntries=[
            {"Id": str(j), "Message": f'{{"call": {i}, "entry": {j}}}'} for j in range(BATCH)
        ],
    )


def counted(expected_each: int) -> Callable[[Server, list[Any]], str]:
    def check(_: Server, results: list[Any]) -> str:
        return f"{sum(results)} of {expected_each * len(results)} returned"

    return check


def delivered(server: Server, _: list[Any]) -> str:
    """Waits (bounded) until every published message is in the subscribed queue."""
    with contextlib.suppress(AssertionError):  # the note says how many arrived
        eventually(lambda: server.visible(server.delivered_queue) >= server.published, 30, 0.05)
    return f"{server.visible(server.delivered_queue)} of {server.published} delivered to the queue"


OPERATIONS = (
    Operation("PutItem (conditional)", put_conditional),
    Operation("UpdateItem (SET, ADD)", update_counter),
    Operation("TransactWriteItems (2 Puts)", transact_two_puts),
    Operation(f"Query ({QUERY_ITEMS} items)", query_partition, settle=counted(QUERY_ITEMS)),
    Operation("SendMessage", send),
    Operation(f"SendMessageBatch ({BATCH})", send_batch),
    Operation(f"ReceiveMessage ({BATCH})", receive, fill_receive_queue, counted(BATCH)),
    Operation("Publish", publish, settle=delivered),
    Operation(f"PublishBatch ({BATCH})", publish_batch, settle=delivered),
)


# --- the run -------------------------------------------------------------------------------------


def measure(operation: Operation, servers: list[Server], idle: dict[str, float]) -> dict:
    """``operation`` on every server, interleaved call by call: server name -> Measured, or
    why not (the first error of its calls; the other servers go on)."""
    failed: dict[str, str] = {}
    latencies: dict[str, list[float]] = {server.name: [] for server in servers}
    results: dict[str, list[Any]] = {server.name: [] for server in servers}

    def each(server: Server, do: Callable[..., Any], *args: Any) -> Any:
        if server.name in failed:
            return None
        try:
            return do(server, *args)
        except Exception as error:  # the figure says which call failed how
            failed[server.name] = f"{type(error).__name__}: {error}"[:300]
            return None

    for server in servers:
        if operation.prepare:
            each(server, operation.prepare, WARMUP + CALLS)
    for i in range(WARMUP):
        for server in servers:
            each(server, operation.call, i)
    before = {server.name: sample(server.pid) for server in servers}
    for i in range(WARMUP, WARMUP + CALLS):
        for server in servers:
            started = time.perf_counter()
            result = each(server, operation.call, i)
            latencies[server.name].append((time.perf_counter() - started) * 1000)
            results[server.name].append(result)
    notes = {
        server.name: each(server, operation.settle, results[server.name])
        if operation.settle
        else ""
        for server in servers
    }
    after = {server.name: sample(server.pid) for server in servers}
    return {
        server.name: failed.get(server.name)
        or Measured(
            cpu_per_call_ms(before[server.name], after[server.name], CALLS, idle[server.name]),
            tuple(latencies[server.name]),
            notes[server.name] or "",
        )
        for server in servers
    }


def run() -> list[Figure]:
    if CALLS < 1:
        raise ValueError(f"BENCH_P9_CALLS must be at least 1, not {CALLS}")
    OUT.mkdir(parents=True, exist_ok=True)
    ours = LocalStackProcess(
        free_port(PORTS), up_args=["--no-deploy"], log_path=OUT / "p9-local-stack.log"
    )
    rival: RivalProcess | None = None
    servers: list[Server] = []
    why_not = {"ours": "", RIVAL: ""}
    try:
        try:
            ours.start(READY_WITHIN_SECONDS, ports=PORTS)
            servers.append(Server("ours", ours.process.pid, ours.endpoint))
        except RuntimeError as error:
            why_not["ours"] = (
                f"{error} (python -m emulator up --no-deploy): {' | '.join(ours.lines(2))}"
            )
        try:
            rival = RivalProcess(
                rival_python(RIVAL_ENV), free_port(PORTS), OUT / "p9-ministack.log"
            )
            rival.wait_ready(READY_WITHIN_SECONDS)
            servers.append(Server(RIVAL, rival.process.pid, rival.endpoint))
        except (RuntimeError, OSError) as error:
            why_not[RIVAL] = f"{RIVAL} {RIVAL_VERSION} unavailable: {error}"
        return _measure(servers, why_not)
    finally:
        if rival is not None:
            rival.stop()
        ours.stop(grace=20)


def idle_rates(servers: list[Server]) -> dict[str, float]:
    """Each server's CPU per wall second over IDLE_SECONDS with nothing asked of it."""
    before = {server.name: sample(server.pid) for server in servers}
    time.sleep(IDLE_SECONDS)
    return {server.name: idle_rate(before[server.name], sample(server.pid)) for server in servers}


def _measure(servers: list[Server], why_not: dict[str, str]) -> list[Figure]:
    for server in list(servers):
        try:
            server.create_resources()
        except Exception as error:  # e.g. a service the server lacks
            why_not[server.name] = f"creating the resources failed: {type(error).__name__}: {error}"
            servers.remove(server)
    idle = idle_rates(servers) if servers else {}
    figures = []
    for operation in OPERATIONS:
        measured = measure(operation, servers, idle)
        figures.append(
            call_figure(
                operation.name,
                measured.get("ours", why_not["ours"]),
                measured.get(RIVAL, why_not[RIVAL]),
            )
        )
    memory = {
        server.name: (rss_mib(Path(f"/proc/{server.pid}/status").read_text()), idle[server.name])
        for server in servers
    }
    figures.append(
        memory_figure(memory.get("ours", why_not["ours"]), memory.get(RIVAL, why_not[RIVAL]))
    )
    return figures


if __name__ == "__main__":
    for figure in run():
        print(figure)
