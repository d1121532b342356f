"""`ops stream replay` of a filtered consumer's failed batch: the batch's sequence range holds
every change between its first and last record, the batch only what the consumer's filter
admits. The replay applies the mapping's FilterCriteria (ops.stream_filter, held here to the local
stack's full matcher on the template's filters), delivers in chunks of at most BatchSize records
and 6 MiB, and reports a failed chunk and goes on. Against moto in process, the real
SurveyFunction handler running the invocations (Invoke's 6 MiB limit as AWS applies it)."""

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared import keys

from emulator.core.filters import FilterCriteria
from emulator.lambda_.workers import InvokeResult
from emulator.services import context
from harness.in_process import FakeLambdaContext, client, cold_start
from ops import replay
from ops.stream_filter import StreamFilter, UnsupportedFilter
from tests.unit.fanout.fanout_template import resources
from tests.unit.fanout.strategies import stream_records

FUNCTION = "unit-SurveyFunction"
MIB = 1024 * 1024
CALLER = "+15550000001"

# --- the filter: as Lambda (the local stack's matcher) applies the template's filters ----------


def template_filters() -> dict[str, dict]:
    """Every stream reader's FilterCriteria in template.yaml: the consumers' and the router's
    mappings, the pipe's."""
    found = resources()
    criteria = {
        name: found[name]["Properties"]["FilterCriteria"]
        for name in found
        if name.endswith("StreamMapping")
    }
    criteria["ChangePipe"] = found["ChangePipe"]["Properties"]["SourceParameters"]["FilterCriteria"]
    return criteria


READERS = template_filters()


@pytest.mark.parametrize("reader", sorted(READERS))
@settings(max_examples=300, deadline=None)
@given(record=stream_records())
def test_the_replay_filter_admits_what_lambda_admits(reader, record):
    criteria = READERS[reader]
    assert StreamFilter.of(criteria).admits(record) is FilterCriteria.from_mapping(
        criteria
    ).matches(record)


def pattern(document: dict) -> StreamFilter:
    return StreamFilter.of({"Filters": [{"Pattern": json.dumps(document)}]})


@pytest.mark.parametrize(
    ("document", "record", "expected"),
    [
        ({"x": {"BOOL": [True]}}, {"x": {"BOOL": True}}, True),
        ({"x": {"BOOL": [True]}}, {"x": {"S": "true"}}, False),  # typed: a string is no boolean
        ({"x": {"BOOL": [True]}}, {"x": {"N": "1"}}, False),
        ({"x": {"S": [{"exists": True}]}}, {"x": {"S": ""}}, True),
        ({"x": [{"exists": True}]}, {"x": {"S": "a"}}, False),  # an object is no leaf
        ({"x": [{"exists": False}]}, {"x": {"S": "a"}}, True),
        ({"x": {"S": [{"exists": False}]}}, {}, True),
        ({"x": {"S": [{"anything-but": ["A"]}]}}, {"x": {"S": "B"}}, True),
        ({"x": {"S": [{"anything-but": ["A"]}]}}, {"x": {"S": "A"}}, False),
        ({"x": {"S": [{"anything-but": ["A"]}]}}, {}, False),  # absent is not "anything"
        ({"x": {"SS": ["b"]}}, {"x": {"SS": ["a", "b"]}}, True),  # any element of an array
        ({"x": ["a", None]}, {"x": None}, True),
    ],
)
def test_the_filter_language_cases(document, record, expected):
    assert pattern(document).admits(record) is expected
    assert (
        FilterCriteria.from_mapping({"Filters": [{"Pattern": json.dumps(document)}]}).matches(
            record
        )
        is expected
    )


@pytest.mark.parametrize(
    "document",
    [
        {"x": [1]},
        {"x": [{"prefix": "a"}]},
        {"x": [{"numeric": [">", 1]}]},
        {"$or": [{"x": ["a"]}, {"y": ["b"]}]},
        {"x": [{"anything-but": [1]}]},
        {"x": "a"},
        {"x": []},
    ],
)
def test_a_filter_ops_does_not_apply_is_refused_not_guessed(document):
    with pytest.raises(UnsupportedFilter):
        pattern(document)


def test_no_filter_admits_every_record():
    assert StreamFilter.of(None).admits({"eventName": "REMOVE"})


# --- chunks: BatchSize and Invoke's limit ---------------------------------------------------------


@settings(deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), max_size=40),
    batch_size=st.integers(1, 12),
    limit=st.integers(400, 2000),
)
def test_chunks_keep_order_and_stay_within_batch_size_and_limit(sizes, batch_size, limit):
    records = [{"n": n, "pad": "x" * size} for n, size in enumerate(sizes)]
    payloads = replay.chunks(records, batch_size, limit)
    delivered = [json.loads(p)["Records"] for p in payloads]
    assert [r for chunk in delivered for r in chunk] == records
    assert all(0 < len(chunk) <= batch_size for chunk in delivered)
    assert all(len(p) <= limit for p in payloads)


# --- the replay, in moto, with the real SurveyFunction -------------------------------------------


class SurveyRuntime:
    """The Lambda runtime of the local stack for one function, run in process: each Invoke runs
    the real SurveyFunction handler. ``crash`` names invocations (1 = the first) that crash."""

    def __init__(self, monkeypatch, crash=()):
        self.handler = cold_start("survey", monkeypatch)
        self.crash = set(crash)
        self.payload_sizes: list[int] = []

    def resolve(self, function_name: str):
        return object() if function_name == FUNCTION else None

    def invoke(self, function_name: str, event: bytes) -> InvokeResult:
        self.payload_sizes.append(len(event))
        if len(self.payload_sizes) in self.crash:
            document = {"errorType": "Sandbox.Timedout", "errorMessage": "timed out"}
            return InvokeResult(False, None, document, raw=json.dumps(document).encode())
        response = self.handler.lambda_handler(json.loads(event), FakeLambdaContext())
        return InvokeResult(True, response, None, raw=json.dumps(response).encode())


@pytest.fixture
def survey_runtime(ops_stack, monkeypatch):
    """SurveyFunction as deployed: the function and its stream mapping (the template's filter
    and BatchSize) in moto, its invocations run by ``SurveyRuntime``."""
    lam, iam = client("lambda"), client("iam")
    role = iam.create_role(RoleName="survey-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam.create_function(
        FunctionName=FUNCTION,
        Runtime="python3.13",
        Role=role,
        Handler="app.lambda_handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    mapping = resources()["SurveyStreamMapping"]["Properties"]
    lam.create_event_source_mapping(
        FunctionName=FUNCTION,
        EventSourceArn=stream_arn(ops_stack),
        StartingPosition="TRIM_HORIZON",
        BatchSize=mapping["BatchSize"],
        FilterCriteria=json.loads(json.dumps(mapping["FilterCriteria"])),
        Enabled=False,  # nothing polls here: the replay is the only delivery
    )

    def start(crash=()):
        runtime = SurveyRuntime(monkeypatch, crash)
        context.set_runtime(runtime)
        return runtime

    yield start
    context.set_runtime(None)


def stream_arn(ops_stack) -> str:
    return client("dynamodb").describe_table(TableName=ops_stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]


def write_contacts(ops_stack, count: int, survey_every: int, pad: int) -> list[str]:
    """``count`` first exports of contacts of one caller (one partition key: one shard holds
    them, as one shard holds a failed batch), every ``survey_every``-th one due a survey, each
    with ``pad`` characters of other data; the ids of those due a survey."""
    surveys = []
    requests = []
    for n in range(count):
        contact_id = f"c-{n:05d}"
        due = n % survey_every == 0
        item = {
            "pk": {"S": keys.caller_pk(CALLER)},
            "sk": {"S": keys.contact_sk(f"2026-11-29T10:{n // 1000:02d}:00.000Z", contact_id)},
            "type": {"S": keys.CONTACT},
            "contact_id": {"S": contact_id},
            "caller": {"S": CALLER},
            "agent_id": {"S": "agent-7"},
            "queue": {"S": "q" * pad},
            "started_at": {"S": "2026-11-29T10:00:00.000Z"},
            "ended_at": {"S": "2026-11-29T10:05:00.000Z"},
            "disposition": {"S": "RESOLVED"},
            "wait_seconds": {"N": "30"},
            "survey_opt_in": {"BOOL": due},
            "long_wait": {"BOOL": False},
            "first_export": {"BOOL": True},
            "email": {"S": f"customer{n}@example.com"},
        }
        surveys += [contact_id] if due else []
        requests.append({"PutRequest": {"Item": item}})
    dynamodb = client("dynamodb")
    for start in range(0, len(requests), 25):
        dynamodb.batch_write_item(
            RequestItems={ops_stack.contacts_table: requests[start : start + 25]}
        )
    return surveys


def fail_batch_of(ops_stack, first_id: str, last_id: str) -> tuple[int, int]:
    """SurveyFunction's failure record in StreamFailureQueue for the batch from the record of
    contact ``first_id`` to that of ``last_id``: its sequence range, as Lambda writes it; the
    range's records, and its bytes as one Invoke payload."""
    arn = stream_arn(ops_stack)
    streams = client("dynamodbstreams")
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator and (page := streams.get_records(ShardIterator=iterator))["Records"]:
            records += page["Records"]
            iterator = page.get("NextShardIterator")
        if records:  # the caller's shard
            break
    ids = [r["dynamodb"]["NewImage"]["contact_id"]["S"] for r in records]
    in_range = records[ids.index(first_id) : ids.index(last_id) + 1]
    ops_stack.sqs.send_message(
        QueueUrl=ops_stack.outputs["StreamFailureQueueUrl"],
        MessageBody=json.dumps(
            {
                "requestContext": {
                    "functionArn": f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}"
                },
                "DDBStreamBatchInfo": {
                    "shardId": shard["ShardId"],
                    "startSequenceNumber": in_range[0]["dynamodb"]["SequenceNumber"],
                    "endSequenceNumber": in_range[-1]["dynamodb"]["SequenceNumber"],
                    "approximateArrivalOfFirstRecord": datetime.now(UTC).isoformat(),
                    "batchSize": 100,
                    "streamArn": arn,
                },
            }
        ),
    )
    unfiltered = json.dumps({"Records": [replay.lambda_record(r, arn) for r in in_range]})
    return len(in_range), len(unfiltered.encode())


def surveys_enqueued(stack) -> list[str]:
    return [json.loads(m["Body"])["contact_id"] for m in stack.drain(stack.notification_queue_url)]


def test_a_filtered_batch_whose_range_is_over_6_mib_is_replayed_filtered(
    ops_stack, stack, survey_runtime
):
    """100 surveys at a 2% survey rate: the range is 4,951 changes, over 6 MiB unfiltered."""
    surveys = write_contacts(ops_stack, 4951, survey_every=50, pad=1000)
    assert len(surveys) == 100
    read, unfiltered_bytes = fail_batch_of(ops_stack, surveys[0], surveys[-1])
    assert unfiltered_bytes > 6 * MIB
    runtime = survey_runtime()

    data, text, ok = replay.replay(ops_stack, dry_run=False, function=None)

    [batch] = data["batches"]
    assert ok and batch["outcome"] == "replayed", text
    assert (batch["read"], batch["records"], batch["chunks"]) == (read, 100, 1)
    assert all(size <= 6 * MIB for size in runtime.payload_sizes)
    assert sorted(surveys_enqueued(stack)) == surveys
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 0


def test_records_over_6_mib_after_the_filter_are_delivered_in_chunks_under_it(
    ops_stack, stack, survey_runtime
):
    """100 surveys of ~100 KB each: the filtered batch alone is ~10 MiB."""
    surveys = write_contacts(ops_stack, 100, survey_every=1, pad=100_000)
    fail_batch_of(ops_stack, surveys[0], surveys[-1])
    runtime = survey_runtime()

    data, text, ok = replay.replay(ops_stack, dry_run=False, function=None)

    [batch] = data["batches"]
    assert ok and batch["outcome"] == "replayed", text
    assert batch["records"] == 100 and batch["chunks"] == len(runtime.payload_sizes) == 2
    assert sum(runtime.payload_sizes) > 6 * MIB
    assert all(size <= 6 * MIB for size in runtime.payload_sizes)
    assert sorted(surveys_enqueued(stack)) == surveys


def test_a_failed_chunk_is_reported_the_next_delivered_and_the_batch_kept(
    ops_stack, stack, survey_runtime
):
    surveys = write_contacts(ops_stack, 100, survey_every=1, pad=100_000)
    fail_batch_of(ops_stack, surveys[0], surveys[-1])
    survey_runtime(crash={1})

    data, text, ok = replay.replay(ops_stack, dry_run=False, function=None)

    [batch] = data["batches"]
    assert not ok and batch["outcome"] == "failed" and batch["chunks_failed"] == 1
    assert "chunk 1 of 2: function error Sandbox.Timedout" in text
    delivered = surveys_enqueued(stack)
    assert 0 < len(delivered) < 100 and delivered == surveys[-len(delivered) :]  # chunk 2's
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 1  # kept for another replay

    survey_runtime()  # the function works again: the kept batch replays whole
    data, _, ok = replay.replay(ops_stack, dry_run=False, function=None)
    assert ok and [b["outcome"] for b in data["batches"]] == ["replayed"]
    assert sorted(surveys_enqueued(stack)) == surveys
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 0


def test_a_dry_run_says_how_many_of_the_range_the_filter_admits(ops_stack, survey_runtime):
    surveys = write_contacts(ops_stack, 200, survey_every=50, pad=10)
    read, _ = fail_batch_of(ops_stack, surveys[0], surveys[-1])
    runtime = survey_runtime()

    data, text, ok = replay.replay(ops_stack, dry_run=True, function=None)

    [batch] = data["batches"]
    assert ok and batch["outcome"] == "would replay" and runtime.payload_sizes == []
    assert (batch["read"], batch["records"]) == (read, 4) and f"4 of {read}" in text
