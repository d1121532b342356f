"""Run every figure, print one table, write bench/results.json; exit 1 if a budget is missed."""

import json
import platform
import sys
import time
import traceback
from datetime import UTC, datetime

from bench import (
    cold_init,
    demo_settle,
    exactly_once_cost,
    ingest_cost,
    ingest_memory,
    layer_size,
    rival,
    rival_flow,
    test_phases,
    throughput,
)
from bench.common import ROOT, Figure

SECTIONS = (
    cold_init,
    ingest_cost,
    exactly_once_cost,
    ingest_memory,
    throughput,
    rival,
    rival_flow,
    demo_settle,
    layer_size,
    test_phases,
)


def _table(figures: list[Figure]) -> str:
    rows = [("id", "figure", "value", "budget", "holds", "detail")]
    for figure in figures:
        holds = "-" if figure.holds is None else ("yes" if figure.holds else "NO")
        rows.append(
            (
                figure.id,
                figure.name,
                f"{figure.value:g} {figure.unit}",
                figure.budget,
                holds,
                figure.detail,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[-1]
        for row in rows
    )


def main() -> int:
    started = time.monotonic()
    figures: list[Figure] = []
    for section in SECTIONS:
        name = section.__name__.rsplit(".", 1)[-1]
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        try:
            figures.extend(section.run())
        except Exception as error:  # one broken section must not cost the whole table
            traceback.print_exc()
            figures.append(
                Figure(
                    "-", f"{name} failed", 0, "", "runs", False, f"{type(error).__name__}: {error}"
                )
            )
    elapsed = time.monotonic() - started
    table = _table(figures)
    print(table)
    print(
        f"\n{len(figures)} figures in {elapsed:.0f} s on {platform.machine()}, Python "
        f"{platform.python_version()}"
    )
    results = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(elapsed, 1),
        "machine": {"arch": platform.machine(), "python": platform.python_version()},
        "figures": [figure.as_dict() for figure in figures],
    }
    (ROOT / "bench" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    missed = [figure for figure in figures if figure.holds is False]
    for figure in missed:
        print(
            f"budget missed: {figure.id} {figure.name}: {figure.value:g} {figure.unit} "
            f"(budget {figure.budget})",
            file=sys.stderr,
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
