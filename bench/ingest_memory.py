"""P4: peak RSS and rate of IngestFunction ingesting ~200 MB of Amazon Connect's contact records in
one object, as template.yaml's Firehose delivery stream writes it (records newline-delimited,
GZIP, under contact-records/ with a `.gz` key): 200 MB of records before compression.

The object goes to the local stack as it runs (`python -m emulator up`, its moto patches included:
plain `moto.server` deep-copies the whole table for every action of a transaction, quadratic in
the file), so the in-memory S3 object and the table live in the stack's process, not in the
handler's memory. Every event source mapping is disabled first: the stack's own IngestFunction
does not take the object, and the consumers do not compete with the measured ingest for the
cores. The records are generated (bench.inprocess.contact_records: ~3.5 KB each, every field
present) and gzipped to a temporary file as they come (never whole in memory), then uploaded with
upload_file. A fresh interpreter with the deployed function's environment (PYTHONPATH =
functions/ingest and the layer, AWS_ENDPOINT_URL = the stack) imports the handler, invokes it
once with the SQS event as AWS sends it and reports its peak RSS: the figure. That is VmHWM
(/proc/self/status), not getrusage's ru_maxrss: on Linux, exec carries the high-water mark of the
replaced address space into ru_maxrss, so a child forked from the bench (hundreds of MB after
P2's in-process moto) would report the bench's size. RSS after the import alone is reported
beside it, so the growth due to the object is visible. The second figure is the rate: records
stored per second of the handler's one invocation (budget: issue 41's 2,000 records/s).

BENCH_P4_FORMAT=flat (an experiment; `make bench` sets none) measures the flat export instead, as
P4 did before contact records: a gzipped .jsonl of rows with `updated_at` and ~1,800 bytes of
fields the ingest ignores (~2 KB a row), the same 200 MB before compression.
"""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from boto3.s3.transfer import TransferConfig

from bench.common import PYTHON, ROOT, Figure, function_env, layer_path
from bench.inprocess import (
    contact_records,
    firehose_key,
    firehose_lines,
    generate_contacts,
    import_shared,
    jsonl_lines,
    s3_notification,
    sqs_event,
)
from emulator.process import LocalStackProcess, free_port
from harness.stack import StackClient

FILE_BYTES = int(os.environ.get("BENCH_P4_FILE_MB", "200")) * 1_000_000  # before GZIP
BUDGET_MB = 100
RATE_BUDGET = 2_000  # records/s (issue 41)
CHILD_TIMEOUT_SECONDS = int(os.environ.get("BENCH_P4_TIMEOUT", "480"))
PORTS = range(4910, 4930)
FLAT = os.environ.get("BENCH_P4_FORMAT", "records") == "flat"
FLAT_EXTRA_BYTES = 1800  # per flat row: fields the ingest ignores, as P4's rows had before
KEY = "incoming/2026-11-29/bench-200mb.jsonl.gz" if FLAT else firehose_key(4)
WHAT = "flat export rows" if FLAT else "contact records"
PEAK = f"ingest peak RSS (200 MB of {WHAT})"
RATE = f"ingest rate (200 MB of {WHAT})"

CHILD = """
import json, resource, sys, time
import app

def high_water_kb():
    # This process's own peak RSS. ru_maxrss is not: on Linux, exec keeps the high-water mark of
    # the address space it replaces, so it starts at the forking parent's RSS (the bench's).
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

class Context:
    function_name = "IngestFunction"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:IngestFunction"
    aws_request_id = "bench-p4"
    log_group_name = "/aws/lambda/IngestFunction"
    log_stream_name = "bench"
    def get_remaining_time_in_millis(self):
        return 900_000

after_import = high_water_kb()
event = json.loads(sys.stdin.read())
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu_at_start = usage.ru_utime + usage.ru_stime
started = time.perf_counter()
response = app.lambda_handler(event, Context())
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
sys.stderr.write("RESULT " + json.dumps({
    "after_import_kb": after_import, "peak_kb": high_water_kb(), "seconds": seconds,
    "ru_maxrss_kb": usage.ru_maxrss,
    "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu_at_start, "response": response,
}) + "\\n")
"""


@contextmanager
def local_stack(ports: range = PORTS):
    """The local stack on a free port of the bench range, every event source mapping disabled;
    yields (its client, the stack process's pid)."""
    local = LocalStackProcess(free_port(ports), tail_lines=40)
    try:
        local.start(timeout=120, ports=ports)
    except RuntimeError as error:
        raise RuntimeError(f"{error}:\n{local.tail()}") from None
    try:
        stack = StackClient.local_stack(local)
        lam = stack.client("lambda")
        for _, mapping in stack.mappings():
            lam.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
        assert local.process is not None
        yield stack, local.process.pid
    finally:
        local.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def generate_file(path: Path, size: int) -> tuple[int, int]:
    """Contact records, gzipped as Firehose writes them, until `size` bytes of records went in;
    returns (records, bytes before compression)."""
    records = written = 0
    # as many records as `size` takes (~57,000 for 200 MB), from 20,000 callers
    lines = (
        jsonl_lines(generate_contacts(10**9, seed=11, extra_bytes=FLAT_EXTRA_BYTES))
        if FLAT
        else firehose_lines(contact_records(10**9, seed=11))
    )
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for line in lines:
            out.write(line)
            written += len(line)
            records += 1
            if written >= size:
                break
    return records, written


def run() -> list[Figure]:
    import_shared()
    with (
        tempfile.TemporaryDirectory(prefix="bench-p4-") as tmp,
        local_stack() as (stack, server_pid),
    ):
        path = Path(tmp) / "contact-records.gz"
        started = time.perf_counter()
        records, size = generate_file(path, FILE_BYTES)
        gzipped = path.stat().st_size
        generated = time.perf_counter() - started
        stack.s3.upload_file(str(path), stack.bucket, KEY, Config=TransferConfig(max_concurrency=4))
        head = stack.s3.head_object(Bucket=stack.bucket, Key=KEY)
        uploaded = time.perf_counter() - started - generated
        notification = s3_notification(
            stack.bucket, KEY, gzipped, head["ETag"], head.get("VersionId")
        )
        event = sqs_event([json.dumps(notification)], "IngestQueue")

        assert stack.local is not None
        function = stack.client("lambda").get_function_configuration(
            FunctionName=stack.functions()["IngestFunction"]
        )
        env = function_env("IngestFunction", stack.local.endpoint)
        env.update({k: str(v) for k, v in function["Environment"]["Variables"].items()})
        env["PYTHONPATH"] = f"{ROOT / 'functions' / 'ingest'}:{layer_path()}"
        env.pop("AWS_SESSION_TOKEN", None)
        server_cpu = cpu_seconds(server_pid)
        try:
            child = subprocess.run(
                [PYTHON, "-c", CHILD],
                check=False,
                input=json.dumps(event),
                env=env,
                cwd=ROOT / "functions" / "ingest",
                capture_output=True,
                text=True,
                timeout=CHILD_TIMEOUT_SECONDS,
            )
        except subprocess.TimeoutExpired:
            return [
                Figure(
                    "P4",
                    PEAK,
                    0,
                    "MB",
                    f"<= {BUDGET_MB}",
                    None,
                    f"NOT MEASURED: the ingest of {size / 1e6:.0f} MB ({records} records) "
                    f"against the local stack did not finish in {CHILD_TIMEOUT_SECONDS} s",
                )
            ]
        result_lines = [line for line in child.stderr.splitlines() if line.startswith("RESULT ")]
        if child.returncode or not result_lines:
            tail = child.stderr.strip().splitlines()[-3:]
            return [
                Figure(
                    "P4",
                    PEAK,
                    0,
                    "MB",
                    f"<= {BUDGET_MB}",
                    False,
                    f"handler process failed (exit {child.returncode}): {' | '.join(tail)}",
                )
            ]
        result = json.loads(result_lines[-1][len("RESULT ") :])
        server_cpu = cpu_seconds(server_pid) - server_cpu
        log = stack.file_log(f"{stack.bucket}/{KEY}#{head.get('VersionId')}") or {}

    peak_mb = result["peak_kb"] / 1024
    import_mb = result["after_import_kb"] / 1024
    seconds = result["seconds"]
    rows_ok = int(log.get("rows_ok", {}).get("N", "0"))
    outcome = log.get("outcome", {}).get("S", "no processing log")
    failures = result["response"].get("batchItemFailures")
    ok = outcome == "PROCESSED" and rows_ok == records and not failures
    check = "" if ok else f"; INVALID RUN: outcome {outcome}, {rows_ok} records ok, {failures}"
    rate = records / seconds
    return [
        Figure(
            "P4",
            PEAK,
            round(peak_mb, 1),
            "MB",
            f"<= {BUDGET_MB}",
            peak_mb <= BUDGET_MB and ok,
            (
                f"{'a .jsonl.gz' if FLAT else 'one Firehose'} object: {size / 1e6:.0f} MB of "
                f"{WHAT} ({gzipped / 1e6:.1f} MB gzipped), {records} {WHAT} "
                f"(~{size / records:.0f} B each); RSS after "
                f"import {import_mb:.1f} MB, +{peak_mb - import_mb:.1f} MB while ingesting, i.e. "
                f"{(peak_mb - import_mb) / (size / 2**20) * 100:.1f}% of the records' size (VmHWM "
                f"of the handler process; its ru_maxrss {result['ru_maxrss_kb'] / 1024:.0f} MB "
                f"includes the forking bench's RSS); the local stack in its own process{check}"
            ),
        ),
        Figure(
            "P4",
            RATE,
            round(rate),
            "rows/s" if FLAT else "records/s",
            f">= {RATE_BUDGET}",
            rate >= RATE_BUDGET and ok,
            (
                f"{records} records in {seconds:.1f} s (the handler's one invocation), "
                f"{size / 1e6 / seconds:.1f} MB/s of records against the local stack (its "
                f"mappings disabled); CPU: handler {result['cpu_seconds']:.0f} s, local stack "
                f"{server_cpu:.0f} s (the larger bounds the rate); generate and gzip "
                f"{generated:.0f} s, upload {uploaded:.0f} s{check}"
            ),
        ),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure, file=sys.stdout)
