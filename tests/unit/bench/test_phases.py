"""P8's record: each phase of a timed `make test` with its wall, its CPU and, apart, the CPU of
the Docker containers that ran meanwhile (dockerd's children, which no phase waits for)."""

import json
import sys

from bench import phases
from bench import test_phases as p8

RUN = "2026-12-05T09:00:00+00:00"


def test_a_phase_records_its_cpu_and_its_containers_cpu_apart(tmp_path, monkeypatch):
    counter = tmp_path / "cpuacct.usage"  # Docker's cgroup counter, in nanoseconds
    counter.write_text("5000000000\n")
    record = tmp_path / "test-phases.jsonl"
    monkeypatch.setattr(phases, "CONTAINERS_CPU", counter)
    monkeypatch.setattr(phases, "RECORD", record)
    monkeypatch.setattr(p8, "RECORD", record)
    monkeypatch.setenv(phases.RUN, RUN)
    containers_ran = (  # ~0.3 s of its own CPU; the containers 2.5 s
        f"import pathlib; sum(range(10**7)); "
        f"pathlib.Path({str(counter)!r}).write_text('7500000000')"
    )

    sam_local = ["--containers", "sam-local", "--", sys.executable, "-c", containers_ran]
    assert phases.main(sam_local) == 0
    # A phase that overlapped the containers but runs none: they are not counted as its own.
    assert phases.main(["lint", "--", sys.executable, "-c", containers_ran + "; exit(3)"]) == 3

    sam_local, lint = (json.loads(line) for line in record.read_text().splitlines())
    assert (sam_local["phase"], sam_local["containers_cpu_s"], sam_local["exit"]) == (
        "sam-local",
        2.5,
        0,
    )
    assert sam_local["cpu_s"] > 0  # the python it waited for
    assert ("containers_cpu_s" not in lint, lint["exit"]) == (True, 3)

    total = {"run": RUN, "phase": "test", "wall_s": 100.0, "cpu_s": 150.0, "exit": 3,
             "total": True, "commit": "abc1234", "cores": 2, "containers_cpu_s": 2.5}  # fmt: skip
    with record.open("a") as lines:
        lines.write(json.dumps(total) + "\n")
    figures = {figure.name: figure for figure in p8.run()}
    assert "+ 2 s in Docker's containers" in figures["make test phase sam-local"].detail
    assert "in containers" not in figures["make test phase lint"].detail
    assert "exit 3" in figures["make test phase lint"].detail
    assert figures["make test wall"].holds is False  # a phase failed, whatever the time
    assert "150 s CPU in all + 2 s in Docker's containers" in figures["make test wall"].detail
    assert "1.52 cores busy" in figures["make test wall"].detail
