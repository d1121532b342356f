"""A crash after each AWS call of each function, and a throttle of each call a function makes,
one at a time, in a run that has every hard case: a contact re-exported and corrected in a later
file, a new version of a file whose older version's event arrives late, an event delivered
twice, a file resumed by continuations, notifications due to several contacts. Whatever call
the fault strikes, once the event sources have retried, the final state is the design's
(tests/unit/model/design.py). The hypothesis state machine (test_model.py) combines faults;
this walks every single one.
"""

import pytest
from shared import ingest

from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import FUNCTION_DIRS, OPERATIONS, Pipeline
from tests.unit.support import moto_stack


def row(contact_id: str, caller: str, minute: int, version: int, **fields) -> dict:
    """A contact row ending at `minute`, its copy's `version` (updated_at) the file's order."""
    return {
        "contact_id": contact_id,
        "caller": caller,
        "agent_id": f"agent-{contact_id}",
        "started_at": "2026-11-29T09:00:00Z",
        "ended_at": f"2026-11-29T10:{minute:02d}:00Z",
        "updated_at": f"2026-11-29T11:{version:02d}:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": 5,
        **fields,
    }


SURVEY = {"email": "someone@example.com", "survey_opt_in": True}
# The first export's event arrives after its new version was applied: stale, it changes nothing.
EXPORT = [row("c-1", "+15550000001", 1, 1, **SURVEY), row("c-2", "+15550000001", 5, 1)]
# Another file: c-2 abandoned, c-3 waited long (gift cards), c-4 due a survey.
CORRECTION = [
    row("c-2", "+15550000001", 5, 2, disposition="ABANDONED"),
    row("c-3", "+15550000002", 2, 2, wait_seconds=900),
    row("c-4", "+15550000002", 0, 2, **SURVEY),
]
# The new version of the first export, uploaded last: it corrects c-4 again (later in time, no
# survey: c-4 keeps the one it may have had), and brings c-1 (a survey) and c-5 (a gift card).
NEW_VERSION = [
    row("c-1", "+15550000001", 7, 3, **SURVEY),
    "not a contact",
    row("c-4", "+15550000002", 3, 3),
    row("c-5", "+15550000003", 4, 3, disposition="ABANDONED"),
]


def run(pipeline: Pipeline) -> None:
    """The files go in and flow with the fault armed; S3 delivers the first export's event late
    (after the new version of that file) and twice; then everything is delivered."""
    first = pipeline.upload("incoming/export.jsonl", EXPORT)
    pipeline.hold_ingest_message()
    pipeline.upload("incoming/correction.jsonl", CORRECTION)
    pipeline.upload("incoming/export.jsonl", NEW_VERSION)
    pipeline.settle()
    pipeline.release_held()
    pipeline.send_ingest(first.event)
    pipeline.settle()
    pipeline.drain()


@pytest.fixture
def fresh(aws_env, monkeypatch, capsys):
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)  # files continue in new invocations

    def pipeline_run(fault, mode: str = "lambda") -> Pipeline:
        with moto_stack(monkeypatch) as stack:
            pipeline = Pipeline(stack, monkeypatch, mode)
            fault(pipeline)
            run(pipeline)
            check_final_state(pipeline)
            capsys.readouterr()
            return pipeline

    return pipeline_run


RUNS_PER_CALL = 5


# Every function of fan-out mode lambda, and the router of mode router (the consumers' code is the
# same in every mode; test_model.py drives their queues).
CRASHING = [("lambda", f) for f in sorted(FUNCTION_DIRS) if f != "RouterFunction"]
CRASHING.append(("router", "RouterFunction"))


@pytest.mark.parametrize(("mode", "function"), CRASHING)
def test_a_crash_after_any_call_of_the_function_keeps_the_promise(fresh, mode, function):
    calls = fresh(lambda pipeline: None, mode).calls_made[function]
    assert calls, f"{function} made no AWS call in the run"
    for after_call in range(1, calls + 1):
        # Which messages share a batch follows moto's SQS clock (milliseconds): a batch with
        # enough records for the k-th call may not form in one run, so up to RUNS_PER_CALL runs
        # look for it. Every run's final state is checked either way.
        for _ in range(RUNS_PER_CALL):
            pipeline = fresh(lambda p, k=after_call: p.arm_crash(function, k), mode)
            if pipeline.crashes:
                break
        assert [crash[0] for crash in pipeline.crashes] == [function], after_call


@pytest.mark.parametrize(
    ("mode", "function", "operation"),
    [
        ("router" if function == "RouterFunction" else "lambda", function, operation)
        for function, ops in sorted(OPERATIONS.items())
        for operation in ops
    ],
)
def test_a_throttled_call_keeps_the_promise(fresh, mode, function, operation):
    fresh(lambda pipeline: pipeline.throttle(function, operation, times=2), mode)
