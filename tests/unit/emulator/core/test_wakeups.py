"""Wake-ups (emulator/core/wakeups.py): a poller waiting on its source returns when that source is
notified, and only then; a notify of another source leaves it waiting."""

import threading
import time

from emulator.core import wakeups


def _waiter(source: str, timeout: float) -> tuple[threading.Thread, dict]:
    outcome: dict = {}
    seen = wakeups.version(source)

    def wait() -> None:
        started = time.monotonic()
        outcome["notified"] = wakeups.wait(source, seen, timeout)
        outcome["waited"] = time.monotonic() - started

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, outcome


def test_a_wait_returns_when_its_own_source_is_notified():
    thread, outcome = _waiter("arn:aws:sqs:us-east-1:123456789012:mine", timeout=30)
    time.sleep(0.05)
    wakeups.notify("arn:aws:sqs:us-east-1:123456789012:mine")
    thread.join(5)
    assert outcome["notified"] is True
    assert outcome["waited"] < 5


def test_another_sources_notify_leaves_a_waiter_waiting_until_its_timeout():
    thread, outcome = _waiter("arn:aws:sqs:us-east-1:123456789012:quiet", timeout=0.5)
    for _ in range(20):
        wakeups.notify("arn:aws:sqs:us-east-1:123456789012:busy")
        time.sleep(0.01)
    thread.join(5)
    assert outcome["notified"] is False
    assert outcome["waited"] >= 0.5


def test_a_notify_before_the_wait_is_not_missed():
    source = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/1"
    seen = wakeups.version(source)
    wakeups.notify(source)  # between looking at the source and waiting on it
    started = time.monotonic()
    assert wakeups.wait(source, seen, timeout=30) is True
    assert time.monotonic() - started < 1
    assert wakeups.version(source) == seen + 1
