"""The table (case x target: pass, fail, unsupported) as Markdown, and its place in
docs/local-stack.md, between two markers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from behaviour.case import Case
from behaviour.runner import Outcome

START, END = "<!-- behaviour-table:start -->", "<!-- behaviour-table:end -->"


def markdown(
    cases: list[Case],
    results: Mapping[str, Mapping[str, Outcome]],
    versions: Mapping[str, str],
    date: str,
) -> str:
    """``results``: target -> case name -> outcome."""
    targets = list(results)
    head = "| case | " + " | ".join(f"{t} {versions[t]}" for t in targets) + " |"
    rule = "| --- |" + " --- |" * len(targets)
    rows = [
        f"| [{c.name}]({c.cites}) ({c.group}) | "
        + " | ".join(results[t][c.name].status for t in targets)
        + " |"
        for c in cases
    ]
    totals = (
        "| passed | "
        + " | ".join(
            f"{sum(o.status == 'pass' for o in results[t].values())} of {len(cases)}"
            for t in targets
        )
        + " |"
    )
    return "\n".join([f"Run on {date}.", "", head, rule, *rows, totals])


def publish(doc: Path, table: str) -> None:
    """``table`` in place of what is between the markers of ``doc``."""
    text = doc.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{doc} has no {START} ... {END} section")
    doc.write_text(pattern.sub(lambda _: f"{START}\n{table}\n{END}", text))
