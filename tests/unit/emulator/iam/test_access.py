"""Least privilege at run time on the local server: a small SAM template deployed, its function run
in a real worker, each AWS call decided against the function's role as deployed; what the role
does not allow fails with the service's own AccessDenied and is not applied; the record and the
report list denied calls and unused grants."""

import json
import textwrap
import urllib.request

import pytest

from emulator.cli import iam_report
from emulator.deploy.translate import load_template
from tests.unit.emulator.support import checked_stack, endpoint_client, function_project

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Metadata:
  UnusedGrants:
    - Actions: ["logs:*"]
      Reason: Lambda writes the logs.
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
  Queue:
    Type: AWS::SQS::Queue
  Topic:
    Type: AWS::SNS::Topic
  Bucket:
    Type: AWS::S3::Bucket
  # the resource policies: one allows what the role does not, one denies what the role allows
  OpenTopic:
    Type: AWS::SNS::Topic
  OpenTopicPolicy:
    Type: AWS::SNS::TopicPolicy
    Properties:
      Topics: [!Ref OpenTopic]
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Sid: FnPublishes
            Effect: Allow
            Principal: {AWS: !GetAtt FnRole.Arn}
            Action: sns:Publish
            Resource: !Ref OpenTopic
  BucketPolicy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref Bucket
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Sid: SealedFiles
            Effect: Deny
            Principal: "*"
            Action: s3:GetObject
            Resource: !Sub "${Bucket.Arn}/incoming/sealed/*"
  # a bucket encrypted with a key whose policy lets Fn read through S3, not write
  Key:
    Type: AWS::KMS::Key
    Properties:
      KeyPolicy:
        Version: "2012-10-17"
        Statement:
          - Sid: AccountAdministers
            Effect: Allow
            Principal: {AWS: !Sub "arn:aws:iam::${AWS::AccountId}:root"}
            Action: [kms:DescribeKey, kms:PutKeyPolicy]
            Resource: "*"
          - Sid: FnDecryptsThroughS3
            Effect: Allow
            Principal: {AWS: !GetAtt FnRole.Arn}
            Action: kms:Decrypt
            Resource: "*"
            Condition:
              StringEquals: {kms:ViaService: !Sub "s3.${AWS::Region}.amazonaws.com"}
  KeyedBucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "${AWS::StackName}-keyed"  # named: Fn's role -> bucket -> key -> role
      BucketEncryption:
        ServerSideEncryptionConfiguration:
          - ServerSideEncryptionByDefault:
              SSEAlgorithm: aws:kms
              KMSMasterKeyID: !GetAtt Key.Arn
  Fn:
    Type: AWS::Serverless::Function
    Metadata:
      UnusedGrants:
        - Actions: [s3:ListBucket]
          Reason: never called here.
    Properties:
      Runtime: python3.13
      Handler: app.lambda_handler
      CodeUri: fn/
      Timeout: 30
      Environment:
        Variables:
          TABLE: !Ref Table
          QUEUE_URL: !Ref Queue
          TOPIC_ARN: !Ref Topic
          OPEN_TOPIC_ARN: !Ref OpenTopic
          KEYED_BUCKET: !Ref KeyedBucket
          BUCKET: !Ref Bucket
      Policies:
        - Statement:
            - Sid: OwnItems
              Effect: Allow
              Action: [dynamodb:GetItem, dynamodb:UpdateItem]
              Resource: !GetAtt Table.Arn
              Condition:
                ForAllValues:StringLike:
                  dynamodb:LeadingKeys: ["own#*"]
            - Sid: ReadIncoming
              Effect: Allow
              Action: [s3:GetObject, s3:ListBucket]
              Resource: [!Sub "${Bucket.Arn}/incoming/*", !GetAtt Bucket.Arn]
            - Sid: KeyedFiles
              Effect: Allow
              Action: [s3:GetObject, s3:PutObject]
              Resource: !Sub "arn:aws:s3:::${AWS::StackName}-keyed/*"
        - SQSSendMessagePolicy:
            QueueName: !GetAtt Queue.QueueName
"""

HANDLER = textwrap.dedent(
    """
    import os
    import boto3

    CLIENTS = {}

    def lambda_handler(event, context):
        results = []
        for service, method, kwargs in event["calls"]:
            client = CLIENTS.setdefault(service, boto3.client(service))
            kwargs = {k: os.environ.get(v[1:], v) if isinstance(v, str) and v.startswith("$")
                      else v for k, v in kwargs.items()}
            try:
                getattr(client, method)(**kwargs)
                results.append("ok")
            except Exception as error:
                results.append(error.response["Error"]["Code"])
        return results
    """
)


class Local:
    def __init__(self, server, runtime, deployment, template):
        self.server, self.runtime, self.deployment = server, runtime, deployment
        self.template = template
        self.env = {k: v for spec in deployment.functions for k, v in spec.environment.items()}

    def client(self, service):
        return endpoint_client(service, self.server.endpoint_url)

    def run(self, *calls):
        result = self.runtime.invoke("Fn", {"calls": [list(c) for c in calls]})
        assert result.ok, result.error
        return result.payload


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    template = function_project(project, TEMPLATE, HANDLER, "iam")
    with checked_stack(template, project / "logs") as (server, runtime, deployment):
        yield Local(server, runtime, deployment, template)


def test_calls_the_role_allows_go_through(local):
    local.client("s3").put_object(Bucket=local.env["BUCKET"], Key="incoming/a", Body=b"x")
    assert local.run(
        ("dynamodb", "get_item", {"TableName": "$TABLE", "Key": {"pk": {"S": "own#1"}}}),
        ("s3", "get_object", {"Bucket": "$BUCKET", "Key": "incoming/a"}),
        ("sqs", "send_message", {"QueueUrl": "$QUEUE_URL", "MessageBody": "m"}),
    ) == ["ok", "ok", "ok"]


def test_calls_the_role_does_not_allow_fail_with_the_services_access_denied(local):
    other = {"pk": {"S": "other#1"}}
    assert local.run(
        ("dynamodb", "get_item", {"TableName": "$TABLE", "Key": other}),  # LeadingKeys
        ("dynamodb", "put_item", {"TableName": "$TABLE", "Item": {"pk": {"S": "own#2"}}}),
        ("s3", "put_object", {"Bucket": "$BUCKET", "Key": "incoming/b", "Body": "x"}),
        ("s3", "get_object", {"Bucket": "$BUCKET", "Key": "rejected/a"}),
        ("sns", "publish", {"TopicArn": "$TOPIC_ARN", "Message": "m"}),
        ("sqs", "purge_queue", {"QueueUrl": "$QUEUE_URL"}),
    ) == [
        "AccessDeniedException",
        "AccessDeniedException",
        "AccessDenied",
        "AccessDenied",
        "AuthorizationError",
        "AccessDenied",
    ]
    table = local.client("dynamodb")
    assert "Item" not in table.get_item(TableName=local.env["TABLE"], Key={"pk": {"S": "own#2"}})


def test_a_resource_policy_allows_what_the_role_does_not_and_its_deny_beats_the_roles_allow(local):
    bucket, topic = local.env["BUCKET"], local.env["OPEN_TOPIC_ARN"]
    local.client("s3").put_object(Bucket=bucket, Key="incoming/sealed/a", Body=b"x")
    assert local.run(
        ("sns", "publish", {"TopicArn": "$OPEN_TOPIC_ARN", "Message": "m"}),
        ("s3", "get_object", {"Bucket": "$BUCKET", "Key": "incoming/sealed/a"}),
    ) == ["ok", "AccessDenied"]
    calls = local.server.access.snapshot()["functions"]["Fn"]["calls"]
    (published,) = [c for c in calls if c["resource"] == topic]
    assert published["grants"] == [f"policy of {topic}/FnPublishes"]
    (sealed,) = [c for c in calls if c["resource"].endswith("incoming/sealed/a")]
    assert sealed["denied_by"] == f"policy of arn:aws:s3:::{bucket}/SealedFiles"
    assert "aws:principalarn" not in sealed["context"]  # the record keeps the request's own keys


def test_an_encrypted_object_needs_the_key_policy_to_let_s3_use_the_key_for_the_caller(local):
    bucket = local.env["KEYED_BUCKET"]
    local.client("s3").put_object(Bucket=bucket, Key="a", Body=b"x")  # the test: not checked
    assert local.run(
        ("s3", "get_object", {"Bucket": "$KEYED_BUCKET", "Key": "a"}),
        ("s3", "put_object", {"Bucket": "$KEYED_BUCKET", "Key": "b", "Body": "x"}),
    ) == ["ok", "AccessDenied"]
    assert "Contents" not in local.client("s3").list_objects_v2(Bucket=bucket, Prefix="b")
    calls = local.server.access.snapshot()["functions"]["Fn"]["calls"]
    decrypt, generate = (
        next(c for c in calls if c["action"] == action)
        for action in ("kms:Decrypt", "kms:GenerateDataKey")
    )
    assert decrypt["allowed"] and decrypt["grants"][0].endswith("/FnDecryptsThroughS3")
    assert decrypt["context"]["kms:viaservice"] == ["s3.us-east-1.amazonaws.com"]
    assert generate["allowed"] is False


def test_with_enforcement_off_a_denied_call_is_applied_and_recorded(local):
    local.server.access.enforce = False
    try:
        item = {"pk": {"S": "own#3"}}
        assert local.run(("dynamodb", "put_item", {"TableName": "$TABLE", "Item": item})) == ["ok"]
    finally:
        local.server.access.enforce = True
    table = local.client("dynamodb")
    assert "Item" in table.get_item(TableName=local.env["TABLE"], Key=item)
    calls = local.server.access.snapshot()["functions"]["Fn"]["calls"]
    denied = [c for c in calls if c["action"] == "dynamodb:PutItem"]
    assert {c["allowed"] for c in denied} == {False}
    assert sum(c["count"] for c in denied) >= 1  # this call, and the refused one of another test


# Each test makes the calls it looks at (the worker running it may not have run the others).
def own_and_others_reads(local) -> None:
    local.run(
        ("dynamodb", "get_item", {"TableName": "$TABLE", "Key": {"pk": {"S": "own#1"}}}),
        ("dynamodb", "get_item", {"TableName": "$TABLE", "Key": {"pk": {"S": "other#1"}}}),
        ("sns", "publish", {"TopicArn": "$TOPIC_ARN", "Message": "m"}),
    )


def test_the_record_keeps_no_item_data_and_the_control_endpoint_serves_it(local):
    own_and_others_reads(local)
    with urllib.request.urlopen(local.server.endpoint_url + "/_emulator/iam") as response:
        record = json.loads(response.read())
    calls = record["functions"]["Fn"]["calls"]
    leading = {k for c in calls for k in c["context"].get("dynamodb:leadingkeys", [])}
    assert leading == {"own#*", "other#*"}


def test_the_report_lists_unused_grants_and_denied_calls(local):
    own_and_others_reads(local)
    report = iam_report.build([local.server.access.snapshot()], load_template(local.template))
    [function] = report.functions
    unexplained = {action for _, action, why in function.unused if why is None}
    explained = {action for _, action, why in function.unused if why is not None}
    assert "dynamodb:UpdateItem" in unexplained  # granted, never called
    assert "dynamodb:GetItem" not in unexplained | explained  # used
    assert {"s3:ListBucket", "logs:CreateLogGroup"} <= explained
    assert {c["action"] for c in function.denied} >= {"dynamodb:GetItem", "sns:Publish"}
    assert report.failed
    assert "NOT EXPLAINED" in iam_report.render(report)
