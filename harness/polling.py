"""Bounded waits: every wait on an asynchronous pipeline ends, and says what it was waiting for."""

import time
from collections.abc import Callable
from typing import Any


def eventually(fn: Callable[[], Any], timeout: float = 30.0, interval: float = 0.5) -> Any:
    """Call ``fn`` until it returns a truthy value without raising AssertionError.

    Returns that value; after ``timeout`` seconds raises AssertionError carrying the last failure
    (the last assertion message or the last falsy value), so a timeout says what was missing.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = f"last value: {value!r}"
        except AssertionError as error:
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout:.0f} s: {last}")
        time.sleep(interval)


def stable(fn: Callable[[], Any], polls: int = 3, timeout: float = 30.0, interval: float = 0.7):
    """Bounded wait until ``fn()`` returns the same value ``polls`` times in a row; return it.

    Used before counting side effects: "exactly one" needs a pipeline that stopped moving, not
    just the first message to have arrived.
    """
    seen: list[Any] = []

    def settled():
        seen.append(fn())
        del seen[:-polls]
        return len(seen) == polls and all(v == seen[0] for v in seen)

    eventually(settled, timeout=timeout, interval=interval)
    return seen[-1]


def say(message: str = "") -> None:
    """A line of a run's report, at once (the runs are followed live)."""
    print(message, flush=True)


def wait_until(
    check: Callable[[], bool], timeout: float, progress: Callable[[], str], every: float = 2.0
) -> bool:
    """Poll ``check`` (bounded); print ``progress()`` when it changes, at most every ``every`` s
    (asked only then: a progress line reads the stack too)."""
    deadline = time.monotonic() + timeout
    last_line, last_asked = "", 0.0
    while True:
        done = check()
        now = time.monotonic()
        if now - last_asked >= every or done:
            last_asked, line = now, progress()
            if line != last_line:
                say("  " + line)
                last_line = line
        if done:
            return True
        if now > deadline:
            return False
        time.sleep(0.25)
