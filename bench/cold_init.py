"""P1: cold init of each handler module against boto3 creating the same clients, side by side.

Each sample is a fresh interpreter. Handler and baseline runs alternate so that machine noise hits
both alike; the ratio of medians is the figure.
"""

import json
import subprocess

from bench.common import FUNCTIONS, PYTHON, ROOT, Figure, function_env, layer_path, median

RUNS = 15
BUDGET = {"RouteFunction": 1.10}
DEFAULT_BUDGET = 1.25

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
        budget = BUDGET.get(logical_id, DEFAULT_BUDGET)
        figures.append(
            Figure(
                id="P1",
                name=f"cold init {logical_id}",
                value=round(ratio, 3),
                unit="x boto3+clients",
                budget=f"<= {budget}",
                holds=ratio <= budget,
                detail=(
                    f"handler {median(handler_times) * 1000:.0f} ms vs baseline "
                    f"{median(baseline_times) * 1000:.0f} ms (clients: {', '.join(services)}; "
                    f"median of {RUNS})"
                ),
            )
        )
    return figures
