"""A change EventBridge or SNS cannot deliver to an SQS queue, on patched moto in process
(emulator/services/delivery_failures.py): the queue's policy decides whether the service may
send; a refusal or a deleted queue goes to the target's or subscription's dead-letter queue at
once, another failure after the retries, with what AWS documents the DLQ message to carry."""

import json
import logging

import boto3
import pytest
from moto import mock_aws

from emulator.process import ACCOUNT
from harness.polling import eventually

pytestmark = pytest.mark.usefixtures("moto_patched", "module_credentials")


def queue(sqs, name: str, **attributes) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


def allow(sqs, url: str, arn: str, service: str, source_arn: str) -> None:
    """The queue policy the template gives a consumer's queue and its delivery DLQ."""
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sqs:SendMessage",
                "Resource": arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": source_arn}},
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})


def messages(sqs, url: str) -> list[dict]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    ).get("Messages", [])


def attributes(message: dict) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()}


@pytest.fixture
def bus():
    """A bus with one rule whose SQS target has a DLQ that only the rule may write."""
    with mock_aws():
        events, sqs = boto3.client("events"), boto3.client("sqs")
        events.create_event_bus(Name="bus")
        rule_arn = events.put_rule(
            Name="changes", EventBusName="bus", EventPattern=json.dumps({"source": ["app"]})
        )["RuleArn"]
        target_url, target_arn = queue(sqs, "target")
        dlq_url, dlq_arn = queue(sqs, "target-dlq")
        allow(sqs, dlq_url, dlq_arn, "events.amazonaws.com", rule_arn)

        def target(**settings):
            events.put_targets(
                Rule="changes",
                EventBusName="bus",
                Targets=[
                    {
                        "Id": "t",
                        "Arn": settings.pop("arn", target_arn),
                        "InputPath": "$.detail",
                        "DeadLetterConfig": {"Arn": dlq_arn},
                        **settings,
                    }
                ],
            )

        def put(detail: dict) -> str:
            entry = {"EventBusName": "bus", "Source": "app", "DetailType": "d"}
            entry["Detail"] = json.dumps(detail)
            return events.put_events(Entries=[entry])["Entries"][0]["EventId"]

        yield {
            "sqs": sqs,
            "rule_arn": rule_arn,
            "target": (target_url, target_arn),
            "dlq": dlq_url,
            "set_target": target,
            "put": put,
        }


def test_a_target_queue_that_lets_the_rule_in_gets_the_change(bus):
    sqs, (url, arn) = bus["sqs"], bus["target"]
    allow(sqs, url, arn, "events.amazonaws.com", bus["rule_arn"])
    bus["set_target"]()
    bus["put"]({"change": 1})
    assert [m["Body"] for m in messages(sqs, url)] == [json.dumps({"change": 1})]
    assert messages(sqs, bus["dlq"]) == []


def test_a_queue_policy_refusing_the_rule_sends_the_event_to_the_dlq_at_once(bus):
    sqs, (url, arn) = bus["sqs"], bus["target"]
    other_rule = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/bus/another-rule"
    allow(sqs, url, arn, "events.amazonaws.com", other_rule)
    bus["set_target"](RetryPolicy={"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 3600})
    event_id = bus["put"]({"change": 2})

    assert messages(sqs, url) == []
    (dead,) = messages(sqs, bus["dlq"])  # no retries for a refusal: there already
    event = json.loads(dead["Body"])  # the event itself, not what InputPath selects
    assert (event["id"], event["source"], event["detail"]) == (event_id, "app", {"change": 2})
    assert attributes(dead) == {
        "RULE_ARN": bus["rule_arn"],
        "TARGET_ARN": arn,
        "ERROR_CODE": "NO_PERMISSIONS",
        "ERROR_MESSAGE": "the policy of target does not let events.amazonaws.com send",
        "RETRY_ATTEMPTS": "0",
    }


def test_a_deleted_target_queue_sends_the_event_to_the_dlq_at_once(bus):
    sqs, (url, _) = bus["sqs"], bus["target"]
    bus["set_target"]()
    sqs.delete_queue(QueueUrl=url)
    bus["put"]({"change": 3})
    (dead,) = messages(sqs, bus["dlq"])
    assert attributes(dead)["ERROR_CODE"] == "NO_RESOURCE"
    assert json.loads(dead["Body"])["detail"] == {"change": 3}


def test_a_failing_send_is_retried_as_the_retry_policy_says_then_dead_lettered(bus):
    sqs = bus["sqs"]
    # a FIFO queue without content-based deduplication refuses a message without a
    # deduplication id (EventBridge sends none): a failure of the send itself, not a refusal
    _, fifo_arn = queue(sqs, "target.fifo", FifoQueue="true")
    bus["set_target"](
        arn=fifo_arn,
        SqsParameters={"MessageGroupId": "changes"},
        RetryPolicy={"MaximumRetryAttempts": 2},
    )
    bus["put"]({"change": 4})
    assert messages(sqs, bus["dlq"]) == []  # first retry after 1 s, the second 2 s later

    (dead,) = eventually(lambda: messages(sqs, bus["dlq"]), timeout=60, interval=0.2)
    assert attributes(dead)["ERROR_CODE"] == "ERROR_FROM_TARGET"
    assert attributes(dead)["RETRY_ATTEMPTS"] == "2"
    assert attributes(dead)["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"


def test_a_dlq_refusing_the_rule_loses_the_event_and_says_so(bus, caplog):
    sqs, (url, _) = bus["sqs"], bus["target"]
    bus["set_target"]()
    sqs.delete_queue(QueueUrl=url)
    allow(sqs, bus["dlq"], "ignored", "events.amazonaws.com", "arn:aws:events:us-east-1:1:rule/x")
    with caplog.at_level(logging.ERROR, logger="emulator.delivery_failures"):
        bus["put"]({"change": 5})
    assert messages(sqs, bus["dlq"]) == []
    assert "InvocationsFailedToBeSentToDLQ" in caplog.text


@pytest.fixture
def topic():
    """A standard topic with one raw, filtered SQS subscription whose DLQ only the topic may
    write."""
    with mock_aws():
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic_arn = sns.create_topic(Name="changes")["TopicArn"]
        url, arn = queue(sqs, "consumer")
        dlq_url, dlq_arn = queue(sqs, "consumer-delivery-dlq")
        allow(sqs, dlq_url, dlq_arn, "sns.amazonaws.com", topic_arn)
        subscription = sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
        for name, value in {
            "RawMessageDelivery": "true",
            "FilterPolicy": json.dumps({"kind": ["change"]}),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn}),
        }.items():
            sns.set_subscription_attributes(
                SubscriptionArn=subscription["SubscriptionArn"],
                AttributeName=name,
                AttributeValue=value,
            )

        def publish(message: str, kind: str = "change") -> None:
            sns.publish(
                TopicArn=topic_arn,
                Message=message,
                MessageAttributes={"kind": {"DataType": "String", "StringValue": kind}},
            )

        yield {"sqs": sqs, "topic_arn": topic_arn, "queue": (url, arn), "dlq": dlq_url,
               "publish": publish}  # fmt: skip


def test_a_queue_that_lets_the_topic_in_gets_the_raw_message(topic):
    sqs, (url, arn) = topic["sqs"], topic["queue"]
    allow(sqs, url, arn, "sns.amazonaws.com", topic["topic_arn"])
    topic["publish"]('{"change": 1}')
    topic["publish"]('{"change": 0}', kind="other")  # filtered out: neither delivered nor failed
    assert [m["Body"] for m in messages(sqs, url)] == ['{"change": 1}']
    assert messages(sqs, topic["dlq"]) == []


def test_a_queue_policy_refusing_the_topic_sends_the_raw_message_to_the_dlq_at_once(topic):
    sqs, (url, arn) = topic["sqs"], topic["queue"]
    allow(sqs, url, arn, "sns.amazonaws.com", f"arn:aws:sns:us-east-1:{ACCOUNT}:another-topic")
    topic["publish"]('{"change": 2}')
    topic["publish"]('{"change": 0}', kind="other")
    assert messages(sqs, url) == []
    (dead,) = messages(sqs, topic["dlq"])
    assert dead["Body"] == '{"change": 2}'  # as the raw subscription would have delivered it
    assert attributes(dead) == {"kind": "change"}


def test_a_deleted_queue_sends_the_raw_message_to_the_dlq_at_once(topic):
    sqs, (url, _) = topic["sqs"], topic["queue"]
    sqs.delete_queue(QueueUrl=url)
    topic["publish"]('{"change": 3}')
    assert [m["Body"] for m in messages(sqs, topic["dlq"])] == ['{"change": 3}']


def test_a_stacks_queue_policy_is_set_on_its_queues():
    template = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Topic": {"Type": "AWS::SNS::Topic"},
            "QueuePolicy": {
                "Type": "AWS::SQS::QueuePolicy",
                "Properties": {
                    "Queues": [{"Ref": "Queue"}],
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "sns.amazonaws.com"},
                                "Action": "sqs:SendMessage",
                                "Resource": {"Fn::GetAtt": ["Queue", "Arn"]},
                                "Condition": {"ArnEquals": {"aws:SourceArn": {"Ref": "Topic"}}},
                            }
                        ],
                    },
                },
            },
        }
    }
    with mock_aws():
        cloudformation, sqs = boto3.client("cloudformation"), boto3.client("sqs")
        cloudformation.create_stack(StackName="s", TemplateBody=json.dumps(template))
        created = cloudformation.describe_stack_resources(StackName="s")["StackResources"]
        physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in created}
        policy = sqs.get_queue_attributes(QueueUrl=physical["Queue"], AttributeNames=["Policy"])
        (statement,) = json.loads(policy["Attributes"]["Policy"])["Statement"]
        assert statement["Principal"] == {"Service": "sns.amazonaws.com"}
        assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": physical["Topic"]}}
        assert statement["Resource"].endswith(":" + physical["Queue"].rsplit("/", 1)[-1])
