"""Model-based test of the promise: hypothesis drives the whole pipeline (tests/unit/model/
pipeline.py) through S3 events that are duplicated, late or for reordered versions, stream and
queue deliveries that are duplicated, crashes after any AWS call of any invocation, and throttled
calls; then everything is delivered without faults, and the final state must be the one the design
defines for the same files (tests/unit/model/design.py).

`make test` runs 12 examples of up to 30 steps (about 40 s); MODEL_EXAMPLES=N runs more.
"""

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)
from shared import ingest, rules

from tests.unit.conftest import moto_stack
from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import OPERATIONS, Pipeline

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "12"))
KEYS = ("incoming/a.jsonl", "incoming/b.jsonl", "incoming/c.jsonl")
CALLERS = ("+15550000001", "+15550000002", "+15550000003")


@st.composite
def contact_rows(draw) -> dict | str:
    """A row of a small world (few contact ids, callers and times), so that re-exports,
    corrections and ties happen; now and then a line that is no contact at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(['{"contact_id": "c-broken"}', "not json", "[]"]))
    disposition = draw(st.sampled_from(rules.DISPOSITIONS))
    row = {
        "contact_id": f"c-{draw(st.integers(0, 5))}",
        "caller": draw(st.sampled_from(CALLERS)),
        "started_at": "2026-11-29T09:00:00Z",
        "ended_at": f"2026-11-29T10:0{draw(st.integers(0, 3))}:00Z",
        "disposition": disposition,
        "wait_seconds": draw(st.sampled_from([5, 900])),
    }
    if disposition != rules.ABANDONED or draw(st.booleans()):
        row["agent_id"] = f"agent-{draw(st.integers(0, 3))}"
    if draw(st.booleans()):
        row["email"] = "someone@example.com"
        row["survey_opt_in"] = draw(st.booleans())
    return row


crash_points = st.one_of(st.none(), st.integers(1, 6))
functions = st.sampled_from(sorted(OPERATIONS))


class PipelineMachine(RuleBasedStateMachine):
    def __init__(self, pipeline: Pipeline):
        super().__init__()
        self.pipeline = pipeline

    @initialize(key=st.sampled_from(KEYS), rows=st.lists(contact_rows(), min_size=1, max_size=7))
    def first_upload(self, key, rows):
        self.pipeline.upload(key, rows)

    @rule(
        key=st.sampled_from(KEYS),
        rows=st.lists(contact_rows(), min_size=1, max_size=7),
        same_moment=st.booleans(),
    )
    def upload(self, key, rows, same_moment):
        self.pipeline.upload(key, rows, same_moment)

    @rule(data=st.data())
    def s3_delivers_an_event_again(self, data):
        upload = data.draw(st.sampled_from(self.pipeline.uploads))
        self.pipeline.send_ingest(upload.event)

    @rule()
    def s3_delivers_an_event_late(self):
        self.pipeline.hold_ingest_message()

    @rule()
    def held_events_arrive(self):
        self.pipeline.release_held()

    @rule(function=functions, crash_after=st.integers(1, 6))
    def everything_flows_with_a_crash(self, function, crash_after):
        self.pipeline.flow(function, crash_after)

    @rule(function=functions, n=st.integers(1, 10), crash_after=crash_points, twice=st.booleans())
    def deliver_one_batch(self, function, n, crash_after, twice):
        self.pipeline.deliver(function, n, crash_after, twice)

    @rule(data=st.data(), function=functions, times=st.integers(1, 3))
    def throttle(self, data, function, times):
        operation = data.draw(st.sampled_from(OPERATIONS[function]))
        self.pipeline.throttle(function, operation, times)

    def teardown(self):
        self.pipeline.drain()
        check_final_state(self.pipeline)


def test_the_pipeline_keeps_its_promise_under_any_faults(aws_env, monkeypatch, capsys):
    # Writes of two contacts, so a file of a few rows needs continuations (three per invocation).
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)

    class Machine(PipelineMachine):
        def __init__(self):
            self._stack = moto_stack(monkeypatch)
            super().__init__(Pipeline(self._stack.__enter__(), monkeypatch))

        def teardown(self):
            try:
                super().teardown()
            finally:
                self._stack.__exit__(None, None, None)
                capsys.readouterr()  # the handlers' logs: not this test's output

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
