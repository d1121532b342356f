"""P1: cold init of each handler module against boto3 creating the same clients, side by side;
and what a cold start costs the local stack: a worker forked from its function's fork server
against one started as a process of its own.

Each sample is a fresh interpreter (a fresh worker). Handler and baseline runs alternate so that
machine noise hits both alike; the ratio of medians is the figure.
"""

import json
import os
import subprocess
from pathlib import Path
from unittest import mock

from bench.common import FUNCTIONS, PYTHON, ROOT, Figure, function_env, layer_path, median
from emulator.lambda_.workers import FunctionSpec, Runtime, _Pool

RUNS = 15
BUDGET = 1.10  # issue 23: every function within 1.10x of boto3 creating the same clients

# Times the import inside the interpreter (interpreter start-up is the same for both and
# would only dilute the ratio). Records which AWS clients the import creates.
CHILD = """
import json, sys, time
start = time.perf_counter()
import botocore.session
services = []
create_client = botocore.session.Session.create_client
def recording_create_client(self, service_name, *args, **kwargs):
    services.append(service_name)
    return create_client(self, service_name, *args, **kwargs)
botocore.session.Session.create_client = recording_create_client
if sys.argv[1] == "handler":
    import app
else:
    import boto3
    for service in json.loads(sys.argv[2]):
        boto3.client(service)
print(json.dumps({"seconds": time.perf_counter() - start, "services": services}))
"""


def _sample(logical_id: str, mode: str, services: list[str]) -> dict:
    function_dir = ROOT / "functions" / FUNCTIONS[logical_id]
    env = function_env(logical_id)
    env["PYTHONPATH"] = f"{function_dir}:{layer_path()}"
    completed = subprocess.run(
        [PYTHON, "-c", CHILD, mode, json.dumps(services)],
        env=env,
        cwd=function_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run() -> list[Figure]:
    figures = []
    for logical_id in FUNCTIONS:
        # First run warms the bytecode cache and tells which clients the handler builds.
        services = _sample(logical_id, "handler", [])["services"]
        handler_times, baseline_times = [], []
        for _ in range(RUNS):
            handler_times.append(_sample(logical_id, "handler", services)["seconds"])
            baseline_times.append(_sample(logical_id, "baseline", services)["seconds"])
        ratio = median(handler_times) / median(baseline_times)
        figures.append(
            Figure(
                id="P1",
                name=f"cold init {logical_id}",
                value=round(ratio, 3),
                unit="x boto3+clients",
                budget=f"<= {BUDGET}",
                holds=ratio <= BUDGET,
                detail=(
                    f"handler {median(handler_times) * 1000:.0f} ms vs baseline "
                    f"{median(baseline_times) * 1000:.0f} ms (clients: {', '.join(services)}; "
                    f"median of {RUNS})"
                ),
            )
        )
    figures.append(cold_start_cpu("LastAgentFunction"))
    return figures


def cold_start_cpu(logical_id: str) -> Figure:
    """CPU of a worker's cold start and first invocation (an empty batch), forked against
    started on its own, alternating; each worker is stopped after its invocation."""
    function_dir = ROOT / "functions" / FUNCTIONS[logical_id]
    env = function_env(logical_id)
    spec = FunctionSpec(
        logical_id=logical_id,
        function_name=logical_id,
        handler="app.lambda_handler",
        code_dir=function_dir,
        layer_dirs=[layer_path()],
        environment={k: v for k, v in env.items() if k.startswith(("POWERTOOLS_", "CONTACTS_"))},
        timeout=30,
    )
    samples: dict[str, list[float]] = {"forked": [], "fresh": []}
    with Runtime([spec], endpoint_url="http://127.0.0.1:9", log_dir=None) as runtime:
        for _ in range(RUNS):
            for kind, cpu in samples.items():
                with mock.patch.object(
                    _Pool, "forkserver", _Pool.forkserver if kind == "forked" else lambda _: None
                ):
                    runtime.invoke(logical_id, {"Records": []})
                (worker,) = runtime._workers
                cpu.append(_cpu_seconds(worker.proc.pid))
                worker.stop()
    forked, fresh = median(samples["forked"]), median(samples["fresh"])
    return Figure(
        id="P1",
        name=f"local cold start {logical_id}",
        value=round(forked / fresh, 3),
        unit="x a fresh process",
        budget="-",
        holds=None,
        detail=(
            f"CPU of a worker's init and first invocation: forked from the fork server "
            f"{forked * 1000:.0f} ms, a process of its own {fresh * 1000:.0f} ms (median of {RUNS})"
        ),
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":  # the local cold start alone (make bench runs every figure)
    print(cold_start_cpu("LastAgentFunction"))
