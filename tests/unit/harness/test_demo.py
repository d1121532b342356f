"""The chaos run's operator drill: how it plays the operator's recovery commands."""

import contextlib
import subprocess

import pytest

from harness import demo
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
