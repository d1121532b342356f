"""EventBridge rules on patched moto in process (emulator/services/events.py): AWS's matching and
the event an SQS target receives."""

import json

import boto3
import pytest
from moto import mock_aws

from emulator.iam.policy import Request
from emulator.iam.resources import role_may

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


def test_a_bus_keeps_the_policy_its_template_gives_and_the_local_iam_decides_with_it():
    """AWS::Events::EventBus ``Policy`` (moto's model drops it): PutEvents by a role the policy
    denies is refused, by the role it admits allowed."""
    trust = {
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "pipes.amazonaws.com"}, "Action": "*"}
        ]
    }
    put_anywhere = {
        "PolicyName": "put",
        "PolicyDocument": {
            "Statement": [{"Effect": "Allow", "Action": "events:PutEvents", "Resource": "*"}]
        },
    }
    role = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}}
    role["Properties"]["Policies"] = [put_anywhere]
    template = {
        "Resources": {
            "Producer": role,
            "Other": role,
            "Bus": {
                "Type": "AWS::Events::EventBus",
                "Properties": {
                    "Name": "changes",
                    "Policy": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "OnlyTheProducer",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "events:PutEvents",
                                "Resource": "*",
                                "Condition": {
                                    "ArnNotEquals": {
                                        "aws:PrincipalArn": {"Fn::GetAtt": ["Producer", "Arn"]}
                                    }
                                },
                            }
                        ],
                    },
                },
            },
        },
        "Outputs": {
            name: {"Value": {"Fn::GetAtt": [name, "Arn"]}} for name in ("Producer", "Other", "Bus")
        },
    }
    with mock_aws():
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName="s", TemplateBody=json.dumps(template))
        outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in cloudformation.describe_stacks(StackName="s")["Stacks"][0]["Outputs"]
        }
        policy = json.loads(boto3.client("events").describe_event_bus(Name="changes")["Policy"])
        assert policy["Statement"][0]["Sid"] == "OnlyTheProducer"
        put = Request("events:PutEvents", outputs["Bus"])
        assert role_may(outputs["Producer"], "pipe", put).allowed
        refused = role_may(outputs["Other"], "pipe", put)
        assert not refused.allowed
        assert refused.denied_by is not None
