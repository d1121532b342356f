"""Deploying a small SAM template onto the local moto server: outputs, mappings, gap fixes,
Lambda Invoke through the API, control endpoints, the invoke CLI."""

import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.deploy.deployer import deploy
from emulator.deploy.errors import DeployError
from emulator.process import REGION
from tests.unit.emulator.support import ROOT, deployed_stack

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Greeting:
    Type: String
    Default: hello
    AllowedPattern: "[a-z ]+"
Globals:
  Function:
    Runtime: python3.13
    Timeout: 5
    MemorySize: 256
    Layers: [!Ref SharedLayer]
Resources:
  SharedLayer:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: layer/
      CompatibleRuntimes: [python3.13]
    Metadata:
      BuildMethod: python3.13
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      VersioningConfiguration: {Status: Enabled}
      NotificationConfiguration:
        QueueConfigurations:
          - Event: s3:ObjectCreated:*
            Queue: !GetAtt Queue.Arn
            Filter: {S3Key: {Rules: [{Name: prefix, Value: incoming/}]}}
  DeadLetterQueue:
    Type: AWS::SQS::Queue
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 30
      RedrivePolicy: {deadLetterTargetArn: !GetAtt DeadLetterQueue.Arn, maxReceiveCount: 5}
  QueuePolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Queue]
      PolicyDocument:
        Statement:
          - Effect: Allow
            Principal: {Service: s3.amazonaws.com}
            Action: sqs:SendMessage
            Resource: !GetAtt Queue.Arn
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      StreamSpecification: {StreamViewType: NEW_AND_OLD_IMAGES}
  Topic:
    Type: AWS::SNS::Topic
  QueueFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: src/fn/
      Handler: app.lambda_handler
      Environment:
        Variables:
          TABLE_NAME: !Ref Table
          TOPIC_ARN: !Ref Topic
          GREETING: !Ref Greeting
      Policies:
        - DynamoDBCrudPolicy: {TableName: !Ref Table}
      Events:
        Sqs:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
            BatchSize: 10
            FunctionResponseTypes: [ReportBatchItemFailures]
  StreamFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: src/fn/
      Handler: app.lambda_handler
      Environment:
        Variables:
          QUEUE_URL: !Ref Queue
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BisectBatchOnFunctionError: true
            MaximumRetryAttempts: 2
            FilterCriteria:
              Filters:
                - Pattern: '{"eventName": ["INSERT"]}'
Outputs:
  BucketName: {Value: !Ref Bucket}
  QueueUrl: {Value: !Ref Queue}
  TableName: {Value: !Ref Table}
  TopicArn: {Value: !Ref Topic}
  FunctionName: {Value: !Ref QueueFunction}
  StreamArn: {Value: !GetAtt Table.StreamArn}
"""

SAMCONFIG = """
version = 0.1
[default.global.parameters]
stack_name = "tiny-stack"
[default.deploy.parameters]
parameter_overrides = "Greeting=\\"hi there\\""
"""

HANDLER = """
import json, os, time
import helper

def lambda_handler(event, context):
    marker = os.environ.get("MARKER_FILE") or "/nonexistent"
    if os.path.isdir(os.path.dirname(marker)):
        with open(marker, "a") as out:
            out.write(json.dumps(event) + "\\n")
    if event.get("fail"):
        raise RuntimeError("asked to fail")
    keys = ("TABLE_NAME", "TOPIC_ARN", "GREETING", "QUEUE_URL")
    return {"env": {k: os.environ[k] for k in keys if k in os.environ}, "layer": helper.VALUE}
"""


def write_project(root: Path) -> Path:
    (root / "src" / "fn").mkdir(parents=True)
    (root / "layer" / "helper").mkdir(parents=True)
    (root / "src" / "fn" / "app.py").write_text(textwrap.dedent(HANDLER))
    (root / "layer" / "helper" / "__init__.py").write_text("VALUE = 42\n")
    (root / "template.yaml").write_text(TEMPLATE)
    (root / "samconfig.toml").write_text(SAMCONFIG)
    return root / "template.yaml"


class Local:
    def __init__(self, server, deployment, runtime, project):
        self.server = server
        self.deployment = deployment
        self.runtime = runtime
        self.project = project
        self.endpoint_url = server.endpoint_url
        self.outputs = deployment.outputs

    def client(self, service):
        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1}),
        )

    def drain(self, queue_url):
        sqs = self.client("sqs")
        messages = []
        while True:
            batch = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not batch:
                return messages
            for m in batch:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            messages.extend(batch)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    template = write_project(project)
    with deployed_stack(template, project / ".emulator" / "logs") as (server, runtime, deployment):
        for spec in deployment.functions:
            spec.environment["MARKER_FILE"] = str(project / "marks" / f"{spec.logical_id}.jsonl")
            runtime.register(spec)
        server.serve(deployment.stack_name, access=None)
        yield Local(server, deployment, runtime, project)


def test_stack_is_deployed_under_the_samconfig_name_with_real_outputs(local):
    cfn = local.client("cloudformation")
    stack = cfn.describe_stacks(StackName="tiny-stack")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    assert outputs == local.outputs
    local.client("s3").head_bucket(Bucket=outputs["BucketName"])
    local.client("sqs").get_queue_attributes(QueueUrl=outputs["QueueUrl"])
    local.client("dynamodb").describe_table(TableName=outputs["TableName"])
    local.client("sns").get_topic_attributes(TopicArn=outputs["TopicArn"])
    local.client("lambda").get_function(FunctionName=outputs["FunctionName"])


def test_functions_get_code_layers_and_resolved_environment(local):
    specs = {f.logical_id: f for f in local.deployment.functions}
    assert set(specs) == {"QueueFunction", "StreamFunction"}
    fn = specs["QueueFunction"]
    assert fn.function_name == local.outputs["FunctionName"]
    assert fn.code_dir == local.project / "src" / "fn"
    assert fn.layer_dirs == [local.project / "layer"]
    assert fn.timeout == 5.0
    assert fn.memory_size == 256
    assert fn.environment["TABLE_NAME"] == local.outputs["TableName"]
    assert fn.environment["TOPIC_ARN"] == local.outputs["TopicArn"]
    assert fn.environment["GREETING"] == "hi there"  # samconfig parameter_overrides
    assert specs["StreamFunction"].environment["QUEUE_URL"] == local.outputs["QueueUrl"]


def test_lambda_invoke_runs_the_function_code(local):
    lam = local.client("lambda")
    response = lam.invoke(FunctionName=local.outputs["FunctionName"], Payload=b'{"a": 1}')
    assert "FunctionError" not in response
    payload = json.loads(response["Payload"].read())
    assert payload == {
        "env": {
            "TABLE_NAME": local.outputs["TableName"],
            "TOPIC_ARN": local.outputs["TopicArn"],
            "GREETING": "hi there",
        },
        "layer": 42,
    }


def test_lambda_invoke_error_is_unhandled_with_aws_error_document(local):
    lam = local.client("lambda")
    response = lam.invoke(FunctionName=local.outputs["FunctionName"], Payload=b'{"fail": true}')
    assert response["FunctionError"] == "Unhandled"
    error = json.loads(response["Payload"].read())
    assert error["errorType"] == "RuntimeError"
    assert error["errorMessage"] == "asked to fail"
    assert error["stackTrace"]


def test_event_source_mappings_are_kept_as_data(local):
    mappings = local.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    by_function = {m["FunctionArn"].rsplit(":", 1)[-1]: m for m in mappings}
    specs = {f.logical_id: f.function_name for f in local.deployment.functions}
    sqs_mapping = by_function[specs["QueueFunction"]]
    assert sqs_mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert sqs_mapping["State"] == "Enabled"
    stream_mapping = by_function[specs["StreamFunction"]]
    assert stream_mapping["EventSourceArn"] == local.outputs["StreamArn"]
    assert stream_mapping["FilterCriteria"] == {
        "Filters": [{"Pattern": '{"eventName": ["INSERT"]}'}]
    }
    assert stream_mapping["BisectBatchOnFunctionError"] is True
    assert stream_mapping["MaximumRetryAttempts"] == 2


def test_moto_delivers_nothing_itself(local):
    """No engine runs here: a write and a message stay where Lambda's pollers would find them."""
    ddb = local.client("dynamodb")
    ddb.put_item(TableName=local.outputs["TableName"], Item={"pk": {"S": "k1"}})
    ddb.put_item(TableName=local.outputs["TableName"], Item={"pk": {"S": "k1"}})  # unchanged
    ddb.put_item(TableName=local.outputs["TableName"], Item={"pk": {"S": "k1"}, "v": {"N": "1"}})
    local.drain(local.outputs["QueueUrl"])
    local.client("sqs").send_message(QueueUrl=local.outputs["QueueUrl"], MessageBody="hello")

    streams = local.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=local.outputs["StreamArn"])["StreamDescription"][
        "Shards"
    ][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=local.outputs["StreamArn"], ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    # the shard still holds the records, and an unchanged PutItem wrote none (as on AWS)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY"]
    messages = local.drain(local.outputs["QueueUrl"])
    assert [m["Body"] for m in messages] == ["hello"]
    assert messages[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert not (local.project / "marks").exists()  # no function ran


def test_bucket_is_versioned_and_notifies_the_queue_like_s3(local):
    s3 = local.client("s3")
    bucket = local.outputs["BucketName"]
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    local.drain(local.outputs["QueueUrl"])
    first = s3.put_object(Bucket=bucket, Key="incoming/a b/c+d.csv", Body=b"x")
    second = s3.put_object(Bucket=bucket, Key="incoming/a b/c+d.csv", Body=b"yy")
    s3.put_object(Bucket=bucket, Key="elsewhere/x.csv", Body=b"x")  # prefix filter
    records = [json.loads(m["Body"])["Records"][0] for m in local.drain(local.outputs["QueueUrl"])]
    assert len(records) == 2
    objects = sorted((r["s3"]["object"] for r in records), key=lambda o: o["sequencer"])
    assert [o["key"] for o in objects] == ["incoming/a+b/c%2Bd.csv"] * 2
    assert [o["versionId"] for o in objects] == [first["VersionId"], second["VersionId"]]
    assert [o["size"] for o in objects] == [1, 2]
    assert objects[0]["eTag"] == first["ETag"].strip('"')
    assert all(int(o["sequencer"], 16) for o in objects)
    record = records[0]
    assert record["eventSource"] == "aws:s3"
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["bucket"]["name"] == bucket
    assert record["eventTime"].endswith("Z")


def test_control_endpoints(local):
    base = local.endpoint_url + "/_emulator/"

    def call(path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(base + path, data=data, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    assert call("faults") == (
        200,
        {
            "duplicate_deliveries": 1,
            "duplicate_rate": 0.0,
            "reorder_rate": 0.0,
            "sqs_pollers": None,
            "crash_after_side_effects": {},
            "fail_invocations": {},
            "crash_after_call": [],
            "throttle": [],
            "crash_invocations": None,
            "seed": None,
            "injected": {},
        },
    )
    status, faults = call(
        "faults", {"duplicate_deliveries": 2, "crash_after_side_effects": {"X": 1}}
    )
    assert status == 200
    assert faults["duplicate_deliveries"] == 2
    assert local.server.faults.take_crash("X")
    assert call("faults", {"sqs_pollers": 0})[0] == 400
    assert call("faults", {"duplicate_deliveries": 1})[0] == 200
    status, body = call("status")
    assert status == 200
    assert body["stack_name"] == "tiny-stack"
    assert len(body["mappings"]) == 2
    assert call("nothing")[0] == 404


def test_invoke_cli_runs_one_function_like_sam_local_invoke(local, tmp_path):
    event = tmp_path / "event.json"
    event.write_text('{"fail": false}')
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL": local.endpoint_url,  # the running stack: real resource names
        "AWS_DEFAULT_REGION": REGION,
    }
    command = [sys.executable, "-m", "emulator", "invoke", "QueueFunction", "-e", str(event)]
    command += ["-t", str(local.project / "template.yaml")]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["env"]["TABLE_NAME"] == local.outputs["TableName"]

    event.write_text('{"fail": true}')
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert json.loads(done.stdout)["errorType"] == "RuntimeError"
    assert "asked to fail" in done.stderr  # the function's log goes to stderr


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"Nope": "1"}, "Parameters: [Nope] do not exist in the template"),
        ({"Greeting": "Hi!"}, "Parameter 'Greeting' must match pattern [a-z ]+"),
    ],
)
def test_a_parameter_cloudformation_refuses_is_refused_and_nothing_is_created(
    local, tmp_path, overrides, message
):
    template = write_project(tmp_path)
    with pytest.raises(DeployError) as refused:
        deploy(local.endpoint_url, template, stack_name="refused", parameter_overrides=overrides)
    assert str(refused.value) == message
    with pytest.raises(ClientError, match="Stack with id refused does not exist"):
        local.client("cloudformation").describe_stacks(StackName="refused")
