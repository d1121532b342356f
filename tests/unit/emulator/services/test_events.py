"""EventBridge rules on patched moto in process (emulator/services/events.py): AWS's matching and
the event an SQS target receives."""

import json

import boto3
import pytest
from moto import mock_aws

pytestmark = pytest.mark.usefixtures("moto_patched", "module_credentials")


@pytest.fixture
def bus():
    with mock_aws():
        events = boto3.client("events")
        sqs = boto3.client("sqs")
        events.create_event_bus(Name="bus")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        yield events, sqs, url, arn["QueueArn"]


def _rule(events, arn, pattern, **target):
    events.put_rule(Name="r", EventBusName="bus", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="r", EventBusName="bus", Targets=[{"Id": "t", "Arn": arn, **target}])


def _put(events, detail, source="app"):
    entry = {
        "EventBusName": "bus",
        "Source": source,
        "DetailType": "d",
        "Detail": json.dumps(detail),
    }
    return events.put_events(Entries=[entry])["Entries"][0]["EventId"]


def _bodies(sqs, url):
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["Body"] for m in messages]


def test_patterns_descend_into_arrays_of_objects(bus):
    events, sqs, url, arn = bus
    _rule(events, arn, {"detail": {"items": {"k": ["a"]}}})
    event_id = _put(events, {"items": [{"k": "b"}, {"k": "a"}]})
    _put(events, {"items": [{"k": "b"}]})
    (body,) = _bodies(sqs, url)
    event = json.loads(body)
    assert event["id"] == event_id
    assert list(event) == [
        "version", "id", "detail-type", "source", "account", "time", "region", "resources",
        "detail",
    ]  # fmt: skip
    assert event["account"] == "123456789012"
    assert event["detail"] == {"items": [{"k": "b"}, {"k": "a"}]}


def test_disabled_rule_delivers_nothing(bus):
    events, sqs, url, arn = bus
    _rule(events, arn, {"source": ["app"]})
    events.disable_rule(Name="r", EventBusName="bus")
    _put(events, {})
    assert _bodies(sqs, url) == []


def test_input_and_input_path(bus):
    events, sqs, url, arn = bus
    _rule(events, arn, {"source": ["app"]}, InputPath="$.detail.x")
    _put(events, {"x": {"y": 1}})
    assert _bodies(sqs, url) == ['{"y": 1}']
    _rule(events, arn, {"source": ["app"]}, Input='"fixed"')
    _put(events, {"x": 1})
    assert _bodies(sqs, url) == ['"fixed"']


def test_input_transformer_and_unemulated_operators_are_refused(bus):
    events, _, _, arn = bus
    with pytest.raises(events.exceptions.InvalidEventPatternException, match="wildcard"):
        events.put_rule(
            Name="w", EventBusName="bus", EventPattern=json.dumps({"source": [{"wildcard": "a*"}]})
        )
    events.put_rule(Name="r", EventBusName="bus", EventPattern='{"source": ["app"]}')
    transformer = {"InputPathsMap": {"s": "$.source"}, "InputTemplate": '"<s>"'}
    with pytest.raises(Exception, match="InputTransformer is not emulated"):
        events.put_targets(
            Rule="r",
            EventBusName="bus",
            Targets=[{"Id": "t", "Arn": arn, "InputTransformer": transformer}],
        )
