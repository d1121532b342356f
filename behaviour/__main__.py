"""`python -m behaviour [--target NAME ...] [--publish]`: every case against each target (all
by default), the table printed, and with --publish written into docs/local-stack.md. Exits 1
when the local stack fails a case that is not one of its known gaps, or passes one that is (the
gap is closed: its entry in KNOWN_GAPS must go)."""

from __future__ import annotations

import argparse
import sys
import time

from behaviour import cases as _cases  # noqa: F401 - registers the cases
from behaviour.case import CASES
from behaviour.runner import FAIL, PASS, Outcome, run_all
from behaviour.table import markdown, publish
from behaviour.targets import KNOWN_GAPS, LOCAL, ROOT, TARGETS, running

DOC = ROOT / "docs" / "local-stack.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m behaviour")
    names = [t.name for t in TARGETS]
    parser.add_argument("--target", action="append", choices=names, help="default: all")
    parser.add_argument("--publish", action="store_true", help=f"write the table into {DOC}")
    args = parser.parse_args(argv)
    chosen = [t for t in TARGETS if t.name in (args.target or names)]
    results: dict[str, dict[str, Outcome]] = {}
    for target in chosen:
        started = time.monotonic()
        with running(target, ROOT / ".emulator" / "behaviour") as endpoint:
            results[target.name] = run_all(endpoint)
        print(f"== {target.name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
        for name, outcome in results[target.name].items():
            if outcome.status != PASS:
                print(f"   {outcome.status} {name}: {outcome.detail}", file=sys.stderr)
    table = markdown(CASES, results, {t.name: t.version for t in chosen}, time.strftime("%Y-%m-%d"))
    print(table)
    if args.publish:
        publish(DOC, table)
    problems = local_problems(results.get(LOCAL.name, {}))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


def local_problems(outcomes: dict[str, Outcome]) -> list[str]:
    """What fails the run: a case the local stack fails outside its known gaps, or a known gap
    it passes (the entry is stale)."""
    return [
        f"the local stack fails {name}"
        for name, outcome in outcomes.items()
        if outcome.status == FAIL and name not in KNOWN_GAPS
    ] + [
        f"the local stack passes {name}: take it out of KNOWN_GAPS"
        for name, outcome in outcomes.items()
        if outcome.status == PASS and name in KNOWN_GAPS
    ]


if __name__ == "__main__":
    sys.exit(main())
