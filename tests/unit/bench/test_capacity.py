"""The capacity model (bench/capacity.py, issue 28): its calls per contact are the bench's (a
fresh in-process run of P2 and P3 against bench/results.json: the drift test), what it says
follows from them and the template's settings, the settings it recommends fit the load it
recommends them for, and docs/performance.md shows what the command prints."""

import pytest

from bench import capacity, exactly_once_cost, ingest_cost
from emulator.delivery.mappings import MappingConfig

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/contacts/stream/2026-11-29T00:00:00.000"
DRIFT_RECORDS = 1_000  # P2's object is 10,000 records; per-contact counts do not depend on it


@pytest.fixture(scope="module")
def counts() -> capacity.Counts:
    return capacity.measured_counts()


@pytest.fixture(scope="module")
def settings() -> capacity.Settings:
    return capacity.read_settings()


def test_the_models_calls_per_contact_are_what_the_bench_measures_now(monkeypatch):
    """Fails when the code's calls drift from bench/results.json (then `make bench` again)."""
    recorded = capacity.read_results()
    monkeypatch.setattr(ingest_cost, "RECORDS", DRIFT_RECORDS)
    fresh = [f.as_dict() for f in ingest_cost.run() + exactly_once_cost.run()]

    assert capacity.ingest_counts(fresh) == capacity.ingest_counts(recorded)
    assert capacity.consumer_counts(fresh) == capacity.consumer_counts(recorded)


def test_last_agent_writes_one_transaction_of_two_items_per_contact_and_reads_nothing():
    measured = capacity.measure_last_agent()

    assert measured == {
        "last_agent_transactions_per_contact": 1.0,
        "last_agent_items_per_transaction": 2.0,
        "last_agent_requests_per_contact": 1.0,
    }


def test_the_settings_are_the_templates(settings):
    mappings = settings.mappings
    assert mappings["NotificationQueueMapping"] == capacity.Mapping(10, 1, 5)
    assert mappings["IngestQueueMapping"] == capacity.Mapping(5, 1, 5)
    assert mappings["LastAgentStreamMapping"] == capacity.Mapping(100, 1, None)
    assert mappings["ChangePipe"].batch_size == 10
    assert settings.fifo_scope == "MessageGroup"
    assert settings.memory_gb == 0.25


@pytest.mark.parametrize("mode", capacity.MODES)
def test_demand_grows_with_the_rate_and_fixed_counts_do_not(counts, settings, mode):
    low = capacity.plan(50, mode, counts, settings, 10_000)
    high = capacity.plan(500, mode, counts, settings, 10_000)

    for before, after in zip(low.lines, high.lines, strict=True):
        assert before.what.split(" (")[0] == after.what.split(" (")[0]
        if before.rate_bound:
            assert after.demand == pytest.approx(10 * before.demand)
        else:
            assert after.demand == before.demand
    assert high.costs == low.costs  # per million contacts: the rate does not change the price


def test_the_first_bottleneck_at_each_rate(counts, settings):
    at_50 = capacity.plan(50, "lambda", counts, settings, 10_000)
    at_500 = capacity.plan(500, "router", counts, settings, 10_000)
    at_5000 = capacity.plan(5_000, "lambda", counts, settings, 10_000)

    assert at_50.bottleneck.utilisation < 1
    assert at_50.changes == [
        "three stream mappings exceed DynamoDB Streams' two readers per shard at any rate: "
        "past two consumers use FanOut=router or pipe (docs/design.md, Which to pick)"
    ]
    assert [line.what for line in at_50.over_at_any_rate] == [
        "readers per shard (one per stream mapping)"
    ]
    # a transaction per contact for two thirds of them (the voice legs with an agent and a
    # caller, of Connect's records), five batches at a time from the queue
    assert (at_500.bottleneck.service, at_500.bottleneck.what) == (
        "Lambda (SQS)",
        "LastAgentFunction concurrent batches",
    )
    assert at_500.bottleneck.utilisation > 1.5
    # at 5,000/s the table has ~40 partitions, so the stream gives LastAgent 40 lanes; the
    # notifier's queue still has five
    assert at_5000.bottleneck.what == "NotifierFunction concurrent batches"
    assert at_5000.bottleneck.utilisation > 10


@pytest.mark.parametrize("mode", capacity.MODES)
@pytest.mark.parametrize("rate", capacity.DOC_RATES)
def test_the_settings_it_recommends_carry_the_load(counts, settings, mode, rate):
    first = capacity.plan(rate, mode, counts, settings, 10_000)
    tuned = capacity.Settings(
        {**settings.mappings, **first.tuned}, settings.fifo_scope, settings.memory_gb
    )
    second = capacity.plan(rate, mode, counts, tuned, 10_000)

    functions = [line for line in second.lines if line.service.startswith("Lambda (")]
    assert all(line.utilisation <= capacity.TARGET_UTILISATION for line in functions), [
        (line.what, line.utilisation) for line in functions
    ]
    assert second.tuned == {}


def test_contacts_table_nears_its_quota_at_5000_per_second(counts, settings):
    result = capacity.plan(5_000, "lambda", counts, settings, 10_000)
    table = next(line for line in result.lines if line.what == "ContactsTable write units")

    # ingest: 2 items per contact in a transaction (2 WCU each); LastAgent: 2 more items for
    # two thirds of the contacts (Connect's records: chats, tasks, abandoned and self-service
    # legs set no last agent); Goodwill's gift card 1 WCU for 18%
    assert 0.8 < table.utilisation < 1
    assert any("table-level write throughput quota" in change for change in result.changes)


def test_a_hot_caller_is_bounded_by_its_partition(counts):
    lines = capacity.plan(50, "pipe", counts, capacity.read_settings(), 10_000).hot_key

    assert "costs its partition 6 WCU" in lines[0]
    assert "~167 contacts/s" in lines[0]
    assert "TransactionConflict" in lines[2] and "LastAgentDeadLetterQueue" in lines[2]


@pytest.mark.parametrize("factor", [None, 0, 1, 4, 10, 11])
def test_per_shard_concurrency_is_what_the_local_stack_runs(factor):
    api = {"UUID": "m-1", "EventSourceArn": STREAM_ARN, "State": "Enabled"}
    if factor is not None:
        api["ParallelizationFactor"] = factor

    assert MappingConfig.from_api(api).parallelization == capacity.stream_lanes(factor)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fan-out", "lambda"], "--contacts-per-second is required"),
        (["--contacts-per-second", "0"], "must be positive"),
        (["--contacts-per-second", "10", "--fan-out", "kinesis"], "invalid choice"),
        (["--contacts-per-second", "10", "--contacts-per-file", "0"], "must be positive"),
    ],
)
def test_bad_arguments_are_refused_with_a_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        capacity.main(argv)

    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_command_prints_the_plan(capsys):
    assert capacity.main(["--contacts-per-second", "500", "--fan-out", "router"]) == 0
    out = capsys.readouterr().out

    assert "Capacity plan: 500 contacts/s, FanOut=router" in out
    assert "first bottleneck: Lambda (SQS) LastAgentFunction concurrent batches" in out
    assert "SNS ChangeTopic (Publish)" in out
    assert "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html" in out


def test_docs_performance_shows_what_the_command_prints(counts, settings):
    text = (capacity.ROOT / "docs" / "performance.md").read_text()
    begin, end = "<!-- capacity table: begin -->", "<!-- capacity table: end -->"
    assert begin in text and end in text, "docs/performance.md lacks the capacity table"
    shown = text.split(begin)[1].split(end)[0].strip()

    assert shown == capacity.markdown(counts, settings, ingest_cost.RECORDS)
