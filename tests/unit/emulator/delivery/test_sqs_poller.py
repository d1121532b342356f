"""The SQS pollers (emulator/delivery/sqs_poller.py) against a real moto server, with a
scripted runtime: the event Lambda sends, partial batch responses, filters, redrive, the fault
switches, batching windows, pollers that scale with the backlog and wait for a signal."""

import collections
import hashlib
import json
import logging
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.parser.models import SqsModel

from emulator.core import wakeups
from emulator.delivery import engine as esm_module
from emulator.delivery import sqs_poller
from emulator.process import REGION
from tests.unit.emulator.delivery.support import event_counts, failures, stats_of, wait_for


def test_sqs_event_has_lambdas_record_shape_and_batch_is_deleted(aws, runtime, engine):
    url, arn = aws.queue("shape")
    message_id = aws.sqs.send_message(
        QueueUrl=url,
        MessageBody='{"kind": "A"}',
        MessageAttributes={
            "kind": {"DataType": "String", "StringValue": "SURVEY"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
            "count": {"DataType": "Number", "StringValue": "5"},
        },
    )["MessageId"]
    mapping = aws.mapping(arn, BatchSize=10)
    esm = engine()

    wait_for(lambda: runtime.calls)
    function, event = runtime.calls[0]
    assert function == "consumer"
    parse(event=event, model=SqsModel)  # Powertools' model of Lambda's SQS event validates it
    (record,) = event["Records"]
    assert record["messageId"] == message_id
    assert record["body"] == '{"kind": "A"}'
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == arn
    assert record["awsRegion"] == REGION
    assert record["md5OfBody"] == hashlib.md5(b'{"kind": "A"}').hexdigest()
    assert len(record["md5OfMessageAttributes"]) == 32
    assert record["receiptHandle"]
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(
        record["attributes"]
    )
    assert record["messageAttributes"] == {
        "kind": {
            "stringValue": "SURVEY",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "blob": {
            "binaryValue": "AAE=",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
        "count": {
            "stringValue": "5",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
    }
    assert wait_for(esm.idle)
    assert aws.counts(url) == (0, 0)
    assert len(runtime.calls) == 1
    stats = stats_of(esm, mapping)
    assert stats["invocations"] == 1
    assert stats["records_delivered"] == 1
    assert stats["failures"] == 0


def test_sqs_partial_failure_keeps_exactly_the_failed_messages(aws, runtime, engine, caplog):
    caplog.set_level(logging.INFO, logger="emulator.esm")
    url, arn = aws.queue("partial")
    ids = aws.send(url, *(json.dumps({"caller": f"+1555000000{n}"}) for n in range(4)))
    failed = {ids[1], ids[3]}

    def behaviour(records, index):
        if index == 0:
            return failures(*sorted(failed))
        return None

    runtime.behaviour = behaviour
    mapping = aws.mapping(arn, BatchSize=4, FunctionResponseTypes=["ReportBatchItemFailures"])
    esm = engine()

    wait_for(lambda: runtime.calls)
    assert {r["messageId"] for r in runtime.batches[0]} == set(ids)
    # Right after the first invocation: the two successes are gone, the failures wait for their
    # visibility timeout (they are not made visible early).
    assert wait_for(lambda: aws.counts(url) == (0, 2), timeout=0.9)
    assert not esm.idle()  # the failed messages are still to be retried
    wait_for(lambda: len(runtime.calls) >= 2)
    retried = runtime.batches[1]
    assert {r["messageId"] for r in retried} == failed
    assert {r["attributes"]["ApproximateReceiveCount"] for r in retried} == {"2"}
    assert wait_for(esm.idle)
    assert len(runtime.calls) == 2
    assert aws.counts(url) == (0, 0)
    stats = stats_of(esm, mapping)
    assert stats["failures"] == 1
    assert stats["records_failed"] == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "emulator.esm"]
    assert any(
        line.startswith(f"esm {mapping[:8]} fn=consumer records=4 outcome=partial failed=2")
        for line in lines
    )
    assert any(f"esm {mapping[:8]} fn=consumer records=2 outcome=ok" in line for line in lines)
    assert not any("+1555" in line for line in lines)  # record contents are never logged


@pytest.mark.parametrize(
    "response",
    [
        {"batchItemFailures": "oops"},
        {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]},
        {"batchItemFailures": [{"itemIdentifier": ""}]},
    ],
)
def test_sqs_malformed_partial_response_fails_the_whole_batch(aws, runtime, engine, response):
    url, arn = aws.queue("malformed")
    ids = aws.send(url, "a", "b", "c")
    runtime.behaviour = lambda records, index: response if index == 0 else None
    aws.mapping(arn, BatchSize=3, FunctionResponseTypes=["ReportBatchItemFailures"])
    esm = engine()

    wait_for(lambda: len(runtime.calls) >= 2)
    assert {r["messageId"] for r in runtime.batches[0]} == set(ids)
    assert {r["messageId"] for r in runtime.batches[1]} == set(ids)
    assert wait_for(esm.idle)


def test_sqs_function_error_without_partial_reporting_leaves_every_message(aws, runtime, engine):
    url, arn = aws.queue("error")
    ids = aws.send(url, "a", "b")

    def behaviour(records, index):
        if index == 0:
            raise RuntimeError("boom")
        return failures(records[0]["messageId"])  # ignored: not ReportBatchItemFailures

    runtime.behaviour = behaviour
    aws.mapping(arn, BatchSize=2)
    esm = engine()
    wait_for(lambda: len(runtime.calls) >= 2)
    assert {r["messageId"] for r in runtime.batches[1]} == set(ids)
    assert wait_for(esm.idle)
    assert len(runtime.calls) == 2
    assert aws.counts(url) == (0, 0)


def test_sqs_messages_matching_no_filter_are_deleted_without_invoking(aws, runtime, engine):
    url, arn = aws.queue("filtered")
    wanted = aws.send(url, json.dumps({"kind": "SURVEY", "n": 1}))[0]
    aws.send(url, json.dumps({"kind": "GIFT_CARD"}), "SURVEY as plain text")
    mapping = aws.mapping(
        arn,
        BatchSize=10,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"kind": ["SURVEY"]}})}]},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and runtime.calls)
    assert [r["messageId"] for batch in runtime.batches for r in batch] == [wanted]
    assert aws.counts(url) == (0, 0)
    assert stats_of(esm, mapping)["records_filtered"] == 2


def test_a_mapping_with_event_count_metrics_counts_what_it_polled_filtered_invoked_and_deleted(
    aws, runtime, engine
):
    """MetricsConfig EventCount (Lambda developer guide, "Event source mapping metrics"): per
    EventSourceMappingUUID in AWS/Lambda."""
    url, arn = aws.queue("counted")
    aws.send(url, json.dumps({"kind": "SURVEY"}), json.dumps({"kind": "SURVEY", "bad": 1}))
    aws.send(url, json.dumps({"kind": "GIFT_CARD"}))

    failed_once: set[str] = set()

    def behaviour(records, index):  # the bad message fails its first delivery only
        bad = [r["messageId"] for r in records if "bad" in r["body"]]
        first = [m for m in bad if m not in failed_once]
        failed_once.update(first)
        return failures(*first)

    runtime.behaviour = behaviour
    mapping = aws.mapping(
        arn,
        BatchSize=10,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"kind": ["SURVEY"]}})}]},
        MetricsConfig={"Metrics": ["EventCount"]},
    )
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) >= 2)
    assert wait_for(lambda: aws.counts(url) == (0, 0))
    counts = event_counts(aws, mapping)
    # 3 polled first, the failed one again; the GIFT_CARD filtered out
    assert counts["PolledEventCount"] == 4
    assert counts["FilteredOutEventCount"] == 1
    assert counts["InvokedEventCount"] == 3
    assert counts["FailedInvokeEventCount"] == 1
    assert counts["DeletedEventCount"] == 2


def test_sqs_message_is_redriven_to_the_dlq_after_max_receive_count(aws, runtime, engine):
    dlq_url, dlq_arn = aws.queue("ingest-dlq")
    url, arn = aws.queue(
        "ingest",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
    )
    (message_id,) = aws.send(url, '{"poison": true}')

    def behaviour(records, index):
        raise ValueError("cannot process")

    runtime.behaviour = behaviour
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()

    assert wait_for(esm.idle)
    in_dlq = aws.drain(dlq_url)
    assert [m["MessageId"] for m in in_dlq] == [message_id]
    assert in_dlq[0]["Body"] == '{"poison": true}'
    counts = [
        r["attributes"]["ApproximateReceiveCount"] for batch in runtime.batches for r in batch
    ]
    assert counts == ["1", "2"]
    assert aws.counts(url) == (0, 0)
    stats = stats_of(esm, mapping)
    assert stats["sent_to_dlq"] == 1
    assert stats["failures"] == 2


def test_sqs_duplicate_deliveries_invoke_each_batch_twice(aws, runtime, faults, engine):
    faults.duplicate_deliveries = 2
    url, arn = aws.queue("dupes")
    ids = aws.send(url, "a", "b")
    mapping = aws.mapping(arn, BatchSize=2)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) >= 2)
    assert len(runtime.calls) == 2
    assert [{r["messageId"] for r in b} for b in runtime.batches] == [set(ids), set(ids)]
    assert runtime.batches[0] == runtime.batches[1]
    assert aws.counts(url) == (0, 0)
    assert stats_of(esm, mapping)["invocations"] == 2


def test_sqs_reorder_shuffles_batches_and_holds_messages_back_to_later_ones(
    aws, runtime, faults, engine
):
    faults.update({"reorder_rate": 0.5, "seed": 4, "sqs_pollers": 1})
    url, arn = aws.queue("reordered", visibility=30)
    bodies = [str(n) for n in range(40)]
    aws.send(url, *bodies)
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and aws.counts(url) == (0, 0))
    delivered = [r["body"] for batch in runtime.batches for r in batch]
    assert sorted(delivered, key=int) == bodies  # each message once: none lost or repeated
    # Held back: a message goes out in a later batch than one sent after it (not only
    # shuffled within its batch).
    batch_of = {r["body"]: n for n, batch in enumerate(runtime.batches) for r in batch}
    assert any(batch_of[str(m)] > batch_of[str(m + k)] for m in range(40) for k in range(1, 40 - m))


def test_sqs_reorder_keeps_a_fifo_queues_order(aws, runtime, faults, engine):
    faults.update({"reorder_rate": 0.5, "seed": 4, "sqs_pollers": 1})
    url, arn = aws.queue("reordered.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    bodies = [str(n) for n in range(20)]
    for body in bodies:
        aws.sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and aws.counts(url) == (0, 0))
    assert [r["body"] for batch in runtime.batches for r in batch] == bodies


def test_sqs_batching_window_gathers_up_to_batch_size(aws, runtime, faults, engine):
    # One poller: with Lambda's five, a poller that starts late on a loaded machine can receive
    # the later two and wait out a window of its own, as a split batch on AWS would.
    faults.update({"sqs_pollers": 1})
    url, arn = aws.queue("window")
    # A window far longer than a loaded machine's stalls (CI saw one outlast a 2 s window): the
    # batch goes as soon as it is full, so the test waits for the third message, not the window.
    aws.mapping(arn, BatchSize=3, MaximumBatchingWindowInSeconds=30)
    esm = engine()
    first = aws.send(url, "1")
    time.sleep(0.3)  # later arrivals within the window join the same batch
    rest = aws.send(url, "2", "3")
    started = time.monotonic()
    wait_for(lambda: runtime.calls)
    assert time.monotonic() - started < 20  # delivered full, well before the window closes
    assert {r["messageId"] for r in runtime.batches[0]} == set(first + rest)
    assert wait_for(esm.idle)


def test_sqs_pollers_fault_processes_batches_concurrently(aws, runtime, faults, engine):
    faults.sqs_pollers = 3
    runtime.delay = 1.0  # long enough to overlap however late a loaded machine's receives run
    url, arn = aws.queue("scaled", visibility=5)
    aws.send(url, *[str(n) for n in range(6)])
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 6)
    assert runtime.max_active >= 2
    assert esm.stats()[mapping]["pollers"] == 3
    assert sorted(r["body"] for b in runtime.batches for r in b) == [str(n) for n in range(6)]


def test_sqs_mapping_starts_five_pollers_and_scales_with_the_backlog(aws, runtime, engine):
    # Each invocation holds its poller 1 s, five times the 0.2 s between added pollers: the
    # invocations overlap however slowly a loaded machine schedules the pollers' receives.
    runtime.delay = 1.0
    url, arn = aws.queue("backlog", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 5  # Lambda starts with five
    aws.send(url, *[str(n) for n in range(60)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 60)
    assert 5 < runtime.max_active <= 10  # more pollers while messages wait, up to the bound
    assert sorted(int(r["body"]) for b in runtime.batches for r in b) == list(range(60))
    assert wait_for(lambda: esm.stats()[mapping]["pollers"] == 5)  # back down once drained


def test_sqs_scaling_stops_at_the_mappings_maximum_concurrency(aws, runtime, engine):
    runtime.delay = 0.2
    url, arn = aws.queue("capped", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1, ScalingConfig={"MaximumConcurrency": 2})
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 2
    aws.send(url, *[str(n) for n in range(10)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 10)
    assert runtime.max_active == 2


def test_sqs_pollers_switch_sets_a_fixed_number_and_null_restores_scaling(
    aws, runtime, faults, engine
):
    faults.sqs_pollers = 1
    runtime.delay = 0.1
    url, arn = aws.queue("fixed", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 1
    aws.send(url, *[str(n) for n in range(8)])
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 8)
    assert runtime.max_active == 1
    faults.update({"sqs_pollers": None})
    esm.refresh()
    assert esm.stats()[mapping]["pollers"] == 5


def blocked_in(function: str, threads: list[threading.Thread]) -> bool:
    """Every thread waits (threading's Condition.wait is its newest frame) inside ``function``."""
    frames = sys._current_frames()
    for thread in threads:
        frame = frames.get(thread.ident)
        if frame is None or frame.f_code.co_name != "wait":
            return False
        while frame is not None and frame.f_code.co_name != function:
            frame = frame.f_back
        if frame is None:
            return False
    return True


def sqs_poller_threads(*, but: str = "") -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith("esm-sqs-") and not (but and t.name.endswith(but))
    ]


class LastToWatchSource:
    """A queue read by five pollers where poller 5 becomes the watcher: the others' first
    receive waits until it watches. ``receives`` counts each poller's receives."""

    def __init__(self, inner, watching: threading.Event):
        self._inner = inner
        self._watching = watching
        self.receives: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def receive(self, count: int):
        thread = threading.current_thread().name
        self.receives[thread] += 1
        if not thread.endswith("-5") and self.receives[thread] == 1:
            self._watching.wait(10)
        return self._inner.receive(count)


def test_a_stopped_watcher_leaves_the_watch_to_a_poller_that_keeps_running(
    aws, runtime, faults, engine, monkeypatch
):
    """The sqs_pollers switch stops the poller watching the queue, and it is scheduled after the
    pollers woken with it (a loaded machine may): one of those watches from then on, so a message
    sent next is delivered at once, not when the other pollers' FOLLOWER_WAIT (60 s) runs out."""
    watching = threading.Event()
    sources: list[LastToWatchSource] = []

    def open_queue(arn: str) -> LastToWatchSource:
        sources.append(LastToWatchSource(esm_module.SqsSource(arn), watching))
        return sources[-1]

    monkeypatch.setattr(esm_module, "open_queue", open_queue)

    def rechecked(others: list[threading.Thread]) -> bool:
        """Woken by the stop, each of the others received again and waits again."""
        again = all(sources[0].receives[t.name] >= 2 for t in others)
        return again and blocked_in("_wait_for_work", others)

    def leaving_late(source_arn: str, seen: int, timeout: float) -> bool:
        last = threading.current_thread().name.endswith("-5")
        if last:
            watching.set()
        notified = wakeups.wait(source_arn, seen, timeout)
        if last:  # stopped: it leaves once the four others wait again, as a follower or watcher
            wait_for(lambda: rechecked(sqs_poller_threads(but="-5")))
        return notified

    monkeypatch.setattr(
        sqs_poller,
        "wakeups",
        SimpleNamespace(notify=wakeups.notify, version=wakeups.version, wait=leaving_late),
    )
    url, arn = aws.queue("handover")
    mapping = aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert esm.stats()[mapping]["pollers"] == 5
    # poller 5 watches, the other four wait as followers
    assert wait_for(lambda: blocked_in("_wait_for_work", sqs_poller_threads()))
    faults.sqs_pollers = 4
    esm.refresh()
    assert wait_for(lambda: esm.stats()[mapping]["pollers"] == 4)
    aws.send(url, "after the watcher left")
    assert wait_for(lambda: len(runtime.calls) == 1, timeout=sqs_poller.FOLLOWER_WAIT / 6)


def test_a_message_is_received_again_when_its_visibility_timeout_ends(aws, runtime, engine):
    """Nothing signals a visibility timeout running out: the idle poller sleeps until then."""
    url, arn = aws.queue("reappears", visibility=1)
    aws.send(url, "retry me")
    moments: list[float] = []
    first_received: list[float] = []

    def behaviour(records, index):
        moments.append(time.time())
        first_received.append(int(records[0]["attributes"]["ApproximateFirstReceiveTimestamp"]))
        if index == 0:
            raise RuntimeError("first attempt fails")

    runtime.behaviour = behaviour
    aws.mapping(arn, BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(moments) == 2)
    # Not before the timeout ends, counted from the first receive (the invocation starts later on
    # a loaded machine); and woken by it, not by the idle wait (IDLE_WAIT, 20 s): a bound far
    # below that and far above a loaded machine's scheduling delays.
    assert first_received[0] == first_received[1]
    assert moments[1] - first_received[0] / 1000 >= 1.0 - 0.001  # the timestamp is in whole ms
    assert moments[1] - moments[0] < sqs_poller.IDLE_WAIT / 4
