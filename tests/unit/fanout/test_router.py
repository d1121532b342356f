"""RouterFunction (FanOut=router): every stream record published once to ChangeTopic, and through
the subscriptions (raw delivery, the template's filter policies) each consumer's queue gets
exactly the records its stream filter admits, each body the record as the stream gave it, which
the consumer then takes as it takes a stream record. A failed publish fails its record only."""

import json

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from hypothesis import HealthCheck, given, settings
from shared import contacts, rules

from harness.events import contact, failed_ids, sqs_event, stream_event, stream_record
from harness.in_process import client, cold_start
from tests.faults import throttle
from tests.unit.fanout.fanout_template import CONSUMERS, selections
from tests.unit.fanout.helpers import SAMPLES, notify_all, queue_arn
from tests.unit.fanout.strategies import stream_records

FUNCTION_DIRS = {
    "LastAgentFunction": "last_agent",
    "SurveyFunction": "survey",
    "GoodwillFunction": "goodwill",
}


@pytest.fixture
def queues(stack, monkeypatch) -> dict[str, str]:
    """ChangeTopic and the consumers' queues subscribed as template.yaml subscribes them."""
    sns = client("sns")
    topic_arn = sns.create_topic(Name="changes")["TopicArn"]
    monkeypatch.setenv("CHANGE_TOPIC_ARN", topic_arn)
    urls = {}
    for consumer, prefix in CONSUMERS.items():
        urls[consumer] = stack.sqs.create_queue(QueueName=f"{prefix}-queue")["QueueUrl"]
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn(stack, urls[consumer]),
            Attributes={
                "RawMessageDelivery": "true",
                "FilterPolicyScope": "MessageAttributes",
                "FilterPolicy": json.dumps(selections()[consumer].subscription_policy),
            },
        )
    return urls


@pytest.fixture
def router(queues, monkeypatch):
    return cold_start("router", monkeypatch)


def delivered(stack, queues) -> dict[str, list[dict]]:
    """Consumer -> the messages in its queue (removed)."""
    return {consumer: stack.drain(url) for consumer, url in queues.items()}


def bodies(messages: list[dict]) -> list[str]:
    return sorted(m["Body"] for m in messages)


def admitted_by_streams(records: list[dict]) -> dict[str, list[str]]:
    return {
        consumer: sorted(json.dumps(r) for r in records if selection.stream.matches(r))
        for consumer, selection in selections().items()
    }


RESOLVED = contact("c-1", survey_opt_in=True)
ABANDONED = contact("c-2", caller="+14155550102", disposition=rules.ABANDONED, agent_id=None)
LONG_WAIT = contact("c-3", caller="+14155550103", wait_seconds=900)
CORRECTED = contact("c-1", survey_opt_in=True, first_export=False, agent_id="agent-9")


def test_each_queue_gets_the_records_its_stream_filter_admits(
    stack, queues, router, lambda_context, monkeypatch, capsys
):
    records = [
        *SAMPLES,
        stream_record(RESOLVED),
        stream_record(ABANDONED),
        stream_record(LONG_WAIT),
        stream_record(CORRECTED, event_name="MODIFY", old_image=RESOLVED),
        stream_record(LONG_WAIT, event_name="REMOVE", old_image=LONG_WAIT),
    ]

    response = router.lambda_handler(stream_event(*records), lambda_context)

    assert failed_ids(response) == []
    messages = delivered(stack, queues)
    assert {c: bodies(m) for c, m in messages.items()} == admitted_by_streams(records)
    assert all(messages.values())  # every consumer got something
    out = capsys.readouterr().out
    assert f'"ChangesPublished":[{",".join(["1.0"] * len(records))}]' in out
    for record in records:
        for image in (record["dynamodb"].get("NewImage"), record["dynamodb"].get("OldImage")):
            for field in ("caller", "email", "agent_id"):
                if image and field in image:
                    assert image[field]["S"] not in out  # logs name event ids only


def test_the_consumers_take_the_routed_changes_as_they_take_the_stream(
    stack, queues, router, lambda_context, monkeypatch
):
    records = [
        stream_record(RESOLVED),
        stream_record(ABANDONED),
        stream_record(LONG_WAIT),
        stream_record(CORRECTED, event_name="MODIFY", old_image=RESOLVED),
    ]
    assert failed_ids(router.lambda_handler(stream_event(*records), lambda_context)) == []

    for consumer, messages in delivered(stack, queues).items():
        handler = cold_start(FUNCTION_DIRS[consumer], monkeypatch)
        event = sqs_event(messages, queue_arn(stack, queues[consumer]))
        assert handler.lambda_handler(event, lambda_context) == {"batchItemFailures": []}

    published = notify_all(stack, cold_start("notifier", monkeypatch), lambda_context)
    assert sorted(n["notification_id"] for n in published) == [
        "GIFT_CARD#c-2",
        "GIFT_CARD#c-3",
        "SURVEY#c-1",
    ]


def test_a_failed_publish_fails_only_its_record_and_its_retry_delivers(
    stack, queues, router, lambda_context
):
    records = [stream_record(RESOLVED), stream_record(ABANDONED), stream_record(LONG_WAIT)]
    throttled = throttle(router, "sns:Publish", 1)  # the first record's publish

    response = router.lambda_handler(stream_event(*records), lambda_context)

    assert throttled.left == 0
    assert failed_ids(response) == [records[0]["dynamodb"]["SequenceNumber"]]
    first = delivered(stack, queues)
    assert json.dumps(records[0]) not in {m["Body"] for ms in first.values() for m in ms}
    assert bodies(first["GoodwillFunction"]) == sorted(json.dumps(r) for r in records[1:])

    # the stream retries from the failed record: it (and what follows it) is published again
    assert failed_ids(router.lambda_handler(stream_event(*records), lambda_context)) == []
    again = delivered(stack, queues)
    assert bodies(again["SurveyFunction"]) == [json.dumps(records[0])]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=stream_records())
def test_through_moto_sns_each_record_reaches_exactly_its_consumers(
    stack, queues, router, lambda_context, record
):
    """The key proof's equivalence, through Publish and moto's subscriptions (the emulator's
    filter policy matcher) rather than the matchers alone. SNS refuses an empty attribute value:
    a CONTACT whose disposition is an empty string (ingest never writes one) fails its publish,
    so it is retried and ends in StreamFailureQueue, never dropped silently."""
    if "" in contacts.change_attributes(DynamoDBRecord(record)).values():
        with pytest.raises(BatchProcessingError, match="All records failed"):
            router.lambda_handler(stream_event(record), lambda_context)
        assert not any(delivered(stack, queues).values())
        return
    assert failed_ids(router.lambda_handler(stream_event(record), lambda_context)) == []
    assert {c: bodies(m) for c, m in delivered(stack, queues).items()} == admitted_by_streams(
        [record]
    )
