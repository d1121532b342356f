"""shared.batches.table_changes: the consumers take a change from the stream or from their queue
alike, each failure points at its own item, a body that is not a change fails alone, and a change
that arrives both ways, repeated and out of order, still has one effect."""

import json

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from shared import keys, rules
from shared.batches.table_changes import TableChanges

from harness.events import contact, failed_ids, sqs_bodies_event, stream_event, stream_record
from harness.in_process import cold_start
from tests.unit.fanout.fanout_template import bus_event
from tests.unit.fanout.helpers import notify_all

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:last-agent-routing-SurveyQueue"
RESOLVED = contact("c-resolved", survey_opt_in=True)
ABANDONED = contact(
    "c-abandoned", caller="+14155550102", disposition=rules.ABANDONED, agent_id=None
)


def queue_event(*records: dict) -> dict:
    """The queue event of the given stream records, each body the record as JSON (pipe: the
    rule's InputPath $.detail; router: raw delivery of the published record)."""
    return sqs_bodies_event([json.dumps(r) for r in records], QUEUE_ARN)


class Recorder:
    """A record_handler that keeps what it was handed and fails the records it is told to."""

    def __init__(self, failing: set[str] = frozenset()):
        self.records = []
        self.failing = failing

    def __call__(self, record) -> None:
        self.records.append(record)
        if record.event_id in self.failing:
            raise RuntimeError("downstream unavailable")


def test_stream_and_queue_hand_over_the_same_records(lambda_context):
    records = [stream_record(RESOLVED), stream_record(ABANDONED)]
    by_stream, by_queue = Recorder(), Recorder()

    assert TableChanges(by_stream).process(stream_event(*records), lambda_context) == {
        "batchItemFailures": []
    }
    assert TableChanges(by_queue).process(queue_event(*records), lambda_context) == {
        "batchItemFailures": []
    }

    assert [r.raw_event for r in by_stream.records] == records
    assert [r.raw_event for r in by_queue.records] == records
    for streamed, queued in zip(by_stream.records, by_queue.records, strict=True):
        assert (queued.event_id, queued.event_name) == (streamed.event_id, streamed.event_name)
        assert queued.dynamodb.new_image == streamed.dynamodb.new_image
        assert queued.dynamodb.sequence_number == streamed.dynamodb.sequence_number


def test_a_failed_stream_record_is_reported_by_its_sequence_number(lambda_context):
    records = [stream_record(RESOLVED), stream_record(ABANDONED), stream_record(RESOLVED)]
    handler = Recorder(failing={records[1]["eventID"]})

    response = TableChanges(handler).process(stream_event(*records), lambda_context)

    assert failed_ids(response) == [records[1]["dynamodb"]["SequenceNumber"]]
    assert len(handler.records) == 3  # the others were processed


def test_a_failed_queue_message_is_reported_by_its_message_id(lambda_context):
    records = [stream_record(RESOLVED), stream_record(ABANDONED), stream_record(RESOLVED)]
    handler = Recorder(failing={records[1]["eventID"]})

    response = TableChanges(handler).process(queue_event(*records), lambda_context)

    assert failed_ids(response) == ["msg-1"]
    assert len(handler.records) == 3


HOSTILE_BODIES = {
    "empty": "",
    "text": "Hello from SQS!",
    "truncated": json.dumps(stream_record(RESOLVED))[:-9],
    "null": "null",
    "array": json.dumps([stream_record(RESOLVED)]),
    "string": json.dumps(json.dumps(stream_record(RESOLVED))),
    "number": "42",
    "object": "{}",
    "no dynamodb": json.dumps({"eventName": "INSERT", "eventID": "x"}),
    "dynamodb not an object": json.dumps({"eventName": "INSERT", "dynamodb": ["NewImage"]}),
    "no eventName": json.dumps(
        {k: v for k, v in stream_record(RESOLVED).items() if k != "eventName"}
    ),
    "unknown eventName": json.dumps({**stream_record(RESOLVED), "eventName": "TRUNCATE"}),
    "eventbridge envelope": json.dumps(bus_event(stream_record(RESOLVED))),
    "sns envelope": json.dumps(
        {"Type": "Notification", "Message": json.dumps(stream_record(RESOLVED))}
    ),
    "deep nesting": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=list(HOSTILE_BODIES))
def test_a_body_that_is_not_a_change_fails_only_its_message(lambda_context, body):
    good = [json.dumps(stream_record(RESOLVED)), json.dumps(stream_record(ABANDONED))]
    handler = Recorder()

    response = TableChanges(handler).process(
        sqs_bodies_event([good[0], body, good[1]], QUEUE_ARN), lambda_context
    )

    assert failed_ids(response) == ["msg-1"]
    assert [r.raw_event for r in handler.records] == [json.loads(b) for b in good]


def test_a_batch_of_only_bad_bodies_fails_whole(lambda_context):
    """Powertools' own rule: when every record fails, the invocation fails (the queue retries
    every message; each ends in the consumer's DLQ after maxReceiveCount)."""
    with pytest.raises(BatchProcessingError, match="All records failed"):
        TableChanges(Recorder()).process(sqs_bodies_event(["{}"], QUEUE_ARN), lambda_context)


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"Records": []},
        {"Records": {"0": {"eventSource": "aws:sqs"}}},
        {"Records": [{"eventSource": "aws:kinesis", "kinesis": {}}]},
        {"Records": [{"body": "{}"}]},
        {"Records": ["aws:sqs"]},
        {"Records": [stream_record(RESOLVED), queue_event(stream_record(RESOLVED))["Records"][0]]},
        {"detail": stream_record(RESOLVED)},
        [],
    ],
    ids=[
        "empty",
        "no records",
        "records not a list",
        "kinesis",
        "no source",
        "not objects",
        "mixed sources",
        "eventbridge",
        "not an object",
    ],
)
def test_an_event_of_no_known_shape_is_a_clear_error(lambda_context, event):
    handler = Recorder()
    with pytest.raises(ValueError, match=r"Records|eventSource"):
        TableChanges(handler).process(event, lambda_context)
    assert handler.records == []


def test_the_poison_log_line_names_the_message_only(stack, monkeypatch, lambda_context, capsys):
    survey = cold_start("survey", monkeypatch)
    poison = json.dumps({"caller": RESOLVED["caller"], "email": RESOLVED["email"]})

    response = survey.lambda_handler(
        sqs_bodies_event([json.dumps(stream_record(RESOLVED)), poison], QUEUE_ARN), lambda_context
    )

    assert failed_ids(response) == ["msg-1"]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    (logged,) = [line for line in lines if line.get("message_id") == "msg-1"]
    assert logged["level"] == "ERROR"
    assert logged["message"] == "queue message is not a stream record"
    assert logged["reason"] == "eventName is not one of INSERT, MODIFY, REMOVE"
    assert logged["service"] == survey.logger.service  # the handler's logger, its format
    text = json.dumps(lines)
    assert RESOLVED["email"] not in text
    assert RESOLVED["caller"] not in text


# --- one effect per change, however it arrives ------------------------------------------------

CALLER = "+14155550101"
OPTED_IN = contact("c-1", CALLER, "2026-11-29T09:00:00Z", survey_opt_in=True, agent_id="agent-a")
LONG_WAIT = contact("c-2", CALLER, "2026-11-29T10:00:00Z", wait_seconds=900, agent_id="agent-b")
GONE = contact("c-3", "+14155550103", disposition=rules.ABANDONED, agent_id=None)


def stored_last_agent(stack, caller: str) -> str | None:
    item = stack.dynamodb.get_item(
        TableName=stack.contacts_table,
        Key={name: {"S": value} for name, value in keys.last_agent_key(caller).items()},
    ).get("Item")
    return item and item["contact_id"]["S"]


def test_a_change_by_stream_and_by_queue_repeated_and_reordered_has_one_effect(
    stack, monkeypatch, lambda_context
):
    """lambda mode's deliveries and a queue mode's, as a switch of FanOut (or a redrive) could
    mix them: every change at least twice, by both shapes, in opposite orders."""
    records = [stream_record(c) for c in (OPTED_IN, LONG_WAIT, GONE)]
    for record in records:  # the items the records come from, as the ingest wrote them
        stack.dynamodb.put_item(TableName=stack.contacts_table, Item=record["dynamodb"]["NewImage"])
    deliveries = [
        stream_event(*records),
        queue_event(*reversed(records)),
        queue_event(records[1], records[1], records[0]),
        stream_event(*reversed(records)),
    ]
    for function in ("last_agent", "survey", "goodwill"):
        consumer = cold_start(function, monkeypatch)
        for event in deliveries:
            assert failed_ids(consumer.lambda_handler(event, lambda_context)) == []

    published = notify_all(stack, cold_start("notifier", monkeypatch), lambda_context)
    assert sorted(n["notification_id"] for n in published) == [
        keys.notification_id("GIFT_CARD", "c-2"),
        keys.notification_id("GIFT_CARD", "c-3"),
        keys.notification_id("SURVEY", "c-1"),
    ]
    assert stored_last_agent(stack, CALLER) == "c-2"  # the newer of the two with an agent
    assert stored_last_agent(stack, GONE["caller"]) is None  # abandoned: no agent
