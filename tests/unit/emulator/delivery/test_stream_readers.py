"""Two readers per shard: three stream mappings on one DynamoDB stream (FanOut=lambda's shape).

DynamoDB Streams throttles GetRecords when more than two processes read one shard; the pollers
here read moto's real stream in process (StreamSource) and the third reader backs off and retries.
The runtime (tests/unit/emulator/delivery/support.FakeRuntime) stands for the functions: it
records each invocation.
"""

import functools
import json
import logging
import time

import boto3
import pytest
from moto import mock_aws

from emulator.core.faults import Faults
from emulator.delivery.mappings import EngineContext, MappingConfig, MappingStats
from emulator.delivery.sources import StreamSource
from emulator.delivery.stream_poller import StreamMappingPoller
from emulator.process import REGION
from emulator.services import dynamodbstreams
from emulator.services.dynamodbstreams import READ_LEASE, ShardReaders, shard_readers
from harness.in_process import create_stream_table
from harness.polling import eventually
from tests.unit.emulator.delivery.support import FakeRuntime

pytestmark = pytest.mark.usefixtures("moto_patched")

wait_for = functools.partial(eventually, timeout=60.0, interval=0.05)
KEYS = [f"customer-{n}" for n in range(10)]


class TimedRuntime(FakeRuntime):
    """FakeRuntime that also notes when each function received each change."""

    def __init__(self, functions: list[str]):
        super().__init__()
        self.received: dict[str, list[tuple[str, float]]] = {name: [] for name in functions}

    def invoke(self, function_name: str, event):
        result = super().invoke(function_name, event)
        now = time.monotonic()
        records = (json.loads(event) if isinstance(event, bytes) else event)["Records"]
        with self.lock:
            for record in records:
                image = record["dynamodb"]["NewImage"]
                change = f"{image['pk']['S']}/{image['v']['N']}"
                self.received[function_name].append((change, now))
        return result


class Consumers:
    """One table with a one-shard stream, and a stream mapping per consumer function on it."""

    def __init__(self, functions: list[str]):
        self.ddb = boto3.client("dynamodb", region_name=REGION)
        with pytest.MonkeyPatch.context() as patch:  # read once, when the stream is first used
            patch.setenv(dynamodbstreams.SHARDS_ENV, "1")
            self.arn = create_stream_table(self.ddb, "contacts")
            self.shard_id = StreamSource(self.arn).shards()[0].shard_id
        self.written: dict[str, float] = {}  # "pk/version" -> when it was written
        self.runtime = TimedRuntime(functions)
        self.received = self.runtime.received
        self.pollers = [self._poller(n, name) for n, name in enumerate(functions)]

    def _poller(self, n: int, function: str) -> StreamMappingPoller:
        ctx = EngineContext(
            self.runtime,
            Faults(),
            region=REGION,
            endpoint_url=None,
            retry_delay=0.01,
            max_sqs_pollers=10,
        )
        config = MappingConfig.from_api(
            {
                "UUID": f"mapping-{n:04d}",
                "EventSourceArn": self.arn,
                "FunctionArn": f"arn:aws:lambda:{REGION}:123456789012:function:{function}",
                "State": "Enabled",
                "StartingPosition": "TRIM_HORIZON",
                "BatchSize": 10,
            }
        )
        poller = StreamMappingPoller(
            ctx, config, MappingStats(config), StreamSource, lambda arn: "pk"
        )
        poller.reconcile()
        return poller

    def write(self, count: int, interval: float) -> list[str]:
        """``count`` changes, ``interval`` seconds apart: versions of KEYS in turn."""
        changes = []
        for n in range(count):
            change = f"{KEYS[n % len(KEYS)]}/{n // len(KEYS)}"
            self.written[change] = time.monotonic()
            self.ddb.put_item(
                TableName="contacts",
                Item={
                    "pk": {"S": KEYS[n % len(KEYS)]},
                    "sk": {"S": "contact"},
                    "v": {"N": str(n // len(KEYS))},
                },
            )
            changes.append(change)
            if interval:
                time.sleep(interval)  # the traffic's pace, not a wait for an outcome
        return changes

    def delivered(self, function: str) -> list[str]:
        return [change for change, _ in self.received[function]]

    def ages(self, function: str) -> list[float]:
        """Seconds from each change's write to its invocation (the iterator age it had)."""
        return [at - self.written[change] for change, at in self.received[function]]

    def stop(self) -> None:
        for poller in self.pollers:
            poller.stop()
        for poller in self.pollers:
            poller.join(3)


@pytest.fixture
def consumers(module_credentials):
    made: list[Consumers] = []

    def start(*functions: str) -> Consumers:
        made.append(Consumers(list(functions)))
        return made[-1]

    with mock_aws():
        yield start
        for stack in made:
            stack.stop()


def test_three_mappings_each_get_every_change_in_order_and_the_third_reader_is_throttled(
    consumers,
):
    stack = consumers("last-agent", "survey", "goodwill")
    changes = stack.write(60, 0.0)

    for function in stack.received:
        wait_for(lambda f=function: len(stack.delivered(f)) >= len(changes))
        assert stack.delivered(function) == changes  # none lost, none twice, in write order
    assert shard_readers(stack.arn, stack.shard_id).throttled > 0


def test_two_mappings_on_one_stream_are_never_throttled(consumers):
    stack = consumers("last-agent", "survey")
    changes = stack.write(60, 0.0)

    for function in stack.received:
        wait_for(lambda f=function: len(stack.delivered(f)) >= len(changes))
        assert stack.delivered(function) == changes
    assert shard_readers(stack.arn, stack.shard_id).throttled == 0


def test_a_third_mapping_on_a_stream_is_a_warning_naming_the_stream_and_the_functions(
    consumers, caplog
):
    with caplog.at_level(logging.WARNING, logger="emulator.esm"):
        stack = consumers("last-agent", "survey")
        assert not [r for r in caplog.records if "readers per shard" in r.getMessage()]
        stack.pollers.append(stack._poller(2, "goodwill"))

    warnings = [r.getMessage() for r in caplog.records if "readers per shard" in r.getMessage()]
    assert len(warnings) == 1
    assert "table/contacts/stream/" in warnings[0]
    assert "3 event source mappings (goodwill, last-agent, survey)" in warnings[0]


def test_the_throttled_reader_takes_the_next_free_slot():
    readers = ShardReaders()
    assert readers.admit("a", now=0.0)
    assert readers.admit("b", now=0.0)
    assert not readers.admit("c", now=0.1)
    # While c waits the holders read on, but their leases are not renewed
    assert readers.admit("a", now=0.2)
    assert not readers.admit("c", now=0.2)
    # Both leases end: a takes one slot again, the other is kept for c, not b
    assert readers.admit("a", now=READ_LEASE + 0.01)
    assert not readers.admit("b", now=READ_LEASE + 0.02)
    assert readers.admit("c", now=READ_LEASE + 0.03)
    assert not readers.admit("b", now=READ_LEASE + 0.04)
    assert readers.throttled == 4


def test_a_reader_alone_keeps_its_slot_while_it_reads():
    readers = ShardReaders()
    for step in range(10):
        assert readers.admit("a", now=step * READ_LEASE * 0.9)
    assert readers.throttled == 0


def test_with_three_readers_every_consumer_gets_changes_while_they_are_still_written(consumers):
    stack = consumers("last-agent", "survey", "goodwill")
    changes = stack.write(20, 0.05)  # one second of traffic
    last_write = max(stack.written.values())

    for function in stack.received:
        wait_for(lambda f=function: len(stack.delivered(f)) >= len(changes))
        first_delivery = stack.received[function][0][1]
        assert first_delivery < last_write  # no reader waits for the traffic to stop
        assert max(stack.ages(function)) < 5.0  # a throttled reader's delay is bounded
