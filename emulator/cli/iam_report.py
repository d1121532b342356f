"""`python -m emulator iam-report`: run-time least privilege, from the local stack's records.

Reads the records `up` wrote (emulator/iam/access.py) for the current template and code (records of
another fingerprint are ignored: they describe other code), merges them (a grant any run used is
used) and lists, per function:

- grants no call used: (policy/statement, action) pairs of the role's Allow statements, each
  Action pattern expanded over the IAM catalogue; explained ones are those an entry of the
  template's ``Metadata.UnusedGrants`` covers: the template-level list for every function, a
  function's own list for it (``- Actions: [<pattern>, ...]`` plus ``Reason: <why>``). An entry
  with ``RarePath: <what takes it>`` is a grant the code does use, on a path few runs take (a
  correction that leaves a caller no contact with an agent): unused in the runs read, it is
  explained; used, it is not stale. So the verdict does not depend on which runs happened;
- calls that were denied, and calls that could not be checked;
- first, the runs it read: when each started, its fan-out mode, what started it, and the calls
  each function made in it (what the runs covered).

Exit 1 when a call was denied, a grant is unused and unexplained, or an explanation without a
RarePath covers no unused grant (it went stale); 2 when there is no record to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.deploy.translate import load_template
from emulator.iam import access
from emulator.iam.policy import Policy, action_matches, granted_actions

EXPLANATIONS = "UnusedGrants"
# What started an integration run's local stack (run_description's command line): pytest.
INTEGRATION_RUN = "pytest"


@dataclass(frozen=True)
class Explanation:
    where: str  # "template" or the function's LogicalId
    actions: tuple[str, ...]
    reason: str
    rare_path: str | None = None  # the path that uses the grant, when the code does use it

    def covers(self, action: str) -> bool:
        return any(action_matches(pattern, action) for pattern in self.actions)


@dataclass
class FunctionReport:
    logical_id: str
    role: str
    calls: int = 0
    unused: list[tuple[str, str, Explanation | None]] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    unchecked: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unexplained(self) -> list[tuple[str, str]]:
        return [(grant, action) for grant, action, why in self.unused if why is None]


@dataclass
class Report:
    runs: list[dict[str, Any]]  # each record's run and the calls per function in it
    functions: list[FunctionReport]
    stale: list[Explanation]

    @property
    def failed(self) -> bool:
        return bool(self.stale) or any(f.denied or f.unexplained for f in self.functions)


def explanations(template: Mapping[str, Any]) -> list[Explanation]:
    found = []
    sources = [("template", template.get("Metadata") or {})]
    sources += [
        (logical_id, resource.get("Metadata") or {})
        for logical_id, resource in template.get("Resources", {}).items()
    ]
    for where, metadata in sources:
        for entry in metadata.get(EXPLANATIONS) or []:
            found.append(
                Explanation(where, tuple(entry["Actions"]), entry["Reason"], entry.get("RarePath"))
            )
    return found


def _merge(
    records: Iterable[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(each run with its calls per function, per function: its role, its policies and the calls
    of every run)."""
    merged: dict[str, dict[str, Any]] = {}
    runs = []
    for record in records:
        calls = {
            logical_id: sum(call["count"] for call in function["calls"])
            for logical_id, function in record["functions"].items()
        }
        runs.append({**record.get("run", {}), "calls": calls})
        for logical_id, function in record["functions"].items():
            into = merged.setdefault(logical_id, {"role": "", "policies": {}, "calls": []})
            into["role"], into["policies"] = function["role"], function["policies"]
            into["calls"] += function["calls"]
    return runs, merged


FUNCTION_TYPES = ("AWS::Serverless::Function", "AWS::Lambda::Function")


def build(records: Iterable[Mapping[str, Any]], template: Mapping[str, Any]) -> Report:
    runs, merged = _merge(records)
    # The template's functions only: a run may also have served stacks of its callers' own (the
    # behaviour suite deploys small ones into an empty stack), whose roles are not this template's.
    functions = {
        logical_id
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") in FUNCTION_TYPES
    }
    merged = {logical_id: f for logical_id, f in merged.items() if logical_id in functions}
    notes = explanations(template)
    used_notes: set[Explanation] = set()
    reports = []
    for logical_id, function in sorted(merged.items()):
        report = FunctionReport(logical_id, function["role"])
        used: set[tuple[str, str]] = set()
        for call in function["calls"]:
            report.calls += call["count"]
            if call["allowed"] is None:
                report.unchecked.append(call)
            elif not call["allowed"]:
                report.denied.append(call)
            for grant in call["grants"]:
                used.add((grant, call["action"].lower()))
        own = [n for n in notes if n.where in ("template", logical_id)]
        for name, document in function["policies"].items():
            for statement in Policy.parse(name, document).statements:
                if statement.effect != "Allow":
                    continue
                for action in granted_actions(statement):
                    if (statement.grant_id, action.lower()) in used:
                        continue
                    why = next((n for n in own if n.covers(action)), None)
                    if why is not None:
                        used_notes.add(why)
                    report.unused.append((statement.grant_id, action, why))
        reports.append(report)
    stale = [n for n in notes if n not in used_notes and n.rare_path is None]
    return Report(runs, reports, stale)


def _call_line(call: Mapping[str, Any]) -> str:
    context = " ".join(f"{k}={','.join(v)}" for k, v in call["context"].items())
    return f"{call['action']} on {call['resource']} {context} x{call['count']}".replace("  ", " ")


def _run_line(number: int, run: Mapping[str, Any]) -> str:
    called = ", ".join(f"{name} {count}" for name, count in sorted(run["calls"].items()) if count)
    return (
        f"  run {number}: started {run.get('started', '?')}, fan-out {run.get('fan_out', '?')}, "
        f"by `{run.get('started_by') or '?'}`; calls: {called or 'none'}"
    )


def render(report: Report) -> str:
    lines = [f"iam-report: {len(report.runs)} local stack run(s) of the current template and code"]
    lines += [_run_line(number, run) for number, run in enumerate(report.runs, 1)]
    for function in report.functions:
        lines.append(
            f"{function.logical_id} (role {function.role}): {function.calls} calls, "
            f"{sum(c['count'] for c in function.denied)} denied, "
            f"{len(function.unused)} unused grants ({len(function.unexplained)} unexplained)"
        )
        for grant, action, why in function.unused:
            status = f"explained ({why.where}): {why.reason}" if why else "NOT EXPLAINED"
            if why is not None and why.rare_path:
                status = f"rare path not taken in these runs ({why.where}): {why.rare_path}"
            lines.append(f"  unused  {grant} {action}: {status}")
        lines += [f"  DENIED  {_call_line(call)}" for call in function.denied]
        lines += [f"  unchecked  {_call_line(call)}" for call in function.unchecked]
    for note in report.stale:
        covered = ", ".join(note.actions)
        lines.append(f"stale explanation ({note.where}): {covered} covers no unused grant")
    lines.append("result: " + ("FAIL" if report.failed else "ok"))
    if report.failed and not any(
        INTEGRATION_RUN in run.get("started_by", "") for run in report.runs
    ):
        lines.append(
            "none of these runs is the integration suite's: the grants only its paths use show "
            "unused after `make run` alone. Run `make integration`, then `make iam-report` again"
        )
    return "\n".join(lines)


def main(template_path: Path) -> int:
    template_path = template_path.resolve()
    directory = template_path.parent / access.RECORD_DIR
    records = list(access.read_records(directory, access.fingerprint(template_path)))
    if not records:
        print(
            f"iam-report: no record in {directory} for the current template and code: run the "
            "local stack first (make integration, make run)"
        )
        return 2
    report = build(records, load_template(template_path))
    print(render(report))
    return 1 if report.failed else 0
