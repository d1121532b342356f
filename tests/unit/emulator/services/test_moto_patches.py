"""moto fidelity patches (emulator/services/moto_patches.py), moto in process: S3 notifications
under duplicate_deliveries, SNS FIFO deduplication, AWS::SNS::Subscription, DynamoDB
TransactWriteItems and its write lock, UpdateItem's stream records."""

import json
import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends

from emulator.core.faults import Faults
from emulator.services import moto_patches
from tests.unit.emulator.conftest import ACCOUNT, REGION, fake_credentials

pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture
def aws(monkeypatch):
    fake_credentials(monkeypatch)
    with mock_aws():
        yield
    moto_patches.set_faults(None)


def client(service):
    return boto3.client(service, region_name=REGION)


def queue(name: str, **attributes: str) -> tuple[str, str]:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


def drain(url: str) -> list[dict]:
    sqs = client("sqs")
    messages = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)
    return messages


# --- S3 event notifications and duplicate_deliveries ------------------------------------------


def test_s3_event_notifications_are_delivered_duplicate_deliveries_times(aws):
    faults = Faults(duplicate_deliveries=3)
    moto_patches.set_faults(faults)
    s3 = client("s3")
    s3.create_bucket(Bucket="bucket")
    url, arn = queue("events")
    s3.put_bucket_notification_configuration(
        Bucket="bucket",
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    test_events = drain(url)
    assert [json.loads(m["Body"])["Event"] for m in test_events] == ["s3:TestEvent"]  # once

    s3.put_object(Bucket="bucket", Key="incoming/a.csv", Body=b"x")
    messages = drain(url)
    assert len(messages) == 3
    assert len({m["MessageId"] for m in messages}) == 3  # separate messages
    assert len({m["Body"] for m in messages}) == 1  # one event
    record = json.loads(messages[0]["Body"])["Records"][0]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["object"]["key"] == "incoming/a.csv"

    faults.update({"duplicate_deliveries": 1})
    s3.put_object(Bucket="bucket", Key="incoming/b.csv", Body=b"x")
    assert len(drain(url)) == 1


# --- SNS FIFO topics ------------------------------------------------------------------------------


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
        self.standard, standard_arn = queue(f"standard-{scope}{int(content_based)}")
        self.fifo, fifo_arn = queue(f"fifo-{scope}{int(content_based)}.fifo", FifoQueue="true")
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
        return [m["Body"] for m in drain(self.standard)]


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(moto_patches, "clock", lambda: now[0])
    return now


def test_fifo_topic_delivers_a_deduplicated_message_once(aws, clock):
    fifo = Fifo()
    responses = [fifo.publish("first") for _ in range(3)]
    assert fifo.delivered() == ["first"]
    assert len(drain(fifo.fifo)) == 1
    assert all(r["MessageId"] and r["SequenceNumber"] for r in responses)
    assert {r["MessageId"] for r in responses} == {responses[0]["MessageId"]}
    assert len(responses[0]["SequenceNumber"]) == 20

    other = fifo.publish("second", dedup="d2")
    assert fifo.delivered() == ["second"]
    assert other["MessageId"] != responses[0]["MessageId"]
    assert int(other["SequenceNumber"]) > int(responses[0]["SequenceNumber"])


def test_the_deduplication_interval_starts_at_the_first_publish(aws, clock):
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


def test_message_group_scope_deduplicates_per_group(aws, clock):
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


def test_content_based_deduplication_and_publish_batch(aws, clock):
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


def test_standard_topics_do_not_deduplicate(aws):
    sns = client("sns")
    topic = sns.create_topic(Name="plain")["TopicArn"]
    url, arn = queue("plain-sub")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    sns.publish(TopicArn=topic, Message="m")
    response = sns.publish(TopicArn=topic, Message="m")
    assert "SequenceNumber" not in response
    assert len(drain(url)) == 2


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
    aws, clock, content_based
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
    assert [m["Body"] for m in drain(out["StandardQueueUrl"])] == ["m"]
    fifo_messages = drain(out["FifoQueueUrl"])
    assert len(fifo_messages) == 1
    envelope = json.loads(fifo_messages[0]["Body"])
    assert envelope["Message"] == "m"
    assert envelope["TopicArn"] == out["TopicArn"]


# --- DynamoDB: TransactWriteItems and the write lock ----------------------------------------------


class Table:
    def __init__(self, name: str = "table", items: int = 0):
        self.name = name
        self.ddb = client("dynamodb")
        self.stream_arn = self.ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        self.backend = dynamodb_backends[ACCOUNT][REGION]
        table = self.backend.get_table(name)
        for i in range(items):  # straight into moto: a big table without thousands of calls
            table.put_item({"pk": {"S": f"bulk-{i:05d}"}, "v": {"N": str(i)}})
        self.streams = client("dynamodbstreams")

    @property
    def model(self):
        return self.backend.tables[self.name]

    def put(self, pk: str, **attrs: str) -> None:
        item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
        self.ddb.put_item(TableName=self.name, Item=item)

    def get(self, pk: str) -> dict | None:
        return self.ddb.get_item(TableName=self.name, Key={"pk": {"S": pk}}).get("Item")

    def latest_iterator(self) -> dict[str, str]:
        """A LATEST iterator per shard (the stream has several)."""
        shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        return {
            shard["ShardId"]: self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
            for shard in shards
        }

    def raw_records(self, iterators: dict[str, str]) -> list[dict]:
        """Every shard's records after its iterator, in sequence-number order (each iterator
        moves on)."""
        got = []
        for shard, iterator in iterators.items():
            response = self.streams.get_records(ShardIterator=iterator)
            iterators[shard] = response["NextShardIterator"]
            got += response["Records"]
        return sorted(got, key=lambda r: int(r["dynamodb"]["SequenceNumber"]))

    def records(self, iterators: dict[str, str]) -> list[tuple[str, str]]:
        return [
            (r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in self.raw_records(iterators)
        ]

    def transact(self, *actions: dict) -> dict:
        return self.ddb.transact_write_items(TransactItems=list(actions))


def put(table: str, pk: str, **extra) -> dict:
    return {"Put": {"TableName": table, "Item": {"pk": {"S": pk}, "v": {"S": "new"}}, **extra}}


def test_a_failing_condition_cancels_the_transaction_and_writes_nothing(aws):
    table = Table()
    table.put("existing", v="old")
    model, shard = table.model, table.model.stream_shard
    iterator = table.latest_iterator()
    with pytest.raises(ClientError) as cancelled:
        table.transact(
            put(table.name, "fresh"),
            {
                "Update": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "existing"}},
                    "UpdateExpression": "SET v = :v",
                    "ExpressionAttributeValues": {":v": {"S": "changed"}},
                }
            },
            {
                "Delete": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "other"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        )
    error = cancelled.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in error["CancellationReasons"]] == [
        "None",
        "None",
        "ConditionalCheckFailed",
    ]
    assert table.get("fresh") is None
    assert table.get("existing")["v"] == {"S": "old"}
    assert table.model is model  # no table copies swapped in
    assert table.model.stream_shard is shard
    assert table.records(iterator) == []  # nothing of the cancelled transaction
    table.put("later")
    assert table.records(iterator) == [("INSERT", "later")]  # the old iterator still reads


def test_condition_check_failure_returns_the_item_with_all_old(aws):
    table = Table()
    table.put("existing", v="old")
    with pytest.raises(ClientError) as cancelled:
        table.transact(
            put(table.name, "fresh"),
            {
                "ConditionCheck": {
                    "TableName": table.name,
                    "Key": {"pk": {"S": "existing"}},
                    "ConditionExpression": "v = :want",
                    "ExpressionAttributeValues": {":want": {"S": "something else"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": table.name,
                    "Item": {"pk": {"S": "unconditional"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
    reasons = cancelled.value.response["CancellationReasons"]
    assert reasons[0] == {"Code": "None"}
    assert reasons[1]["Code"] == "ConditionalCheckFailed"
    assert reasons[1]["Item"] == {"pk": {"S": "existing"}, "v": {"S": "old"}}
    assert reasons[2] == {"Code": "None"}
    assert table.get("fresh") is None
    assert table.get("unconditional") is None


def test_a_successful_transaction_applies_every_action_with_its_stream_records(aws):
    table = Table()
    table.put("updated", v="old")
    table.put("deleted", v="old")
    table.put("checked", v="ok")
    iterator = table.latest_iterator()
    table.transact(
        put(table.name, "inserted", ConditionExpression="attribute_not_exists(pk)"),
        {
            "Update": {
                "TableName": table.name,
                "Key": {"pk": {"S": "updated"}},
                "UpdateExpression": "SET v = :v",
                "ConditionExpression": "v = :old",
                "ExpressionAttributeValues": {":v": {"S": "new"}, ":old": {"S": "old"}},
            }
        },
        {"Delete": {"TableName": table.name, "Key": {"pk": {"S": "deleted"}}}},
        {
            "ConditionCheck": {
                "TableName": table.name,
                "Key": {"pk": {"S": "checked"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        },
    )
    assert table.get("inserted")["v"] == {"S": "new"}
    assert table.get("updated")["v"] == {"S": "new"}
    assert table.get("deleted") is None
    assert table.records(iterator) == [
        ("INSERT", "inserted"),
        ("MODIFY", "updated"),
        ("REMOVE", "deleted"),
    ]


def test_a_cancelled_transaction_on_a_big_table_copies_nothing(aws):
    table = Table(items=3000)
    model, shard, items = table.model, table.model.stream_shard, table.model.items
    iterator = table.latest_iterator()
    for _ in range(3):
        with pytest.raises(ClientError, match="TransactionCanceled"):
            table.transact(
                put(table.name, "bulk-00001", ConditionExpression="attribute_not_exists(pk)")
            )
    assert table.model is model
    assert table.model.items is items
    assert table.model.stream_shard is shard
    assert len(table.model.items) == 3000
    table.transact(put(table.name, "bulk-99999"))
    assert table.records(iterator) == [("INSERT", "bulk-99999")]


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (
            lambda t: [put(t, "same"), {"Delete": {"TableName": t, "Key": {"pk": {"S": "same"}}}}],
            "multiple operations on one item",
        ),
        (lambda t: [put(t, f"k{i}") for i in range(101)], "less than or equal to 100"),
        (
            lambda t: [
                put(t, "first"),
                {
                    "Update": {
                        "TableName": t,
                        "Key": {"pk": {"S": "second"}},
                        "UpdateExpression": "SET v = v + :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ],
            "",
        ),
    ],
)
def test_an_invalid_transaction_is_refused_and_writes_nothing(aws, actions, message):
    table = Table()
    table.put("second", v="a string")
    model = table.model
    iterator = table.latest_iterator()
    with pytest.raises(ClientError) as refused:
        table.transact(*actions(table.name))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert message in refused.value.response["Error"]["Message"]
    assert table.get("first") is None
    assert table.get("same") is None
    assert table.get("second")["v"] == {"S": "a string"}
    assert table.model is model
    assert table.records(iterator) == []


def test_no_write_lands_between_a_transactions_checks_and_its_writes(aws, monkeypatch):
    table = Table()
    checking, release = threading.Event(), threading.Event()
    original = moto_patches.get_filter_expression

    def slow_check(*args, **kwargs):
        checking.set()
        release.wait(5)
        return original(*args, **kwargs)

    monkeypatch.setattr(moto_patches, "get_filter_expression", slow_check)
    outcome = {}

    def transaction():
        try:
            table.transact(put(table.name, "k", ConditionExpression="attribute_not_exists(pk)"))
            outcome["transaction"] = "applied"
        except ClientError as error:
            outcome["transaction"] = error.response["Error"]["Code"]

    def concurrent_put():
        table.put("k", v="concurrent")
        outcome["put"] = "done"

    first = threading.Thread(target=transaction)
    first.start()
    assert checking.wait(5), "the transaction never checked its condition"
    second = threading.Thread(target=concurrent_put)
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waits for the transaction
    release.set()
    first.join(5)
    second.join(5)
    assert outcome == {"transaction": "applied", "put": "done"}
    assert table.get("k")["v"] == {"S": "concurrent"}  # the put came after the transaction


def test_update_item_creating_an_item_writes_one_insert(aws):
    table = Table()
    iterator = table.latest_iterator()
    for _ in range(2):
        table.ddb.update_item(
            TableName=table.name,
            Key={"pk": {"S": "u"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    records = table.raw_records(iterator)
    assert [r["eventName"] for r in records] == ["INSERT"]  # the repeat changed nothing
    assert records[0]["dynamodb"]["NewImage"] == {"pk": {"S": "u"}, "v": {"N": "1"}}


CONDITIONAL_POLICY_STACK = """
Parameters:
  Mode: {Type: String}
Conditions:
  Streams: !Equals [!Ref Mode, streams]
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Statement:
          - {Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: sts:AssumeRole}
      Policies:
        - PolicyName: Always
          PolicyDocument: {Statement: [{Effect: Allow, Action: sqs:SendMessage, Resource: "*"}]}
        - !If
          - Streams
          - PolicyName: StreamsOnly
            PolicyDocument:
              Statement: [{Effect: Allow, Action: dynamodb:GetRecords, Resource: "*"}]
          - !Ref AWS::NoValue
Outputs:
  RoleName: {Value: !Ref Role}
"""


@pytest.mark.parametrize(
    ("mode", "policies"), [("streams", ["Always", "StreamsOnly"]), ("queues", ["Always"])]
)
def test_cloudformation_leaves_a_no_value_list_item_out(aws, mode, policies):
    """`- !If [Cond, item, !Ref AWS::NoValue]` in a list: the item only where Cond holds, as
    CloudFormation does (moto kept a None in the list and failed the role)."""
    cfn = client("cloudformation")
    cfn.create_stack(
        StackName=f"nv-{mode}",
        TemplateBody=CONDITIONAL_POLICY_STACK,
        Parameters=[{"ParameterKey": "Mode", "ParameterValue": mode}],
    )
    stack = cfn.describe_stacks(StackName=f"nv-{mode}")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    role = stack["Outputs"][0]["OutputValue"]
    assert sorted(client("iam").list_role_policies(RoleName=role)["PolicyNames"]) == policies
