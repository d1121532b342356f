"""The trace checker: a run's structured logs against the transitions docs/design.md allows.

The functions log each record's transitions at INFO where they happen, with a `transition` key
and the record's ids (never a phone number or an e-mail):

- NotifierFunction (shared.aws.batch_claims), per notification_id: `claimed` or `adopted` (a
  claim never recorded, younger than SNS's deduplication window; both with `checked_at`, before
  the claim read the record), `sent` (the publish succeeded;
  `recorded`: its COMPLETED record saved), `duplicate` (completed before: not sent).
- IngestFunction (shared.ingest and its handler), per file_id: `run_started` (a run's first
  step took the file's processing log), `step_started` (before the step reads the log),
  `step_ended` (its outcome).
- LastAgentFunction, per contact as LAST_AGENT names it (contact_id, ended_at, agent_id):
  `contact_gone` (a change took it away: no CONTACT item holds it any more) and
  `last_agent_set` (a write naming it committed; `checked_at`: before its transaction began),
  each with `changed_at`, its stream record's ApproximateCreationDateTime (epoch seconds).

Forbidden, each naming its record:

- a notification sent by an invocation that holds no claim on it (claimed or adopted);
- a notification sent by an invocation whose claim began (`checked_at`) after one of its sends
  was recorded COMPLETED (that claim had to find it completed);
- a notification sent again 5 minutes or more after its first send, past SNS's deduplication
  (a repeat inside it, by the claimer and an invocation that adopted its claim, or after a save
  that failed, reaches no subscriber);
- a file step that began after a newer run of its file had started and ended other than OBSOLETE
  (a fenced step stores nothing: no rows, log, report or continuation);
- LAST_AGENT set to a contact copy from a change older than the one that took the copy away, by
  a write whose check began after that was logged (its transaction must have refused; a newer
  change, the contact stored again, may set it).

Time order between invocations comes only from a line logged after the fact (gone, run started)
and one logged before the act (checked_at, step started), so no rule depends on how two
processes' lines interleave in a file.

Several local stacks append to the same .emulator/logs: records are told apart by
`function_name`, which names the stack's deployment (CloudFormation's suffix, new for every
stack), so lines of concurrent runs in other fan-out modes never mix. CloudWatch Logs read the
same: the events' messages, one a line (docs/operations.md), or lines with a prefix before their
JSON (`sam logs`: the stream and the time).

    python -m harness.trace <log dir or files> [--function NAME ...]

Exit status 1 on the first forbidden transition (printed, with how many more), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

# SNS FIFO deduplicates a repeated MessageDeduplicationId for 5 minutes after its first publish.
SNS_DEDUPLICATION_SECONDS = 300
OBSOLETE = "OBSOLETE"  # shared.ingest: a step of a run the log no longer holds
TRANSITIONS = (
    "claimed",
    "adopted",
    "sent",
    "run_started",
    "step_started",
    "step_ended",
    "contact_gone",
    "last_agent_set",
)


@dataclass(frozen=True)
class Violation:
    at: datetime
    function: str
    record: str
    what: str

    def __str__(self) -> str:
        at = self.at.isoformat(timespec="milliseconds")
        return f"{at} {self.function}: {self.record}: {self.what}"


@dataclass
class Report:
    lines: int = 0  # log lines read
    transitions: int = 0
    records: int = 0
    violations: list[Violation] = field(default_factory=list)

    @property
    def first(self) -> Violation | None:
        return min(self.violations, key=lambda v: v.at) if self.violations else None


def _timestamp(text: str) -> datetime:
    """Powertools' `timestamp` (2026-12-07 03:41:39,241+0000) or an ISO 8601 one."""
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f%z")
    except ValueError:
        return datetime.fromisoformat(text)


def log_files(paths: Iterable[Path]) -> list[Path]:
    """The files of `paths`, a directory's `*.log` at any depth (none yet: none)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(path.rglob("*.log"))
        elif path.exists():
            found.append(path)
    return found


def transitions(
    files: Iterable[Path], offsets: dict[Path, int] | None = None, report: Report | None = None
) -> Iterator[dict]:
    """The lines with a `transition`, in each file's order (from its offset, when given)."""
    for path in files:
        with path.open("rb") as lines:
            if offsets:
                lines.seek(offsets.get(path, 0))
            for raw in lines:
                if report is not None:
                    report.lines += 1
                if b"transition" not in raw:  # most lines: not parsed
                    continue
                try:  # the JSON wherever it starts (`sam logs` puts the stream and time first)
                    line = json.loads(raw[raw.find(b"{") :])
                except ValueError:
                    continue
                if isinstance(line, dict) and "transition" in line:
                    yield line


def check(
    paths: Iterable[Path],
    functions: set[str] | None = None,
    offsets: dict[Path, int] | None = None,
) -> Report:
    """Every forbidden transition in the logs (only `functions`' lines when given)."""
    report = Report()
    trace = _Trace()
    for line in transitions(log_files(paths), offsets, report):
        function = line.get("function_name", "")
        if functions is not None and function not in functions:
            continue
        report.transitions += 1
        line["at"] = _timestamp(line["timestamp"])
        if line["transition"] in TRANSITIONS:
            getattr(trace, line["transition"])(function, line.get("function_request_id", ""), line)
    report.violations = trace.violations + trace.fenced_steps() + trace.stale_sets()
    report.records = trace.records
    return report


class _Trace:
    """The records' transitions so far, one method per transition."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.sends: dict[tuple, list[dict]] = defaultdict(list)
        # (function, id) -> request id holding a claim -> when its claim began (checked_at)
        self.claims: dict[tuple, dict[str, datetime | None]] = defaultdict(dict)
        self.runs: dict[tuple, list[tuple[int, datetime]]] = defaultdict(list)
        self.steps: dict[tuple, list[list]] = defaultdict(list)  # [started, ended or None]
        self.open_steps: dict[tuple, list] = {}
        self.gone: dict[tuple, list[dict]] = defaultdict(list)
        self.sets: list[tuple[tuple, dict]] = []

    @property
    def records(self) -> int:
        contacts = {key for key, _ in self.sets} | set(self.gone)
        return len(self.claims.keys() | self.sends.keys()) + len(self.steps) + len(contacts)

    # NotifierFunction: per notification_id
    def claimed(self, function: str, request: str, line: dict) -> None:
        began = line.get("checked_at")
        claims = self.claims[(function, line["notification_id"])]
        claims[request] = _timestamp(began) if began else None

    adopted = claimed  # a claim never recorded, taken over: held all the same

    def sent(self, function: str, request: str, line: dict) -> None:
        key = (function, line["notification_id"])
        what = _forbidden_send(line, self.sends[key], self.claims[key])
        if what:
            self.violations.append(Violation(line["at"], function, key[1], what))
        self.sends[key].append(line)

    # IngestFunction: per file_id
    def run_started(self, function: str, request: str, line: dict) -> None:
        self.runs[(function, line["file_id"])].append((_run(line.get("run")), line["at"]))

    def step_started(self, function: str, request: str, line: dict) -> None:
        step = [line, None]
        self.steps[(function, line["file_id"])].append(step)
        self.open_steps[(function, request, line["file_id"], _run(line.get("run")))] = step

    def step_ended(self, function: str, request: str, line: dict) -> None:
        key = (function, request, line["file_id"], _run(line.get("run")))
        step = self.open_steps.pop(key, None)
        if step is not None:
            step[1] = line

    def fenced_steps(self) -> list[Violation]:
        found = []
        for (function, file_id), steps in self.steps.items():
            for started, ended in steps:
                fence = _fence(self.runs[(function, file_id)], started)
                if fence is None or ended is None or ended.get("outcome") == OBSOLETE:
                    continue
                found.append(
                    Violation(
                        ended["at"],
                        function,
                        file_id,
                        f"a step of run {_label(started.get('run'))} began after run "
                        f"{_label(fence)} had started, and ended {ended.get('outcome')} "
                        f"(rows_ok {ended.get('rows_ok')}), not OBSOLETE",
                    )
                )
        return found

    # LastAgentFunction: per contact as LAST_AGENT names it
    def contact_gone(self, function: str, request: str, line: dict) -> None:
        key = (function, line["contact_id"], line["ended_at"], line["agent_id"])
        self.gone[key].append(line)

    def last_agent_set(self, function: str, request: str, line: dict) -> None:
        key = (function, line["contact_id"], line["ended_at"], line["agent_id"])
        self.sets.append((key, line))

    def stale_sets(self) -> list[Violation]:
        """A set whose check began after a gone line, from a change older (by its stream
        record's second) than the change that took the contact away: the item it checked no
        longer held it. A newer change (the contact stored again) may set it."""
        found = []
        for key, line in self.sets:
            for gone in self.gone.get(key, []):
                if not _before(line, gone):
                    continue
                found.append(
                    Violation(
                        line["at"],
                        key[0],
                        f"contact {key[1]}",
                        f"LAST_AGENT set to it (ended_at {key[2]}) from a change of "
                        f"{line['changed_at']} by a write begun after the change of "
                        f"{gone['changed_at']} took it away "
                        f"(logged {gone['at'].isoformat(timespec='milliseconds')})",
                    )
                )
                break
        return found


def _before(set_line: dict, gone: dict) -> bool:
    changed, went = set_line.get("changed_at"), gone.get("changed_at")
    if changed is None or went is None or not set_line.get("checked_at"):
        return False
    return int(changed) < int(went) and _timestamp(set_line["checked_at"]) > gone["at"]


def _forbidden_send(line: dict, earlier: list[dict], claims: dict[str, datetime | None]) -> str:
    """Why this send breaks the notifier's transitions, or "" (earlier: the record's sends)."""
    request = line.get("function_request_id")
    if request not in claims:
        return "sent by an invocation that holds no claim on it"
    began = claims[request]
    recorded = [send["at"] for send in earlier if send.get("recorded")]
    if recorded and began is not None and began > min(recorded):
        return (
            f"claimed at {began.isoformat(timespec='milliseconds')}, after it was recorded "
            f"COMPLETED ({min(recorded).isoformat(timespec='milliseconds')}), and sent again"
        )
    if earlier and (line["at"] - earlier[0]["at"]).total_seconds() >= SNS_DEDUPLICATION_SECONDS:
        return "sent a second time past SNS's 5-minute deduplication window of the first send"
    return ""


def _run(run) -> int:
    """A run's order (shared.ingest): the run S3's event started (none) first, then 1, 2, ..."""
    return 0 if run is None else int(run)


def _label(run) -> str:
    return "of the S3 event" if run in (None, 0) else str(run)


def _fence(runs: list[tuple[int, datetime]], started: dict) -> int | None:
    """The newest run newer than the step's that had started before the step began, if any."""
    own = _run(started.get("run"))
    newer = [run for run, at in runs if run > own and at < started["at"]]
    return max(newer) if newer else None


def offsets_now(paths: Iterable[Path]) -> dict[Path, int]:
    """Where each log file ends now: check(..., offsets=) then reads what is appended after."""
    return {path: path.stat().st_size for path in log_files(paths)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.trace", description=__doc__.split("\n")[0]
    )
    parser.add_argument("paths", nargs="+", type=Path, help="log directories or files")
    parser.add_argument(
        "--function",
        action="append",
        dest="functions",
        help="only this function's lines (its physical name; repeat for several)",
    )
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.paths if not path.exists()]
    if missing:
        print(f"error: no such log dir or file: {', '.join(missing)}", file=sys.stderr)
        return 2
    report = check(args.paths, set(args.functions) if args.functions else None)
    first = report.first
    if first is not None:
        print(f"trace: FORBIDDEN {first}")
        if len(report.violations) > 1:
            print(f"trace: and {len(report.violations) - 1} more forbidden transition(s)")
        return 1
    print(
        f"trace: ok, {report.transitions} transitions of {report.records} records "
        f"in {report.lines} log lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
