"""Wake-ups from the AWS side to the pollers that wait on it, in one process.

moto's backends signal a source (a queue's or a stream's ARN) when something arrives there (a
message sent, a stream record written); a poller of that source waits for the signal instead of
polling an empty source on a timer. A wait always has a timeout: a signal is a hint, never the only
way a poller learns of work (messages also become visible again when a visibility timeout runs
out, which nothing signals).
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_versions: dict[str, int] = {}
# One condition per source, all on one lock: a notify wakes the pollers of its own source only
# (one condition for every source woke every waiting poller at each stream record).
_changed: dict[str, threading.Condition] = {}


def _condition(source_arn: str) -> threading.Condition:
    condition = _changed.get(source_arn)
    if condition is None:
        condition = _changed[source_arn] = threading.Condition(_lock)
    return condition


def notify(source_arn: str) -> None:
    """Something arrived at the source."""
    with _lock:
        _versions[source_arn] = _versions.get(source_arn, 0) + 1
        _condition(source_arn).notify_all()


def version(source_arn: str) -> int:
    """A counter that grows with every notify of the source (take it before looking at the
    source, then wait for it to change)."""
    with _lock:
        return _versions.get(source_arn, 0)


def wait(source_arn: str, seen: int, timeout: float) -> bool:
    """Until the source was notified after `seen` (its version() then), or the timeout passed;
    True when it was notified."""
    with _lock:
        return _condition(source_arn).wait_for(
            lambda: _versions.get(source_arn, 0) != seen, timeout
        )
