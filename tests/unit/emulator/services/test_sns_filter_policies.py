"""SNS subscription filter policies (emulator/services/sns_filter_policies.py): the cases moto 5.2.6
gets wrong, matched as SNS does, and publishes through patched moto reaching exactly the matching
queues."""

import json

import boto3
import pytest
from moto import mock_aws

from emulator.services.sns_filter_policies import FilterPolicy

pytestmark = pytest.mark.usefixtures("moto_patched", "module_credentials")


def _attrs(**values):
    kinds = {str: "String", int: "Number", list: "String.Array"}
    return {
        name: {"Type": kinds[type(v)], "Value": json.dumps(v) if type(v) is list else str(v)}
        for name, v in values.items()
    }


@pytest.mark.parametrize(
    ("policy", "scope", "attributes", "body", "expected"),
    [
        # moto raised TypeError, or never matched, in each of these
        ({"$or": [{"a": ["x"]}, {"b": ["y"]}]}, "MessageBody", {}, {"b": "y"}, True),
        ({"f": [None]}, "MessageBody", {}, {"f": None}, True),
        ({"n": [{"numeric": [">", 1]}]}, "MessageBody", {}, {"n": "5"}, False),
        ({"f": [{"equals-ignore-case": "AB"}]}, "MessageBody", {}, {"f": "ab"}, True),
        ({"k": [{"prefix": {"equals-ignore-case": "AB"}}]}, None, _attrs(k="abc"), {}, True),
        # what moto already did right stays right
        ({"items": {"k": ["a"]}}, "MessageBody", {}, {"items": [{"k": "a"}]}, True),
        ({"k": ["b"]}, None, _attrs(k=["a", "b"]), {}, True),
        ({"k": [300]}, None, _attrs(k=300), {}, True),
        ({"k": [{"numeric": [">=", 600]}]}, None, _attrs(k=900), {}, True),
        ({"k": [{"numeric": [">", 1]}]}, None, _attrs(k="300"), {}, False),
        ({"k": [{"anything-but": ["x"]}]}, None, _attrs(j="y"), {}, False),
        ({"k": [{"exists": False}]}, None, _attrs(j="y"), {}, True),
        ({"f": ["x"]}, "MessageBody", {}, "x", False),
    ],
)
def test_policy_semantics(policy, scope, attributes, body, expected):
    message = body if isinstance(body, str) else json.dumps(body)
    assert FilterPolicy(policy, scope).matches(attributes, message) is expected


def _subscribed_queue():
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name="t")["TopicArn"]
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    sub = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn["QueueArn"])
    return sns, sqs, topic, url, sub


def test_scope_set_after_the_policy_applies_to_it():
    with mock_aws():
        sns, sqs, topic, url, sub = _subscribed_queue()
        sub_arn = sub["SubscriptionArn"]
        sns.set_subscription_attributes(
            SubscriptionArn=sub_arn, AttributeName="RawMessageDelivery", AttributeValue="true"
        )
        policy = json.dumps({"kind": ["GIFT_CARD"]})
        sns.set_subscription_attributes(
            SubscriptionArn=sub_arn, AttributeName="FilterPolicy", AttributeValue=policy
        )
        sns.set_subscription_attributes(
            SubscriptionArn=sub_arn, AttributeName="FilterPolicyScope", AttributeValue="MessageBody"
        )
        sns.publish(TopicArn=topic, Message=json.dumps({"kind": "GIFT_CARD"}))
        sns.publish(TopicArn=topic, Message=json.dumps({"kind": "SURVEY"}))
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [json.loads(m["Body"]) for m in messages] == [{"kind": "GIFT_CARD"}]


def test_unemulated_operator_is_refused_as_invalid_parameter():
    with mock_aws():
        sns, *_, sub = _subscribed_queue()
        with pytest.raises(sns.exceptions.InvalidParameterException, match="cidr"):
            sns.set_subscription_attributes(
                SubscriptionArn=sub["SubscriptionArn"],
                AttributeName="FilterPolicy",
                AttributeValue=json.dumps({"ip": [{"cidr": "10.0.0.0/8"}]}),
            )


def test_or_policies_are_as_complex_as_their_alternatives():
    """SNS reads a $or policy as the OR of its alternatives: each is checked (five keys at most)
    and their value combinations add up against the 150 (moto multiplied them by the nesting
    depth and refused small two-branch policies)."""
    two_branches = {
        "$or": [
            {"e": ["INSERT", "MODIFY"], "a": ["true"], "d": [{"anything-but": ["X"]}]},
            {"e": ["MODIFY", "REMOVE"], "b": ["true"], "c": [{"anything-but": ["X"]}]},
        ]
    }
    many_values = {"$or": [{"a": [str(i) for i in range(100)]}, {"b": [str(i) for i in range(51)]}]}
    six_keys = {"$or": [{k: ["v"] for k in "abcdef"}, {"g": ["v"]}]}
    with mock_aws():
        sns, sqs, topic, url, sub = _subscribed_queue()
        arn = sub["SubscriptionArn"]

        def set_policy(policy):
            sns.set_subscription_attributes(
                SubscriptionArn=arn, AttributeName="FilterPolicy", AttributeValue=json.dumps(policy)
            )

        set_policy(two_branches)
        with pytest.raises(sns.exceptions.InvalidParameterException, match="too complex"):
            set_policy(many_values)
        with pytest.raises(sns.exceptions.InvalidParameterException, match="5 keys"):
            set_policy(six_keys)
        for message, c in (("yes", "Y"), ("no", "X")):
            attributes = {"e": "REMOVE", "b": "true", "c": c}
            sns.publish(
                TopicArn=topic,
                Message=message,
                MessageAttributes={
                    k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
                },
            )
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [json.loads(m["Body"])["Message"] for m in messages] == ["yes"]
