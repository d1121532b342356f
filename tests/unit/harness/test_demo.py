"""The demo's data, and the chaos run's operator drill: how it plays the operator's recovery
commands."""

import contextlib
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from harness import demo, demo_data
from harness.stack import CONSUMERS, FailureRoute


class DrillStack:
    """What the drill asks of a stack: each consumer has a failed change to recover."""

    def idle(self) -> bool:
        return True

    def faults(self, **_switches) -> None:
        """The drill's fault switches (consumers broken, then fixed): nothing to switch here."""

    @contextlib.contextmanager
    def failing_consumer(self, function: str):
        yield FailureRoute(
            function,
            "StreamFailureQueueUrl",
            holds_records=False,
            bound_seconds=1,
            recover=("stream", "replay", "--function", function),
            dry_run=None,
        )

    def failed_changes(self, route, *_args) -> list[str]:
        return ["a failure record"]


def run_drill(monkeypatch, exits: dict[str, list[int]]) -> tuple[list[str], list[str]]:
    """The drill with each consumer's recovery exiting with these codes in turn; the commands
    it ran, and the recoveries it reports failed."""
    ran = []

    def ops(_stack, *argv):
        ran.append(argv[-1])
        code = exits[argv[-1]].pop(0)
        return subprocess.CompletedProcess(argv, code, stdout=f"exit {code}\n", stderr="")

    monkeypatch.setattr(demo, "ops", ops)
    _, failed = demo.operator_drill(DrillStack(), lambda: True)
    return ran, failed


def test_a_recovery_a_crash_struck_is_run_again_until_it_succeeds(monkeypatch):
    exits = {consumer: [0] for consumer in CONSUMERS}
    exits[CONSUMERS[-1]] = [1, 1, 0]  # a chaos crash in the replay's invocation, twice
    ran, failed = run_drill(monkeypatch, exits)
    assert failed == []
    assert ran == [*CONSUMERS, CONSUMERS[-1], CONSUMERS[-1]]


@pytest.mark.parametrize(
    ("exits", "runs"),
    [([1] * demo.RECOVERY_RUNS, demo.RECOVERY_RUNS), ([2], 1)],
    ids=["failing every run", "refused"],
)
def test_a_recovery_that_never_succeeds_is_reported_failed(monkeypatch, exits, runs):
    codes = {consumer: [0] for consumer in CONSUMERS}
    codes[CONSUMERS[0]] = list(exits)
    ran, failed = run_drill(monkeypatch, codes)
    assert failed == [f"stream replay --function {CONSUMERS[0]}"]
    assert ran.count(CONSUMERS[0]) == runs


def test_the_demo_data_is_the_seeds_at_any_hour_of_the_day_and_checked_by_the_layer():
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    early, late = (
        demo_data.generate(200, 20, 5, 600, now=day + timedelta(hours=h)) for h in (0, 23)
    )
    assert [r["ContactId"] for r in early.records] == [r["ContactId"] for r in late.records]
    assert (early.surveys, early.gift_cards, early.bad_rows) == (
        late.surveys,
        late.gift_cards,
        late.bad_rows,
    )
    assert set(early.redelivery_kinds) == set(demo_data.REDELIVERY_KINDS)
    assert len(early.files) == len(demo_data.FLAT_FILES)
    assert early.bad_rows == sum(f.bad_rows for f in early.files)
    # every contact once, re-deliveries included; every record parsed and kept
    ids = {r["ContactId"] for r in early.records}
    assert ids <= set(early.stored)
    assert len(early.stored) == len(ids) + sum(f.rows - f.bad_rows for f in early.files)
    assert early.good_rows == len(early.records) + len(early.redeliveries) + len(
        early.stored
    ) - len(ids)
