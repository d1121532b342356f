"""Shared fixtures for the unit tests: moto in-process (mock_aws) with the resources the functions
use, created with the keys template.yaml gives them, and each handler loaded fresh inside the mock
so its module-level clients talk to moto, as a cold start would."""

import importlib.util
import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from moto import mock_aws

ROOT = Path(__file__).resolve().parents[2]
# The layer's package is importable as in Lambda (/opt/python), before any handler is loaded.
sys.path.insert(0, str(ROOT / "layers" / "shared"))

REGION = "us-east-1"
GOODWILL_WAIT_SECONDS = 600


@dataclass
class Stack:
    """The resources of one test, named as the stack outputs name them."""

    bucket: str
    contacts_table: str
    idempotency_table: str
    ingest_queue_url: str
    notification_queue_url: str
    topic_arn: str
    topic_capture_url: str  # a queue subscribed to the topic with raw delivery

    @property
    def dynamodb(self):
        return boto3.client("dynamodb", region_name=REGION)

    @property
    def s3(self):
        return boto3.client("s3", region_name=REGION)

    @property
    def sqs(self):
        return boto3.client("sqs", region_name=REGION)

    def drain(self, queue_url: str) -> list[dict]:
        """Every message currently in a queue, removed from it."""
        messages = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            for message in batch:
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            messages.extend(batch)

    def published(self) -> list[dict]:
        """Bodies of the messages that reached NotificationsTopic."""
        return [json.loads(m["Body"]) for m in self.drain(self.topic_capture_url)]


@pytest.fixture
def stack(monkeypatch) -> Stack:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_METRICS_NAMESPACE": "ContactCenter",
        "POWERTOOLS_SERVICE_NAME": "unit-tests",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "GOODWILL_WAIT_SECONDS": str(GOODWILL_WAIT_SECONDS),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="contacts",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        dynamodb.create_table(
            TableName="idempotency",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="contacts-bucket")
        s3.put_bucket_versioning(
            Bucket="contacts-bucket", VersioningConfiguration={"Status": "Enabled"}
        )
        sqs = boto3.client("sqs", region_name=REGION)
        ingest_url = sqs.create_queue(QueueName="ingest")["QueueUrl"]
        notification_url = sqs.create_queue(QueueName="notifications")["QueueUrl"]
        capture_url = sqs.create_queue(QueueName="topic-capture")["QueueUrl"]
        sns = boto3.client("sns", region_name=REGION)
        topic_arn = sns.create_topic(Name="notifications")["TopicArn"]
        capture_arn = sqs.get_queue_attributes(QueueUrl=capture_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        sns.subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=capture_arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        for name, value in {
            "CONTACTS_TABLE_NAME": "contacts",
            "IDEMPOTENCY_TABLE_NAME": "idempotency",
            "NOTIFICATION_QUEUE_URL": notification_url,
            "NOTIFICATIONS_TOPIC_ARN": topic_arn,
        }.items():
            monkeypatch.setenv(name, value)
        yield Stack(
            bucket="contacts-bucket",
            contacts_table="contacts",
            idempotency_table="idempotency",
            ingest_queue_url=ingest_url,
            notification_queue_url=notification_url,
            topic_arn=topic_arn,
            topic_capture_url=capture_url,
        )


def load_handler(function_dir: str, monkeypatch=None) -> ModuleType:
    """Import functions/<function_dir>/app.py as a fresh module (a cold start).

    Every handler module is called `app`, so each load gets a unique module name; the function's
    own directory goes first on sys.path as Lambda's task root does.
    """
    path = ROOT / "functions" / function_dir / "app.py"
    if monkeypatch is not None:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", f"{function_dir}-function")
        monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"app_{function_dir}_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeLambdaContext:
    """The attributes of a Lambda context that Powertools and the handlers read."""

    def __init__(self, function_name: str = "test-function", remaining_ms: int = 30_000):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "2026/11/29/[$LATEST]test"
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
