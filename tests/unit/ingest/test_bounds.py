"""No content of a row fails its file, a file's report is bounded, and a file too big for one
invocation is resumed by continuation messages until it is complete."""

import gzip
import json

import pytest
from shared import files
from shared import ingest as ingest_module

from harness.in_process import ShrinkingClock
from tests.unit.ingest.support import Delivery

GOOD = {
    "contact_id": "c-1",
    "caller": "+4915112345678",
    "agent_id": "agent-7",
    "started_at": "2026-11-29T10:00:00Z",
    "ended_at": "2026-11-29T10:05:00Z",
    "updated_at": "2026-11-29T12:00:00Z",
    "disposition": "RESOLVED",
    "wait_seconds": 42,
}


def good(n: int) -> dict:
    return GOOD | {"contact_id": f"c-{n}", "caller": f"+49151{n:08d}"}


def jsonl(*rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_hostile_rows_are_rejected_rows_and_the_rows_after_them_are_kept(ingest):
    # Each of these raised inside the ingest before, failing the file on every receive (DLQ).
    hostile = [
        GOOD
        | {
            "contact_id": "h-1",
            "started_at": "0001-01-01T00:00:00+01:00",
            "ended_at": "0001-01-01T00:30:00+01:00",
        },
        GOOD | {"contact_id": "h-2", "ended_at": "0999-06-01T00:00:00Z"},
        GOOD | {"contact_id": "h-3", "email": "\ud800@example.com"},
        GOOD | {"contact_id": "h-4", "wait_seconds": 10**4000},
    ]
    huge = '{"contact_id": "h-6", "wait_seconds": ' + "9" * 5000 + "}\n"  # Python's limit: 4,300
    text = jsonl(good(1), *hostile) + huge + jsonl(good(2))
    csv_text = (
        "contact_id,caller,agent_id,started_at,ended_at,updated_at,disposition,wait_seconds\n"
        "c-3,+4915100000003,a,2026-11-29T10:00:00Z,2026-11-29T10:01:00Z,2026-11-29T10:02:00Z,"
        f"RESOLVED,{'0' * 4300}7\n"
        "h-5,+4915100000005,a,2026-11-29T10:00:00Z,2026-11-29T10:01:00Z,2026-11-29T10:02:00Z,"
        "RESOLVED,9\x00\n"
        "c-4,+4915100000004,a,2026-11-29T10:00:00Z,2026-11-29T10:01:00Z,2026-11-29T10:02:00Z,"
        "RESOLVED,1\n"
    )
    jsonl_file = ingest.put("incoming/hostile.jsonl", text)
    csv_file = ingest.put("incoming/hostile.csv", csv_text.encode() + b"\xff\xfe,\n")
    assert ingest.run(jsonl_file, csv_file) == []

    stored = sorted(item["contact_id"] for item in ingest.items())
    assert stored == ["c-1", "c-2", "c-3", "c-4"]
    assert [(e["line"], e.get("contact_id")) for e in ingest.report("incoming/hostile.jsonl")] == [
        (2, "h-1"),
        (3, "h-2"),
        (4, "h-3"),
        (5, "h-4"),
        (6, None),  # not even JSON that Python will read: reported without its contact_id
    ]
    assert [e["line"] for e in ingest.report("incoming/hostile.csv")] == [3, 5]
    for delivery in (jsonl_file, csv_file):
        assert ingest.log_of(delivery)["outcome"] == "PROCESSED"


def test_a_row_that_raises_anywhere_is_a_rejected_row(ingest, monkeypatch):
    # Whatever the model misses: a row whose validation raises costs that row only.
    real = ingest_module.model.parse_contact

    def fragile(fields, **kwargs):
        if fields.get("contact_id") == "c-2":
            raise ArithmeticError("a case nobody thought of")
        return real(fields, **kwargs)

    monkeypatch.setattr(ingest_module.model, "parse_contact", fragile)
    delivery = ingest.put("incoming/a.jsonl", jsonl(good(1), good(2), good(3)))
    assert ingest.run(delivery) == []
    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-1", "c-3"]
    assert ingest.report("incoming/a.jsonl") == [
        {
            "level": "row",
            "line": 2,
            "contact_id": "c-2",
            "reasons": ["row could not be read (ArithmeticError)"],
        }
    ]


def test_the_report_lists_a_bounded_number_of_rows_and_counts_the_rest(ingest):
    bad_rows = ingest_module.MAX_REPORT_ROWS + 500
    delivery = ingest.put("incoming/junk.jsonl", "[]\n" * bad_rows + jsonl(good(1)))
    assert ingest.run(delivery) == []

    report = ingest.report("incoming/junk.jsonl")
    assert len(report) == ingest_module.MAX_REPORT_ROWS + 1
    assert report[-1] == {"level": "summary", "rows_not_listed": 500}
    log = ingest.log_of(delivery)
    assert (log["rows_ok"], log["rows_rejected"]) == (1, bad_rows)


def test_a_gzip_bomb_is_rejected_after_the_rows_before_it(ingest, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINES", 10_000)
    bomb = gzip.compress(jsonl(good(1)).encode() + b"\n" * 5_000_000)
    assert len(bomb) < 10_000
    delivery = ingest.put("incoming/bomb.jsonl.gz", bomb)
    assert ingest.run(delivery) == []

    assert [i["contact_id"] for i in ingest.items()] == ["c-1"]
    assert ingest.report("incoming/bomb.jsonl.gz") == [
        {"level": "file", "reasons": ["more than 10000 lines"]}
    ]
    assert ingest.log_of(delivery)["outcome"] == "REJECTED_FILE"


def deliver_until_empty(ingest, first: Delivery) -> int:
    """Run the first delivery, then every message the function puts on IngestQueue (the
    continuations), each in a fresh invocation, as the event source mapping would. Every
    invocation has time for five steps of rows: each read of the clock costs 5 s of its 80 (a
    write is timed by a read before and after it: 5 s), and a step stops once less than its
    margin (a quarter of 80 s) plus twice its longest write is left."""
    pending, invocations = [first], 0
    while pending:
        assert ingest.run(*pending, context=ShrinkingClock(remaining_ms=80_000)) == []
        invocations += 1
        pending = [
            Delivery(message["MessageId"], message["Body"])
            for message in ingest.stack.drain(ingest.stack.ingest_queue_url)
        ]
    return invocations


def test_a_file_too_big_for_one_invocation_is_resumed_until_complete(ingest):
    # Every invocation has time for five writes of 50 contacts before it must stop: 1,234 rows,
    # some bad, need five of them.
    rows = [good(n) if n % 100 else {"contact_id": f"bad-{n}"} for n in range(1, 1235)]
    delivery = ingest.put("incoming/big.jsonl", jsonl(*rows))

    invocations = deliver_until_empty(ingest, delivery)
    assert invocations == 5

    assert len(ingest.items()) == 1234 - 12
    report = ingest.report("incoming/big.jsonl")
    assert [entry["line"] for entry in report] == list(range(100, 1235, 100))
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["rows_ok"], log["rows_rejected"]) == ("PROCESSED", 1222, 12)
    assert log["steps"] == invocations
    metrics = ingest.metrics()
    assert (metrics["FilesContinued"], metrics["FilesProcessed"]) == (invocations - 1, 1)


def test_a_file_late_in_a_batch_is_deferred_whole_when_too_little_time_is_left(ingest):
    # Two big files in one batch: the first uses the invocation's time down to its margin, so
    # the second is not started (a first write could not finish) but handed to a new
    # invocation, which ingests it whole.
    first = ingest.put("incoming/first.jsonl", jsonl(*(good(n) for n in range(1, 401))))
    second = ingest.put("incoming/second.jsonl", jsonl(*(good(n) for n in range(401, 501))))
    assert ingest.run(first, second, context=ShrinkingClock(remaining_ms=36_000)) == []
    assert ingest.metrics()["FilesDeferred"] == 1  # not started

    pending = [
        Delivery(m["MessageId"], m["Body"])
        for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
    ]
    assert len(pending) == 2  # the first file's continuation, the second file whole
    while pending:
        assert ingest.run(*pending, context=ShrinkingClock(remaining_ms=600_000, cost_ms=1)) == []
        pending = [
            Delivery(m["MessageId"], m["Body"])
            for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
        ]
    assert len(ingest.items()) == 500
    for delivery, rows in ((first, 400), (second, 100)):
        log = ingest.log_of(delivery)
        assert (log["outcome"], log["rows_ok"]) == ("PROCESSED", rows)


def test_a_duplicate_continuation_has_one_effect(ingest):
    rows = [good(n) for n in range(1, 800)]
    delivery = ingest.put("incoming/big.jsonl", jsonl(*rows))
    assert ingest.run(delivery, context=ShrinkingClock()) == []
    [continuation] = ingest.stack.drain(ingest.stack.ingest_queue_url)
    twice = [Delivery(f"copy-{n}", continuation["Body"]) for n in range(2)]
    assert ingest.run(*twice, context=ShrinkingClock(remaining_ms=600_000)) == []
    assert ingest.run(delivery, context=ShrinkingClock()) == []  # and the original, late

    assert len(ingest.items()) == 799
    assert ingest.log_of(delivery)["outcome"] == "PROCESSED"
    # The original's redelivery found its step done and enqueued the continuation again: that
    # one finds the file complete.
    again = [
        Delivery(m["MessageId"], m["Body"])
        for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
    ]
    assert ingest.run(*again, context=ShrinkingClock()) == []
    assert ingest.log_of(delivery)["rows_ok"] == 799


@pytest.mark.parametrize("crash_at_put", [1, 2])
def test_a_crash_between_steps_resumes_from_the_last_saved_progress(ingest, crash_at_put):
    class Crash(BaseException):
        pass

    rows = [good(n) if n % 50 else {"contact_id": f"bad-{n}"} for n in range(1, 1001)]
    delivery = ingest.put("incoming/big.jsonl", jsonl(*rows))
    puts = []

    def crash_on_report(params, **kwargs):
        puts.append(1)
        if len(puts) == crash_at_put:
            raise Crash

    ingest.app.s3.meta.events.register("before-call.s3.PutObject", crash_on_report)
    with pytest.raises(Crash):
        deliver_until_empty(ingest, delivery)
    ingest.cold_start()  # SQS redelivers the step that crashed
    pending = [
        Delivery(m["MessageId"], m["Body"])
        for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
    ] or [delivery]
    for message in pending:
        deliver_until_empty(ingest, message)

    assert len(ingest.items()) == 980
    assert [e["line"] for e in ingest.report("incoming/big.jsonl")] == list(range(50, 1001, 50))
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["rows_ok"], log["rows_rejected"]) == ("PROCESSED", 980, 20)
