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
