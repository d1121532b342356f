"""`make test`'s phases, timed from outside: what P8 (`make bench`) reports.

``python -m bench.phases [--total] [--containers] NAME -- COMMAND ...`` runs COMMAND and passes
its exit status on. ``--total`` (``make test`` itself) starts a timed run:
bench/out/test-phases.jsonl is emptied, the run is named in the environment COMMAND's phases
inherit, and the whole suite's line is written last. A phase of a timed run appends its line:
its wall seconds and its CPU seconds (user + system of COMMAND and every process it waited for:
pytest, the local stacks, their function workers). With ``--containers`` (the phase that runs
Docker's containers: sam-local's functions, emulated; dockerd starts them, so no phase waits for
them) and for the whole run, the containers' CPU seconds meanwhile too, apart. Outside a timed
run nothing is written.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "out" / "test-phases.jsonl"
RUN = "BENCH_PHASES_RUN"  # set for the phases of a timed run: its start time


# Docker (cgroupfs, cgroup v1) puts its containers under this cpuacct group, whose counter keeps
# the nanoseconds of containers that have ended; absent before Docker's first container.
CONTAINERS_CPU = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of_containers() -> float:
    try:
        return int(CONTAINERS_CPU.read_text()) / 1e9
    except (OSError, ValueError):
        return 0.0


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str]) -> int:
    options = list(itertools.takewhile(lambda arg: arg in ("--total", "--containers"), argv))
    argv = argv[len(options) :]
    total = "--total" in options
    containers = total or "--containers" in options
    if len(argv) < 3 or argv[1] != "--":
        print(
            "usage: python -m bench.phases [--total] [--containers] NAME -- COMMAND ...",
            file=sys.stderr,
        )
        return 2
    name, command = argv[0], argv[2:]
    env = dict(os.environ)
    if total:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text("")
        env[RUN] = datetime.now(UTC).isoformat(timespec="seconds")
    began, containers_before = time.monotonic(), cpu_of_containers()
    # close_fds=False: a make below keeps the jobserver of the make above, as under a shell.
    code = subprocess.call(command, env=env, close_fds=False)
    if RUN not in env:
        return code
    line = {
        "run": env[RUN],
        "phase": name,
        "wall_s": round(time.monotonic() - began, 1),
        "cpu_s": round(cpu_of_children(), 1),
        "exit": code,
        "total": total,
    }
    if containers:
        line["containers_cpu_s"] = round(max(cpu_of_containers() - containers_before, 0.0), 1)
    if total:
        line |= {"commit": commit(), "cores": os.cpu_count()}
    with RECORD.open("a") as record:
        record.write(json.dumps(line) + "\n")
    in_containers = f" (+{line['containers_cpu_s']:.0f} s in containers)" if containers else ""
    print(
        f"== {name}: {line['wall_s']:.0f} s wall, {line['cpu_s']:.0f} s CPU{in_containers}, "
        f"exit {code}",
        flush=True,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
