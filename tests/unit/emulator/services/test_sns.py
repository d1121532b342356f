"""SNS (emulator/services/sns.py), moto in process: FIFO topics deduplicate, and
AWS::SNS::Subscription in CloudFormation with standard and FIFO queues."""

import json

import pytest
from botocore.exceptions import ClientError

from emulator.process import ACCOUNT, REGION
from emulator.services import sns
from tests.unit.emulator.support import client, drained, new_queue

pytestmark = pytest.mark.usefixtures("moto_patched")


class Fifo:
    def __init__(self, scope: str = "Topic", content_based: bool = False):
        self.sns = client("sns")
        self.topic = self.sns.create_topic(
            Name=f"events-{scope.lower()}{int(content_based)}.fifo",
            Attributes={
                "FifoTopic": "true",
                "ContentBasedDeduplication": str(content_based).lower(),
                "FifoThroughputScope": scope,
            },
        )["TopicArn"]
        self.standard, standard_arn = new_queue(
            client("sqs"), f"standard-{scope}{int(content_based)}"
        )
        self.fifo, fifo_arn = new_queue(
            client("sqs"), f"fifo-{scope}{int(content_based)}.fifo", FifoQueue="true"
        )
        for arn in (standard_arn, fifo_arn):
            self.sns.subscribe(
                TopicArn=self.topic,
                Protocol="sqs",
                Endpoint=arn,
                Attributes={"RawMessageDelivery": "true"},
            )

    def publish(self, body: str, dedup: str | None = "d1", group: str = "g1") -> dict:
        extra = {"MessageDeduplicationId": dedup} if dedup else {}
        return self.sns.publish(TopicArn=self.topic, Message=body, MessageGroupId=group, **extra)

    def delivered(self) -> list[str]:
        """Bodies the standard queue subscriber got (it does not deduplicate on its own)."""
        return [m["Body"] for m in drained(client("sqs"), self.standard)]


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(sns, "clock", lambda: now[0])
    return now


def test_fifo_topic_delivers_a_deduplicated_message_once(moto_in_process, clock):
    fifo = Fifo()
    responses = [fifo.publish("first") for _ in range(3)]
    assert fifo.delivered() == ["first"]
    assert len(drained(client("sqs"), fifo.fifo)) == 1
    assert all(r["MessageId"] and r["SequenceNumber"] for r in responses)
    assert {r["MessageId"] for r in responses} == {responses[0]["MessageId"]}
    assert len(responses[0]["SequenceNumber"]) == 20

    other = fifo.publish("second", dedup="d2")
    assert fifo.delivered() == ["second"]
    assert other["MessageId"] != responses[0]["MessageId"]
    assert int(other["SequenceNumber"]) > int(responses[0]["SequenceNumber"])


def test_the_deduplication_interval_starts_at_the_first_publish(moto_in_process, clock):
    fifo = Fifo()
    fifo.publish("a")
    clock[0] += 200
    fifo.publish("b")  # a duplicate: not delivered, and the interval is not extended
    assert fifo.delivered() == ["a"]
    clock[0] += 101  # 301 s after the first publish
    fifo.publish("c")
    assert fifo.delivered() == ["c"]
    clock[0] += 299
    fifo.publish("d")
    assert fifo.delivered() == []


def test_aged_deduplication_ids_past_the_interval_are_delivered_again(moto_in_process, clock):
    fifo = Fifo()
    fifo.publish("a", dedup="old")
    clock[0] += 100
    fifo.publish("b", dedup="young")
    aged = sns.age_deduplication(250, REGION, ACCOUNT)  # "old" 350 s ago, "young" 250 s
    assert aged == {"topics": 1, "aged": 2, "expired": 1}
    fifo.publish("a again", dedup="old")
    fifo.publish("b again", dedup="young")  # still inside its interval: not delivered
    assert fifo.delivered() == ["a", "b", "a again"]


def test_message_group_scope_deduplicates_per_group(moto_in_process, clock):
    per_group = Fifo(scope="MessageGroup")
    per_group.publish("a", group="g1")
    per_group.publish("b", group="g2")
    per_group.publish("c", group="g1")
    assert sorted(per_group.delivered()) == ["a", "b"]
    attributes = per_group.sns.get_topic_attributes(TopicArn=per_group.topic)["Attributes"]
    assert attributes["FifoThroughputScope"] == "MessageGroup"

    topic_wide = Fifo(scope="Topic")
    topic_wide.publish("a", group="g1")
    topic_wide.publish("b", group="g2")
    assert topic_wide.delivered() == ["a"]


def test_content_based_deduplication_and_publish_batch(moto_in_process, clock):
    fifo = Fifo(content_based=True)
    fifo.publish("same", dedup=None)
    fifo.publish("same", dedup=None)
    fifo.publish("other", dedup=None)
    assert fifo.delivered() == ["same", "other"]
    batch = fifo.sns.publish_batch(
        TopicArn=fifo.topic,
        PublishBatchRequestEntries=[
            {"Id": "1", "Message": "x", "MessageGroupId": "g", "MessageDeduplicationId": "b1"},
            {"Id": "2", "Message": "y", "MessageGroupId": "g", "MessageDeduplicationId": "b1"},
            {"Id": "3", "Message": "same", "MessageGroupId": "g"},
        ],
    )
    assert [e["Id"] for e in batch["Successful"]] == ["1", "2", "3"]
    assert all(e["SequenceNumber"] for e in batch["Successful"])
    assert fifo.delivered() == ["x"]


def test_publish_batch_answers_a_refused_entry_in_failed_and_publishes_the_rest(
    moto_in_process, clock
):
    """moto left an entry its own checks refused out of both lists (AWS names every entry)."""
    fifo = Fifo()
    entry = {"Message": "x", "MessageGroupId": "g", "MessageDeduplicationId": "b1"}
    batch = fifo.sns.publish_batch(
        TopicArn=fifo.topic,
        PublishBatchRequestEntries=[
            {"Id": "kept", **entry},
            {"Id": "refused", **entry, "MessageDeduplicationId": "b2", "Subject": "s" * 101},
        ],
    )
    assert [e["Id"] for e in batch["Successful"]] == ["kept"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in batch["Failed"]] == [
        ("refused", "InvalidParameter", True)
    ]
    assert fifo.delivered() == ["x"]
    with pytest.raises(ClientError, match="InvalidParameter"):  # as Publish refuses it
        fifo.sns.publish(TopicArn=fifo.topic, Subject="s" * 101, **entry)


def test_standard_topics_do_not_deduplicate(moto_in_process):
    sns = client("sns")
    topic = sns.create_topic(Name="plain")["TopicArn"]
    url, arn = new_queue(client("sqs"), "plain-sub")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    sns.publish(TopicArn=topic, Message="m")
    response = sns.publish(TopicArn=topic, Message="m")
    assert "SequenceNumber" not in response
    assert len(drained(client("sqs"), url)) == 2


FIFO_STACK = """
Resources:
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      TopicName: events.fifo
      FifoTopic: true
      ContentBasedDeduplication: {content_based}
      FifoThroughputScope: MessageGroup
  StandardQueue:
    Type: AWS::SQS::Queue
  FifoQueue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: subscriber.fifo
      FifoQueue: true
  StandardSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: sqs
      Endpoint: !GetAtt StandardQueue.Arn
      RawMessageDelivery: true
  FifoSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: sqs
      Endpoint: !GetAtt FifoQueue.Arn
Outputs:
  TopicArn: {{Value: !Ref Topic}}
  StandardQueueUrl: {{Value: !Ref StandardQueue}}
  FifoQueueUrl: {{Value: !Ref FifoQueue}}
  Subscription: {{Value: !Ref StandardSubscription}}
"""


@pytest.mark.parametrize("content_based", ["false", '"false"'])
def test_cloudformation_fifo_topic_with_standard_and_fifo_queue_subscriptions(
    moto_in_process, clock, content_based
):
    cfn = client("cloudformation")
    cfn.create_stack(StackName="fifo", TemplateBody=FIFO_STACK.format(content_based=content_based))
    stack = cfn.describe_stacks(StackName="fifo")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    out = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    sns = client("sns")
    attributes = sns.get_topic_attributes(TopicArn=out["TopicArn"])["Attributes"]
    assert attributes["FifoTopic"] == "true"
    assert attributes["ContentBasedDeduplication"] == "false"
    assert attributes["FifoThroughputScope"] == "MessageGroup"
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=out["TopicArn"])["Subscriptions"]
    assert len(subscriptions) == 2
    assert out["Subscription"] in {s["SubscriptionArn"] for s in subscriptions}
    raw = sns.get_subscription_attributes(SubscriptionArn=out["Subscription"])["Attributes"]
    assert raw["RawMessageDelivery"] == "true"

    with pytest.raises(ClientError, match="ContentBasedDeduplication"):
        sns.publish(TopicArn=out["TopicArn"], Message="m", MessageGroupId="g")
    for _ in range(2):
        sns.publish(
            TopicArn=out["TopicArn"], Message="m", MessageGroupId="g", MessageDeduplicationId="d"
        )
    assert [m["Body"] for m in drained(client("sqs"), out["StandardQueueUrl"])] == ["m"]
    fifo_messages = drained(client("sqs"), out["FifoQueueUrl"])
    assert len(fifo_messages) == 1
    envelope = json.loads(fifo_messages[0]["Body"])
    assert envelope["Message"] == "m"
    assert envelope["TopicArn"] == out["TopicArn"]
