"""harness.polling: bounded waits that say what they wait for."""

from harness import polling


def test_a_wait_asks_its_progress_at_most_every_interval_and_says_each_change(monkeypatch):
    """A progress line reads the stack: asked on the first poll, then once `every` seconds have
    passed, and at the end; printed only when it changed."""
    clock = iter(range(100, 200))  # the deadline's reading, then each poll a second later
    monkeypatch.setattr(polling.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(polling.time, "sleep", lambda _: None)
    said: list[str] = []
    monkeypatch.setattr(polling, "say", said.append)
    polls, asked = iter([False] * 6 + [True]), []

    def progress() -> str:
        asked.append(len(asked))
        return "in flight: 3" if len(asked) < 3 else "in flight: 0"

    assert polling.wait_until(lambda: next(polls), timeout=60, progress=progress, every=3)
    assert len(asked) == 3  # of 7 polls: the first, 3 s later, and the last (done)
    assert said == ["  in flight: 3", "  in flight: 0"]
