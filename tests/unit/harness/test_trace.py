"""The trace checker (harness.trace) on the logs of the real handlers, run in process with moto
(tests/unit/model/pipeline.py): a good run passes; a build whose notifier skips its claim, and one
whose ingest ignores the fence of a reprocessed file, fail, naming the record."""

import io
import json
import logging

import pytest
from shared import ingest
from shared.aws.batch_claims import BatchClaims

from harness import trace
from tests.unit.model.pipeline import FUNCTION_DIRS, Pipeline
from tests.unit.support import moto_stack

SURVEY = {"email": "someone@example.com", "survey_opt_in": True}


def row(number: int, **fields) -> dict:
    return {
        "contact_id": f"c-{number}",
        "caller": f"+1555000{number:04d}",
        "agent_id": f"agent-{number % 3}",
        "started_at": "2026-11-29T09:00:00Z",
        "ended_at": f"2026-11-29T10:{number % 60:02d}:00Z",
        "updated_at": "2026-11-29T11:00:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": 5,
        **fields,
    }


@pytest.fixture
def pipeline(aws_env, monkeypatch):
    with moto_stack(monkeypatch) as stack:
        yield Pipeline(stack, monkeypatch)


@pytest.fixture
def logs(pipeline, monkeypatch):
    """Every function's log lines, as the local stack's log files hold them: each service's
    Powertools handler (configured once per process) writes here for the test."""
    written = io.StringIO()
    for function in pipeline.order:
        pipeline.environment(function)
        for handler in logging.getLogger(FUNCTION_DIRS[function]).handlers:
            monkeypatch.setattr(handler, "stream", written)
    return written


def checked(logs: io.StringIO, tmp_path) -> trace.Report:
    path = tmp_path / "functions.log"
    path.write_text(logs.getvalue())
    return trace.check([tmp_path])


def test_a_good_run_passes_with_every_record_traced(pipeline, logs, tmp_path):
    pipeline.upload("incoming/a.jsonl", [row(n, **SURVEY) for n in range(1, 6)])
    pipeline.settle()
    for _ in range(2):  # every notification delivered again: duplicates, suppressed
        pipeline.send_ingest(pipeline.uploads[0].event)
    pipeline.drain()

    report = checked(logs, tmp_path)

    assert report.violations == []
    assert len(pipeline.received_by_subscriber()) == 5
    lines = trace.transitions([tmp_path / "functions.log"])
    sent = [line for line in lines if line["transition"] == "sent"]
    assert sorted(line["notification_id"] for line in sent) == [
        f"SURVEY#c-{n}" for n in range(1, 6)
    ]


def test_a_notifier_that_skips_its_claim_is_caught_naming_the_notification(
    pipeline, logs, tmp_path, monkeypatch
):
    monkeypatch.setattr(BatchClaims, "_claim", lambda self, item: True)
    pipeline.upload("incoming/a.jsonl", [row(7, **SURVEY)])
    pipeline.drain()

    first = checked(logs, tmp_path).first

    assert first is not None
    assert first.record == "SURVEY#c-7"
    assert "no claim" in first.what


def test_an_ingest_that_ignores_the_fence_of_a_reprocess_is_caught_naming_the_file(
    pipeline, logs, tmp_path, monkeypatch
):
    upload = pipeline.upload("incoming/big.jsonl", [row(n) for n in range(1, 301)])
    pipeline.deliver("IngestFunction", 10, None, twice=False)  # the first step: IN_PROGRESS
    assert pipeline.hold_ingest_message()  # its continuation, delivered late
    assert pipeline.file_reprocess(upload)
    pipeline.settle()  # run 1 ingests the whole file
    monkeypatch.setattr(ingest, "of_earlier_run", lambda task, log: False)
    pipeline.release_held()
    pipeline.settle()

    first = checked(logs, tmp_path).first

    assert first is not None
    assert first.record == upload.file_id
    assert "began after run 1 had started" in first.what


def test_the_same_run_with_the_fence_passes(pipeline, logs, tmp_path):
    upload = pipeline.upload("incoming/big.jsonl", [row(n) for n in range(1, 301)])
    pipeline.deliver("IngestFunction", 10, None, twice=False)
    assert pipeline.hold_ingest_message()
    assert pipeline.file_reprocess(upload)
    pipeline.settle()
    pipeline.release_held()
    pipeline.settle()

    report = checked(logs, tmp_path)

    assert report.violations == []
    outcomes = [
        line.get("outcome")
        for line in trace.transitions([tmp_path / "functions.log"])
        if line["transition"] == "step_ended" and line.get("run") is None
    ]
    assert outcomes[-1] == ingest.OBSOLETE  # the late continuation, fenced


def test_runs_of_other_stacks_in_the_same_logs_do_not_mix(tmp_path):
    """Two stacks' notifiers append to one file: the same notification sent once by each is no
    duplicate; a send without a claim in one stack is not covered by the other's claim."""
    lines = [
        _line("stack-a-Notifier-1", "r1", "claimed", "2026-12-07 03:00:00,000+0000"),
        _line("stack-b-Notifier-2", "r2", "claimed", "2026-12-07 03:00:00,001+0000"),
        _line("stack-a-Notifier-1", "r1", "sent", "2026-12-07 03:00:00,002+0000"),
        _line("stack-b-Notifier-2", "r2", "sent", "2026-12-07 03:00:00,003+0000"),
    ]
    (tmp_path / "NotifierFunction.log").write_text("\n".join(lines) + "\n")
    assert trace.check([tmp_path]).violations == []

    unclaimed = _line("stack-c-Notifier-3", "r3", "sent", "2026-12-07 03:00:00,004+0000")
    (tmp_path / "NotifierFunction.log").write_text("\n".join([*lines, unclaimed]) + "\n")
    assert [v.function for v in trace.check([tmp_path]).violations] == ["stack-c-Notifier-3"]


def test_a_claim_begun_after_the_record_completed_is_caught_a_concurrent_adoption_is_not(
    tmp_path,
):
    """Two deliveries at once: the second adopts the first's claim before the first records it,
    and both publish (SNS drops the repeat): allowed. A claim that began after the record was
    completed must have found it completed: its send is forbidden."""
    at = "2026-12-07 03:00:00,{:03d}+0000".format
    began = "2026-12-07T03:00:00.{:03d}+00:00".format
    lines = [
        _line("Notifier-1", "r1", "claimed", at(100), checked_at=began(90)),
        _line("Notifier-1", "r2", "adopted", at(150), checked_at=began(140)),
        _line("Notifier-1", "r1", "sent", at(200)),
        _line("Notifier-1", "r2", "sent", at(300)),
    ]
    (tmp_path / "NotifierFunction.log").write_text("\n".join(lines) + "\n")
    assert trace.check([tmp_path]).violations == []

    late = _line("Notifier-1", "r3", "adopted", at(500), checked_at=began(450))
    again = _line("Notifier-1", "r3", "sent", at(600))
    (tmp_path / "NotifierFunction.log").write_text("\n".join([*lines, late, again]) + "\n")
    (violation,) = trace.check([tmp_path]).violations
    assert (violation.record, violation.at.microsecond // 1000) == ("SURVEY#c-1", 600)
    assert "after it was recorded COMPLETED" in violation.what


def test_a_repeat_send_past_sns_deduplication_is_caught(tmp_path):
    """A save that failed after the publish leaves the claim unrecorded: adopted and sent again
    inside SNS's 5 minutes, the repeat reaches no one; 5 minutes after the first send, it would."""
    lines = [
        _line("Notifier-1", "r1", "claimed", "2026-12-07 03:00:00,000+0000"),
        _line("Notifier-1", "r1", "sent", "2026-12-07 03:00:00,100+0000", recorded=False),
        _line("Notifier-1", "r2", "adopted", "2026-12-07 03:04:00,000+0000"),
        _line("Notifier-1", "r2", "sent", "2026-12-07 03:04:00,100+0000"),
    ]
    (tmp_path / "NotifierFunction.log").write_text("\n".join(lines) + "\n")
    assert trace.check([tmp_path]).violations == []

    late = [
        _line("Notifier-1", "r3", "adopted", "2026-12-07 03:05:00,000+0000"),
        _line("Notifier-1", "r3", "sent", "2026-12-07 03:05:00,100+0000"),
    ]
    lines[-1] = _line("Notifier-1", "r2", "sent", "2026-12-07 03:04:00,100+0000", recorded=False)
    (tmp_path / "NotifierFunction.log").write_text("\n".join([*lines, *late]) + "\n")
    (violation,) = trace.check([tmp_path]).violations
    assert violation.record == "SURVEY#c-1" and "past SNS's 5-minute" in violation.what


def test_a_last_agent_set_from_a_change_older_than_the_contacts_removal_is_caught(tmp_path):
    """The removal's change (second 100) was logged at 03:00:01.000. A set checked before that,
    or from a newer change (the contact stored again), is allowed; one from an older change
    checked after it means its transaction did not check the contact."""
    contact = {"contact_id": "c-1", "ended_at": "2026-11-29T10:01:00Z", "agent_id": "agent-1"}
    at = "2026-12-07 03:00:01,{:03d}+0000".format
    checked = "2026-12-07T03:00:01.{:03d}+00:00".format

    def set_line(request: str, logged: int, began: str, changed_at: int) -> str:
        return _line(
            "LastAgent-1", request, "last_agent_set", at(logged),
            checked_at=began, changed_at=changed_at, **contact,
        )  # fmt: skip

    lines = [
        _line("LastAgent-1", "r1", "contact_gone", at(0), changed_at=100, **contact),
        set_line("r2", 5, "2026-12-07T03:00:00.990+00:00", 99),  # checked before the removal
        set_line("r3", 30, checked(20), 101),  # the contact stored again, a newer change
        set_line("r4", 50, checked(40), 99),  # a late delivery of the old change
    ]
    (tmp_path / "LastAgentFunction.log").write_text("\n".join(lines) + "\n")

    violations = trace.check([tmp_path]).violations

    assert [(v.record, v.at.microsecond // 1000) for v in violations] == [("contact c-1", 50)]


def test_the_command_line_names_the_record_and_fails(tmp_path, capsys):
    line = _line("stack-a-Notifier-1", "r1", "sent", "2026-12-07 03:00:00,000+0000")
    # as `sam logs` prints an event: its stream and time before the line
    (tmp_path / "NotifierFunction.log").write_text(
        f"2026/12/07/[$LATEST]ab 2026-12-07T03:00:00 {line}\n"
    )

    assert trace.main([str(tmp_path)]) == 1
    assert "SURVEY#c-1: sent by an invocation that holds no claim" in capsys.readouterr().out
    assert trace.main([str(tmp_path / "missing")]) == 2


def _line(function: str, request: str, transition: str, timestamp: str, **fields) -> str:
    fields.setdefault("notification_id", "SURVEY#c-1")
    return json.dumps(
        {
            "level": "INFO",
            "timestamp": timestamp,
            "function_name": function,
            "function_request_id": request,
            "transition": transition,
            "recorded": True,
            **fields,
        }
    )
