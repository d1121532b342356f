"""P8: `make test`'s wall time and its phases' wall and CPU, so that a regression shows.

`make test` times itself (bench/phases.py): each phase's wall and CPU seconds, and the whole
run's, in bench/out/test-phases.jsonl. This reports the last complete run on this checkout (the
suite takes minutes, so the bench does not run it again): its total against the budget, then one
row per phase, with the CPU of Docker's containers apart (sam-local's functions, emulated arm64:
no phase waits for them, dockerd starts them). Phases overlap (lint and unit beside the
integration suites, then sam-local after lint and the chaos runs after the integration suites),
so their walls add up to more than the total.
"""

import json

from bench.common import Figure
from bench.phases import RECORD

BUDGET_SECONDS = 12 * 60  # issue 23: on the 2-core machine, the tools cached


def run() -> list[Figure]:
    text = RECORD.read_text() if RECORD.exists() else ""
    lines = [json.loads(line) for line in text.splitlines()]
    total = next((line for line in lines if line["total"]), None)
    if total is None:
        return [
            Figure(
                "P8",
                "make test wall",
                0,
                "s",
                f"<= {BUDGET_SECONDS}",
                None,
                f"NOT MEASURED: no complete `make test` recorded in {RECORD.name} (run it first)",
            )
        ]
    phases = [line for line in lines if not line["total"] and line["run"] == total["run"]]
    failed = [line["phase"] for line in [*phases, total] if line["exit"] != 0]
    figures = [
        Figure(
            "P8",
            "make test wall",
            total["wall_s"],
            "s",
            f"<= {BUDGET_SECONDS}",
            total["wall_s"] <= BUDGET_SECONDS and not failed,
            f"run {total['run']} at {total['commit']} on {total['cores']} cores: "
            f"{total['cpu_s']:.0f} s CPU in all{_in_containers(total)} "
            f"({_cpu(total) / total['wall_s']:.2f} cores busy)"
            + (f"; FAILED: {', '.join(failed)}" if failed else ""),
        )
    ]
    figures += [
        Figure(
            "P8",
            f"make test phase {line['phase']}",
            line["wall_s"],
            "s",
            "-",
            None,
            f"wall; CPU {line['cpu_s']:.0f} s{_in_containers(line)} "
            f"({_cpu(line) / max(line['wall_s'], 0.1):.2f} cores)"
            f"{'' if line['exit'] == 0 else f'; exit {line["exit"]}'}",
        )
        for line in phases
    ]
    return figures


def _cpu(line: dict) -> float:
    """The phase's CPU with its containers' (runs recorded before they were counted have none)."""
    return line["cpu_s"] + line.get("containers_cpu_s", 0.0)


def _in_containers(line: dict) -> str:
    containers = line.get("containers_cpu_s", 0.0)
    return f" + {containers:.0f} s in Docker's containers" if containers else ""
