"""The event source mapping engine (emulator/delivery/engine.py) against a real moto server,
with a scripted runtime: mappings enabled, disabled, updated and created before their function;
idle status; pollers woken by what arrives; the duplicate fault."""

import json
import time

from emulator.delivery import engine as esm_module
from emulator.delivery import sqs_poller, stream_poller
from harness.polling import stable
from tests.unit.emulator.delivery.support import stats_of, wait_for


def test_disabling_a_mapping_stops_delivery_and_enabling_resumes_it(aws, runtime, engine):
    url, arn = aws.queue("toggle")
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    assert wait_for(esm.all_enabled)
    aws.send(url, "before")
    wait_for(lambda: runtime.calls)

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    wait_for(lambda: not esm.all_enabled())
    wait_for(lambda: esm.stats()[mapping]["pollers"] == 0)
    assert esm.stats()[mapping]["state"] == "Disabled"
    aws.send(url, "while disabled")
    time.sleep(0.5)  # several poll and refresh intervals
    assert len(runtime.calls) == 1
    assert aws.counts(url) == (1, 0)
    assert esm.idle()  # a disabled mapping is not waited for

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=True)
    wait_for(lambda: len(runtime.calls) == 2)
    assert runtime.batches[1][0]["body"] == "while disabled"
    assert esm.all_enabled()


def test_a_mapping_reads_disabling_until_its_last_poller_has_ended(aws, runtime, engine):
    """GetEventSourceMapping's State follows the pollers, as Lambda's does: Disabled only once
    none is left to receive, so a message sent then stays in the queue."""
    runtime.delay = 3.0  # an invocation in progress when the mapping is disabled
    url, arn = aws.queue("states", visibility=30)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()

    def state() -> str:
        return aws.lam.get_event_source_mapping(UUID=mapping)["State"]

    assert wait_for(lambda: state() == "Enabled") and esm.all_enabled()
    aws.send(url, "in progress")
    wait_for(lambda: runtime.active)
    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    assert state() == "Disabling"  # its invocation finishes first
    assert wait_for(lambda: state() == "Disabled")
    assert esm.stats()[mapping]["pollers"] == 0 and len(runtime.calls) == 1
    aws.send(url, "after")
    # over several refresh intervals: still visible, no poller took it
    assert stable(lambda: aws.counts(url), polls=5, interval=0.1) == (1, 0)

    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=True)
    assert state() in ("Enabling", "Enabled")
    assert wait_for(lambda: state() == "Enabled") and esm.all_enabled()
    wait_for(lambda: len(runtime.calls) == 2)


def test_disabling_a_mapping_in_its_batching_window_delivers_what_it_received(aws, runtime, engine):
    """Nothing received is stranded by a disable: the window closes early and the batch goes out
    (else the message stays out of sight for the queue's whole visibility timeout)."""
    url, arn = aws.queue("window-stop", visibility=300)
    mapping = aws.mapping(arn, BatchSize=10, MaximumBatchingWindowInSeconds=60)
    esm = engine()
    assert wait_for(esm.all_enabled)
    aws.send(url, "gathered")
    assert wait_for(lambda: aws.counts(url) == (0, 1))  # received: the window is open
    aws.lam.update_event_source_mapping(UUID=mapping, Enabled=False)
    started = time.monotonic()
    assert wait_for(lambda: aws.lam.get_event_source_mapping(UUID=mapping)["State"] == "Disabled")
    assert time.monotonic() - started < 30  # not the 60 s window
    assert [r["body"] for b in runtime.batches for r in b] == ["gathered"]
    assert aws.counts(url) == (0, 0)  # delivered and deleted


def test_a_mapping_to_a_function_not_yet_registered_is_creating_and_receives_nothing(
    aws, runtime, engine
):
    """CloudFormation makes a stack's mappings before `up` registers its functions: the mapping
    waits ("Creating") instead of invoking a function the runtime cannot run, which would leave
    the message out of sight for the queue's visibility timeout."""
    url, arn = aws.queue("unregistered", visibility=300)
    mapping = aws.mapping(arn, BatchSize=1)
    function_arn = aws.lam.get_event_source_mapping(UUID=mapping)["FunctionArn"]
    runtime.unregistered.add(function_arn)
    aws.send(url, "early")
    esm = engine()

    def seen() -> tuple:
        state = aws.lam.get_event_source_mapping(UUID=mapping)["State"]
        return state, aws.counts(url), len(runtime.calls)

    # over several refresh intervals: still visible, never received
    assert stable(seen, polls=5, interval=0.1) == ("Creating", (1, 0), 0)

    runtime.unregistered.clear()
    assert wait_for(lambda: [r["body"] for b in runtime.batches for r in b] == ["early"])
    assert wait_for(lambda: aws.lam.get_event_source_mapping(UUID=mapping)["State"] == "Enabled")
    assert esm.all_enabled()


def test_updated_batch_size_and_filter_take_effect(aws, runtime, engine):
    url, arn = aws.queue("update", visibility=10)
    mapping = aws.mapping(arn, BatchSize=1)
    esm = engine()
    aws.send(url, '{"k": 1}')
    wait_for(lambda: runtime.calls)
    aws.lam.update_event_source_mapping(
        UUID=mapping,
        BatchSize=5,
        MaximumBatchingWindowInSeconds=1,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"k": [2]}})}]},
    )
    esm.refresh()  # what the engine does on its own every refresh interval
    aws.send(url, '{"k": 2}', '{"k": 3}', '{"k": 2}')
    assert wait_for(lambda: esm.idle() and len(runtime.calls) >= 2)
    assert [r["body"] for b in runtime.batches[1:] for r in b] == ['{"k": 2}', '{"k": 2}']


class CountingSource:
    """A source wrapper counting the reads the engine makes."""

    def __init__(self, inner, counter: dict[str, int]):
        self._inner = inner
        self._counter = counter

    def __getattr__(self, name):
        attribute = getattr(self._inner, name)
        if name in ("receive", "records") and callable(attribute):

            def counted(*args, **kwargs):
                self._counter[name] = self._counter.get(name, 0) + 1
                return attribute(*args, **kwargs)

            return counted
        return attribute


def test_caught_up_pollers_wait_for_a_signal_instead_of_polling(aws, runtime, engine, monkeypatch):
    reads: dict[str, int] = {}
    monkeypatch.setattr(
        esm_module, "open_queue", lambda arn: CountingSource(esm_module.SqsSource(arn), reads)
    )
    monkeypatch.setattr(
        esm_module,
        "open_stream",
        lambda arn: CountingSource(esm_module.StreamSource(arn), reads),
    )
    url, arn = aws.queue("quiet")
    stream = aws.table("quiet", shards=4)
    aws.mapping(arn, BatchSize=10)
    aws.mapping(stream, StartingPosition="TRIM_HORIZON", BatchSize=10)
    esm = engine()
    assert wait_for(lambda: esm.idle() and reads.get("receive") == 5 and reads.get("records") == 4)
    time.sleep(0.2)
    before = dict(reads)
    time.sleep(1.5)
    # Nothing arrived: no receive and no read at all (a 10 Hz poller would have made dozens).
    assert reads == before
    started = time.monotonic()
    aws.send(url, "wake up")
    aws.put("quiet", "wake up")
    # Woken by the arrival, not by a timer: the idle waits run IDLE_WAIT (20 s) without a signal;
    # a bound far below it and far above a loaded machine's scheduling delays.
    woken_within = min(sqs_poller.IDLE_WAIT, stream_poller.IDLE_WAIT) / 4
    assert wait_for(lambda: len(runtime.calls) == 2, timeout=woken_within)
    assert time.monotonic() - started < woken_within


def test_status_idle_waits_for_records_held_in_a_batching_window(aws, runtime, engine):
    url, arn = aws.queue("windowed")
    stream = aws.table("windowed")
    # 5 s windows: far longer than the 0.3 s look, whatever a loaded machine's stalls.
    aws.mapping(arn, BatchSize=10, MaximumBatchingWindowInSeconds=5)
    aws.mapping(
        stream, StartingPosition="TRIM_HORIZON", BatchSize=10, MaximumBatchingWindowInSeconds=5
    )
    esm = engine()
    assert wait_for(esm.idle)
    aws.send(url, "held")
    aws.put("windowed", "held")
    time.sleep(0.3)  # received / read, and held until the window closes
    assert not runtime.calls
    assert not esm.idle()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 2)


def test_duplicate_rate_delivers_a_batch_once_more(aws, runtime, faults, engine):
    faults.update({"duplicate_rate": 1.0})  # every batch: the rate's draw always wins
    url, arn = aws.queue("dup-rate")
    stream = aws.table("dup-rate")
    aws.send(url, "a")
    aws.put("dup-rate", "a")
    sqs_mapping = aws.mapping(arn, BatchSize=10)
    stream_mapping = aws.mapping(stream, StartingPosition="TRIM_HORIZON")
    esm = engine()
    assert wait_for(lambda: esm.idle() and len(runtime.calls) == 4)
    for mapping in (sqs_mapping, stream_mapping):
        stats = stats_of(esm, mapping)
        assert (stats["invocations"], stats["duplicates"]) == (2, 1)
    assert aws.counts(url) == (0, 0)
