"""EventBridge Pipes, rules and SNS filter policies on the in-process local stack: a CloudFormation
template with a table and its stream, a pipe (filtered) to a bus, two rules each to a queue of its
own, a topic with two filtered queue subscriptions, and a second pipe (filtered) to a topic of its
own with a queue subscribed by a filter on the message body."""

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from moto.events.models import EventsBackend
from moto.sns.models import SNSBackend
from shared.batches.table_changes import stream_record

from emulator.process import ACCOUNT, REGION
from harness.polling import stable
from tests.unit.emulator.support import delivering_stack

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      StreamSpecification: {StreamViewType: NEW_AND_OLD_IMAGES}
  Bus:
    Type: AWS::Events::EventBus
    Properties: {Name: fanout-bus}
  PipeRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: "2012-10-17", Statement: []}
      Policies:
        - PolicyName: deliver
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Effect: Allow
                Action: [events:PutEvents, sns:Publish]
                Resource: [!GetAtt Bus.Arn, !Ref ChangeTopic]
  PipeDeadLetterQueue:
    Type: AWS::SQS::Queue
  Pipe:
    Type: AWS::Pipes::Pipe
    Properties:
      RoleArn: !GetAtt PipeRole.Arn
      Source: !GetAtt Table.StreamArn
      SourceParameters:
        DynamoDBStreamParameters:
          StartingPosition: LATEST
          BatchSize: 10
          MaximumRetryAttempts: 1
          DeadLetterConfig: {Arn: !GetAtt PipeDeadLetterQueue.Arn}
        FilterCriteria:
          Filters:
            - Pattern: '{"dynamodb": {"NewImage": {"kind": {"S": ["a", "b"]}}}}'
      Target: !GetAtt Bus.Arn
  QueueA:
    Type: AWS::SQS::Queue
  QueueAB:
    Type: AWS::SQS::Queue
  RuleA:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: !Ref Bus
      EventPattern:
        detail:
          eventName: [INSERT]
          dynamodb: {NewImage: {kind: {S: [a]}}}
      Targets: [{Id: a, Arn: !GetAtt QueueA.Arn}]
  RuleAB:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: !Ref Bus
      EventPattern:
        source: [{prefix: "Pipe "}]
        detail:
          dynamodb: {NewImage: {kind: {S: [a, b]}}}
      Targets: [{Id: ab, Arn: !GetAtt QueueAB.Arn, InputPath: $.detail.dynamodb.NewImage}]
  Topic:
    Type: AWS::SNS::Topic
  QueueSurvey:
    Type: AWS::SQS::Queue
  QueueGift:
    Type: AWS::SQS::Queue
  SurveySubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: sqs
      Endpoint: !GetAtt QueueSurvey.Arn
      RawMessageDelivery: true
      FilterPolicy: {kind: [SURVEY]}
  GiftSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref Topic
      Protocol: sqs
      Endpoint: !GetAtt QueueGift.Arn
      FilterPolicyScope: MessageBody
      FilterPolicy:
        $or:
          - kind: [GIFT_CARD]
          - wait_seconds: [{numeric: [">=", 600]}]
  ChangeTopic:
    Type: AWS::SNS::Topic
  TopicPipeDeadLetterQueue:
    Type: AWS::SQS::Queue
  TopicPipe:
    Type: AWS::Pipes::Pipe
    Properties:
      RoleArn: !GetAtt PipeRole.Arn
      Source: !GetAtt Table.StreamArn
      SourceParameters:
        DynamoDBStreamParameters:
          StartingPosition: LATEST
          BatchSize: 10
          MaximumRetryAttempts: 1
          DeadLetterConfig: {Arn: !GetAtt TopicPipeDeadLetterQueue.Arn}
        FilterCriteria:
          Filters:
            - Pattern: '{"dynamodb": {"NewImage": {"kind": {"S": ["t"]}}}}'
      Target: !Ref ChangeTopic
  QueueFlagged:
    Type: AWS::SQS::Queue
  FlaggedSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: !Ref ChangeTopic
      Protocol: sqs
      Endpoint: !GetAtt QueueFlagged.Arn
      RawMessageDelivery: true
      FilterPolicyScope: MessageBody
      FilterPolicy:
        eventName: [INSERT]
        dynamodb: {NewImage: {flag: {S: ["yes"]}}}
Outputs:
  TableName: {Value: !Ref Table}
  PipeName: {Value: !Ref Pipe}
  PipeArn: {Value: !GetAtt Pipe.Arn}
  PipeRoleName: {Value: !Ref PipeRole}
  QueueA: {Value: !Ref QueueA}
  QueueAB: {Value: !Ref QueueAB}
  DeadLetterQueue: {Value: !Ref PipeDeadLetterQueue}
  TopicArn: {Value: !Ref Topic}
  QueueSurvey: {Value: !Ref QueueSurvey}
  QueueGift: {Value: !Ref QueueGift}
  TopicPipeArn: {Value: !GetAtt TopicPipe.Arn}
  ChangeTopicArn: {Value: !Ref ChangeTopic}
  QueueFlagged: {Value: !Ref QueueFlagged}
  TopicPipeDeadLetterQueue: {Value: !Ref TopicPipeDeadLetterQueue}
"""


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    with delivering_stack(TEMPLATE, tmp_path_factory.mktemp("pipes")) as stack:
        yield stack


def _put(local, pk, kind, **extra):
    item = {"pk": {"S": pk}, "kind": {"S": kind}, **extra}
    local.client("dynamodb").put_item(TableName=local.outputs["TableName"], Item=item)


def test_pipe_is_created_by_cloudformation_and_runs(local):
    pipe = local.client("pipes").describe_pipe(Name=local.outputs["PipeName"])
    assert pipe["Arn"] == local.outputs["PipeArn"]
    assert pipe["DesiredState"] == "RUNNING"
    stats = local.engine.stats()[f"pipe:{local.outputs['PipeName']}"]
    assert stats["kind"] == "dynamodb"
    assert stats["state"] == "Enabled"


def test_each_record_reaches_exactly_the_matching_rules_queues(local):
    _put(local, "1", "a", items={"L": [{"M": {"k": {"S": "x"}}}]})
    _put(local, "2", "b")
    _put(local, "3", "c")  # the pipe's filter drops it
    local.settle()
    in_a = local.drain("QueueA")
    in_ab = local.drain("QueueAB")
    assert len(in_a) == 1
    assert len(in_ab) == 2
    event = json.loads(in_a[0]["Body"])
    assert list(event) == [
        "version", "id", "detail-type", "source", "account", "time", "region", "resources",
        "detail",
    ]  # fmt: skip
    assert event["version"] == "0"
    assert event["source"] == f"Pipe {local.outputs['PipeName']}"
    assert event["detail-type"] == "Event from aws:dynamodb"
    assert event["account"] == ACCOUNT
    assert event["region"] == REGION
    assert event["resources"] == []
    assert time.strptime(event["time"], "%Y-%m-%dT%H:%M:%SZ")
    detail = event["detail"]
    assert detail["eventName"] == "INSERT"
    assert detail["eventSource"] == "aws:dynamodb"
    assert detail["eventSourceARN"].startswith(f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/")
    assert detail["dynamodb"]["NewImage"]["kind"] == {"S": "a"}
    assert detail["dynamodb"]["Keys"] == {"pk": {"S": "1"}}
    # InputPath: the target gets only what the path selects
    kinds = sorted(json.loads(m["Body"])["kind"]["S"] for m in in_ab)
    assert kinds == ["a", "b"]


def test_a_record_the_bus_refuses_goes_to_the_dead_letter_queue(local, monkeypatch):
    def refuse(self, events):
        return [{"ErrorCode": "InternalFailure", "ErrorMessage": "down"} for _ in events]

    monkeypatch.setattr(EventsBackend, "put_events", refuse)
    _put(local, "4", "a")
    local.settle()
    monkeypatch.undo()
    assert local.drain("QueueA") == []
    dead = local.drain("DeadLetterQueue")
    assert len(dead) == 1
    record = json.loads(dead[0]["Body"])
    assert record["requestContext"]["functionArn"] == local.outputs["PipeArn"]
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 2  # MaximumRetryAttempts 1
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1


def pipe_metric(local, metric: str) -> float:
    """The Sum of the pipe's ``metric`` over the last five minutes, as its alarm reads it."""
    now = datetime.now(UTC)
    [result] = local.client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/EventBridge/Pipes",
                        "MetricName": metric,
                        "Dimensions": [{"Name": "PipeName", "Value": local.outputs["PipeName"]}],
                    },
                    "Period": 300,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
    )["MetricDataResults"]
    return sum(result["Values"])


def test_a_record_the_pipes_role_may_not_deliver_goes_to_the_dead_letter_queue(local):
    """... and each execution of it (the first and its one retry) counts in the pipe's
    ExecutionFailed and TargetStageFailed."""
    before = {
        m: pipe_metric(local, m)
        for m in ("ExecutionFailed", "TargetStageFailed", "Invocations", "EventCount")
    }
    iam = local.client("iam")
    role = local.outputs["PipeRoleName"]
    withheld = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Action": "events:PutEvents", "Resource": "*"}],
    }
    iam.put_role_policy(RoleName=role, PolicyName="withhold", PolicyDocument=json.dumps(withheld))
    try:
        _put(local, "withheld", "a")
        local.settle()
    finally:
        iam.delete_role_policy(RoleName=role, PolicyName="withhold")
    assert local.drain("QueueA") == []
    (dead,) = local.drain("DeadLetterQueue")
    record = json.loads(dead["Body"])
    assert record["requestContext"]["functionArn"] == local.outputs["PipeArn"]
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    counted = {m: pipe_metric(local, m) - before[m] for m in before}
    assert counted == {
        "ExecutionFailed": 2.0,
        "TargetStageFailed": 2.0,
        "Invocations": 2.0,
        "EventCount": 2.0,
    }


def test_stopped_pipe_delivers_nothing_until_started(local):
    pipes = local.client("pipes")
    name = local.outputs["PipeName"]
    pipes.stop_pipe(Name=name)
    local.engine.refresh()
    _put(local, "5", "a")
    # bounded: the record would reach QueueA within a few polls if the stopped pipe delivered
    assert stable(lambda: local.depth("QueueA"), polls=4, timeout=30, interval=0.1) == 0
    pipes.start_pipe(Name=name)
    local.engine.refresh()
    local.settle()
    assert [json.loads(m["Body"])["detail"]["dynamodb"]["Keys"] for m in local.drain("QueueA")] == [
        {"pk": {"S": "5"}}
    ]
    local.drain("QueueAB")


def test_sns_filter_policies_route_by_attribute_and_by_body(local):
    sns = local.client("sns")
    topic = local.outputs["TopicArn"]

    def publish(body, kind=None):
        attributes = {"kind": {"DataType": "String", "StringValue": kind}} if kind else {}
        sns.publish(TopicArn=topic, Message=json.dumps(body), MessageAttributes=attributes)

    publish({"kind": "SURVEY", "n": 1}, "SURVEY")
    publish({"kind": "GIFT_CARD", "n": 2}, "GIFT_CARD")
    publish({"kind": "OTHER", "wait_seconds": 900}, "OTHER")
    publish({"kind": "OTHER", "wait_seconds": 10}, "OTHER")
    survey = local.drain("QueueSurvey")
    gift = local.drain("QueueGift")
    # raw delivery: the body is the message itself
    assert [json.loads(m["Body"]) for m in survey] == [{"kind": "SURVEY", "n": 1}]
    # no raw delivery: the SNS envelope, the message in "Message"
    assert sorted(json.loads(json.loads(m["Body"])["Message"])["kind"] for m in gift) == [
        "GIFT_CARD",
        "OTHER",
    ]


def test_a_pipe_to_a_topic_publishes_each_record_itself_for_body_filters(local):
    _put(local, "t1", "t", flag={"S": "yes"})
    _put(local, "t2", "t", flag={"S": "no"})  # the subscription's body filter drops it
    _put(local, "t3", "a", flag={"S": "yes"})  # the topic pipe's own filter drops it
    local.settle()
    flagged = local.drain("QueueFlagged")
    assert len(flagged) == 1
    # raw delivery of what the pipe published: the stream record, as the consumers parse it
    change = stream_record(flagged[0]["Body"])
    assert change.event_name.name == "INSERT"
    assert change.event_source == "aws:dynamodb"
    assert change.event_source_arn.startswith(f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/")
    assert change.dynamodb.keys == {"pk": "t1"}
    assert change.dynamodb.new_image["flag"] == "yes"
    local.drain("QueueA")  # the bus pipe took t3 (kind a)
    local.drain("QueueAB")


def test_a_batch_the_topic_refuses_goes_to_the_pipes_dead_letter_queue(local, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise RuntimeError("down")

    monkeypatch.setattr(SNSBackend, "publish", refuse)
    _put(local, "t4", "t", flag={"S": "yes"})
    local.settle()
    monkeypatch.undo()
    assert local.drain("QueueFlagged") == []
    dead = local.drain("TopicPipeDeadLetterQueue")
    assert len(dead) == 1
    record = json.loads(dead[0]["Body"])
    assert record["requestContext"]["functionArn"] == local.outputs["TopicPipeArn"]
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["DDBStreamBatchInfo"]["batchSize"] == 1


FIFO_TOPIC = "arn:aws:sns:us-east-1:123456789012:changes.fifo"
TOPIC = "arn:aws:sns:us-east-1:123456789012:changes"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"Enrichment": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "Enrichment"),
        ({"Target": "arn:aws:sqs:us-east-1:123456789012:q"}, "and state machines only"),
        ({"Target": FIFO_TOPIC}, "does not support SNS FIFO topics"),
        (
            {
                "Target": TOPIC,
                "SourceParameters": {
                    "DynamoDBStreamParameters": {"StartingPosition": "LATEST", "BatchSize": 11}
                },
            },
            r"BatchSize 11 is above what the target takes in one call \(10\)",
        ),
        (
            {
                "SourceParameters": {
                    "DynamoDBStreamParameters": {"StartingPosition": "LATEST", "BatchSize": 100}
                },
            },
            r"BatchSize 100 is above what the target takes in one call \(10\)",
        ),
        (
            {
                "Target": TOPIC,
                "TargetParameters": {"EventBridgeEventBusParameters": {"Source": "s"}},
            },
            "TargetParameters.EventBridgeEventBusParameters does not apply to an sns target",
        ),
        (
            {"TargetParameters": {"InputTemplate": "{}"}},
            "TargetParameters.InputTemplate is not emulated",
        ),
        (
            {
                "SourceParameters": {
                    "DynamoDBStreamParameters": {"StartingPosition": "LATEST", "BatchSize": 20000}
                }
            },
            "BatchSize must be between 1 and 10000",
        ),
        (
            {
                "SourceParameters": {
                    "DynamoDBStreamParameters": {"StartingPosition": "LATEST"},
                    "FilterCriteria": {"Filters": [{"Pattern": '{"a": "x"}'}]},
                }
            },
            r"SourceParameters.FilterCriteria.Filters\[0\].Pattern.a: must be an object",
        ),
    ],
)
def test_what_the_local_stack_does_not_run_is_refused(local, change, message):
    pipe = local.client("pipes").describe_pipe(Name=local.outputs["PipeName"])
    request = {
        "Name": "refused",
        "RoleArn": pipe["RoleArn"],
        "Source": pipe["Source"],
        "Target": pipe["Target"],
        "SourceParameters": {"DynamoDBStreamParameters": {"StartingPosition": "LATEST"}},
        **change,
    }
    with pytest.raises(local.client("pipes").exceptions.ValidationException, match=message):
        local.client("pipes").create_pipe(**request)
