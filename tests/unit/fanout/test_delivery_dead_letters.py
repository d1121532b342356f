"""What the fan-out itself cannot deliver (modes pipe, router and pipe-topic) is kept, not dropped:
each consumer's rule target (pipe) and subscription (router, pipe-topic) has its own dead-letter
queue, encrypted so that the service can write it, writable by that rule or topic only, alarmed,
named in the stack's outputs and known to the stack client (so `ops status` and `ops dlq redrive`
know it). pipe-sfn has none: its machine's failures fail the pipe's batch (StreamFailureQueue)."""

import pytest
from cfnlint.decode.cfn_yaml import load as load_cfn_yaml

from harness import ROOT
from harness.stack import StackClient
from ops import fan_out
from ops.stack import CONSUMERS
from tests.unit.fanout.fanout_template import deployed
from tests.unit.template_yaml import alarm_threshold

TEMPLATE = load_cfn_yaml(str(ROOT / "template.yaml"))
RESOURCES = TEMPLATE["Resources"]
PREFIXES = [function.removesuffix("Function") for function in CONSUMERS]
SERVICE = {
    "pipe": "events.amazonaws.com",
    "router": "sns.amazonaws.com",
    "pipe-topic": "sns.amazonaws.com",
}


def dead_letters(prefix: str) -> str:
    return f"{prefix}ChangeDeliveryDeadLetterQueue"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_each_rule_target_retries_for_a_bounded_time_then_keeps_the_change(prefix):
    (target,) = RESOURCES[f"{prefix}ChangeRule"]["Properties"]["Targets"]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dead_letters(prefix), "Arn"]}}
    retry = target["RetryPolicy"]
    # EventBridge's ranges; without a RetryPolicy it retries 24 h, then drops the event
    assert 0 <= retry["MaximumRetryAttempts"] <= 185
    assert 60 <= retry["MaximumEventAgeInSeconds"] <= 86400


@pytest.mark.parametrize("prefix", PREFIXES)
def test_each_subscription_keeps_what_sns_cannot_deliver(prefix):
    subscription = RESOURCES[f"{prefix}ChangeSubscription"]["Properties"]
    assert subscription["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dead_letters(prefix), "Arn"]}
    }


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_delivery_dlq_is_standard_encrypted_without_a_key_and_kept_14_days(prefix):
    queue = RESOURCES[dead_letters(prefix)]
    assert queue["Condition"] == "HasDeliveryDeadLetters"  # pipe, router, pipe-topic
    properties = queue["Properties"]
    # EventBridge DLQs must be standard queues, SNS ones standard for a standard topic
    assert not properties.get("FifoQueue")
    # SSE-SQS: no KMS key, so no key policy has to let EventBridge or SNS in; an SSE-KMS queue
    # would need a customer managed key whose policy grants the service
    assert properties["SqsManagedSseEnabled"] is True and "KmsMasterKeyId" not in properties
    assert properties["MessageRetentionPeriod"] == 1209600


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("mode", ["pipe", "router", "pipe-topic"])
def test_only_the_consumers_rule_or_the_change_topic_may_send_to_its_delivery_dlq(prefix, mode):
    policy = RESOURCES[f"{dead_letters(prefix)}Policy"]
    assert policy["Properties"]["Queues"] == [{"Ref": dead_letters(prefix)}]
    statements = deployed(policy["Properties"]["PolicyDocument"]["Statement"], mode)
    (statement,) = [s for s in statements if s["Effect"] == "Allow"]
    source = {
        "pipe": {"Fn::GetAtt": [f"{prefix}ChangeRule", "Arn"]},
        "router": {"Ref": "ChangeTopic"},  # SNS sends to a subscription's DLQ as the topic
        "pipe-topic": {"Ref": "ChangeTopic"},
    }[mode]
    assert statement["Principal"] == {"Service": SERVICE[mode]}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Resource"] == {"Fn::GetAtt": [dead_letters(prefix), "Arn"]}
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": source}}


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_delivery_dlq_and_what_serves_it_exist_only_where_a_bus_or_a_topic_delivers(prefix):
    # pipe-sfn: the state machine's failed branch fails the pipe's batch (StreamFailureQueue);
    # nothing would ever be in the queue, its policy or its alarm
    for part in ("", "Policy", "Alarm"):
        assert RESOURCES[f"{dead_letters(prefix)}{part}"]["Condition"] == "HasDeliveryDeadLetters"
    condition = TEMPLATE["Conditions"]["HasDeliveryDeadLetters"]
    assert condition == {
        "Fn::Or": [
            {"Condition": "FanOutByPipe"},
            {"Condition": "FanOutByRouter"},
            {"Condition": "FanOutByPipeTopic"},
        ]
    }


def alarms(namespace: str, metric: str, dimension: dict) -> list[dict]:
    return [
        resource
        for resource in RESOURCES.values()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        and resource["Properties"]["Namespace"] == namespace
        and resource["Properties"]["MetricName"] == metric
        and dimension in resource["Properties"]["Dimensions"]
        and {"Ref": "AlarmTopic"} in resource["Properties"]["AlarmActions"]
    ]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_change_in_a_delivery_dlq_pages_someone(prefix):
    name = {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead_letters(prefix), "QueueName"]}}
    (alarm,) = alarms("AWS/SQS", "ApproximateNumberOfMessagesVisible", name)
    assert alarm["Condition"] == "HasDeliveryDeadLetters"
    properties = alarm["Properties"]
    assert (properties["ComparisonOperator"], alarm_threshold(properties)) == (
        "GreaterThanThreshold",
        0,
    )


def test_the_fan_out_failing_to_deliver_pages_someone_in_both_modes():
    topic = {"Name": "TopicName", "Value": {"Fn::GetAtt": ["ChangeTopic", "TopicName"]}}
    (sns,) = alarms("AWS/SNS", "NumberOfNotificationsFailed", topic)
    assert sns["Condition"] == "HasChangeTopic"  # router and pipe-topic
    for prefix in PREFIXES:
        rule = {"Name": "RuleName", "Value": RESOURCES[f"{prefix}ChangeRule"]["Properties"]["Name"]}
        (events,) = alarms("AWS/Events", "FailedInvocations", rule)
        assert events["Condition"] == "FanOutByPipe"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_outputs_name_each_delivery_dlq_as_the_stack_client_reads_it(prefix):
    function = f"{prefix}Function"
    output = TEMPLATE["Outputs"][StackClient.consumer_delivery_dead_letter_queue(function)]
    assert output == {"Condition": "HasDeliveryDeadLetters", "Value": {"Ref": dead_letters(prefix)}}


@pytest.mark.parametrize("mode", fan_out.NAMES)
def test_the_stack_client_lists_the_delivery_dlqs_as_failure_queues_where_they_exist(mode):
    stack = StackClient("unit", None, {"FanOut": mode}, {})
    delivered_by_a_bus_or_a_topic = fan_out.mode(mode).delivery_dead_letters
    assert stack.fan_out_dead_letters is delivered_by_a_bus_or_a_topic
    wanted = (
        {f"{p}ChangeDeliveryDeadLetterQueueUrl" for p in PREFIXES}
        if delivered_by_a_bus_or_a_topic
        else set()
    )
    assert {q for q in stack.failure_queues if "ChangeDelivery" in q} == wanted
    assert set(stack.dead_letter_queues) >= {q.removesuffix("Url") for q in wanted}
    assert stack.delivery_dead_letter_queues == {"MailDeliveryDeadLetterQueue": "MailQueueUrl"} | {
        q.removesuffix("Url"): q.replace("ChangeDeliveryDeadLetterQueue", "Queue") for q in wanted
    }
