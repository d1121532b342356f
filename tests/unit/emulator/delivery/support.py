"""What the delivery tests share (not a test module): the scripted runtime that stands in for
the function workers, the AWS side made through the APIs of a moto server, the waits."""

import copy
import functools
import io
import json
import threading
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.config import Config

from emulator.delivery.engine import EventSourceMappingEngine
from emulator.lambda_.workers import InvokeResult
from emulator.process import REGION
from emulator.services import dynamodbstreams
from harness.polling import eventually
from tests.unit.emulator.support import STREAM_OF_BOTH_IMAGES, pk_table

CLIENT_CONFIG = Config(account_id_endpoint_mode="disabled", retries={"max_attempts": 2})


# Returns as soon as the condition holds; the bound is for a loaded CI machine, where the unit
# run shares two cores with the integration suites (a 10 s bound timed out there).
wait_for = functools.partial(eventually, timeout=60.0, interval=0.05)


class FakeRuntime:
    """Records each invocation; ``behaviour(records, call_index)`` scripts the result:
    return a payload (the function's response) or raise to make the invocation fail."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[tuple[str, dict]] = []
        self.behaviour: Callable[[list[dict], int], object] = lambda records, n: None
        self.active = 0
        self.max_active = 0
        self.delay = 0.0
        self.unregistered: set[str] = set()  # functions whose code is not on the runtime yet

    def runnable(self, function_name: str) -> bool:
        return function_name not in self.unregistered

    def invoke(self, function_name: str, event: dict | bytes) -> InvokeResult:
        if isinstance(event, bytes):  # the engine sends the event JSON, encoded once
            event = json.loads(event)
        with self.lock:
            index = len(self.calls)
            self.calls.append((function_name, copy.deepcopy(event)))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            try:
                payload = self.behaviour(event["Records"], index)
            except Exception as error:
                return InvokeResult(
                    False, None, {"errorType": type(error).__name__, "errorMessage": str(error)}
                )
            return InvokeResult(True, json.loads(json.dumps(payload)), None)
        finally:
            with self.lock:
                self.active -= 1

    @property
    def batches(self) -> list[list[dict]]:
        with self.lock:
            return [event["Records"] for _, event in self.calls]


def failures(*identifiers: str) -> dict:
    return {"batchItemFailures": [{"itemIdentifier": i} for i in identifiers]}


class Aws:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        kwargs = {
            "endpoint_url": endpoint,
            "region_name": REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "config": CLIENT_CONFIG,
        }
        self._kwargs = kwargs
        self.sqs = boto3.client("sqs", **kwargs)
        self.ddb = boto3.client("dynamodb", **kwargs)
        self.streams = boto3.client("dynamodbstreams", **kwargs)
        self.lam = boto3.client("lambda", **kwargs)
        self.iam = boto3.client("iam", **kwargs)
        self.cloudwatch = boto3.client("cloudwatch", **kwargs)
        role = self.iam.create_role(RoleName="esm-test", AssumeRolePolicyDocument="{}")
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("app.py", "def lambda_handler(event, context):\n    return None\n")
        self.function_arn = self.lam.create_function(
            FunctionName="consumer",
            Runtime="python3.13",
            Role=role["Role"]["Arn"],
            Handler="app.lambda_handler",
            Code={"ZipFile": archive.getvalue()},
            Timeout=1,  # Lambda refuses a queue whose visibility timeout is below it
        )["FunctionArn"]

    def client(self, service: str):
        """Another service's client of the same endpoint."""
        return boto3.client(service, **self._kwargs)

    def queue(self, name: str, visibility: int = 1, **attributes: str) -> tuple[str, str]:
        url = self.sqs.create_queue(
            QueueName=name, Attributes={"VisibilityTimeout": str(visibility), **attributes}
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return url, arn["Attributes"]["QueueArn"]

    def table(self, name: str, shards: int = 1) -> str:
        """A table with a stream of ``shards`` shards (the local stack's default is 4; most tests
        here look at one shard's order)."""
        description = self.ddb.create_table(
            **pk_table(name, StreamSpecification=STREAM_OF_BOTH_IMAGES)
        )
        arn = description["TableDescription"]["LatestStreamArn"]
        with pytest.MonkeyPatch.context() as patch:  # the shard count is read once, here
            patch.setenv(dynamodbstreams.SHARDS_ENV, str(shards))
            self.streams.describe_stream(StreamArn=arn)
        return arn

    def put(self, table: str, pk: str, **attrs: str) -> None:
        item = {"pk": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
        self.ddb.put_item(TableName=table, Item=item)

    def mapping(self, source_arn: str, **settings) -> str:
        return self.lam.create_event_source_mapping(
            EventSourceArn=source_arn, FunctionName="consumer", **settings
        )["UUID"]

    def send(self, url: str, *bodies: str) -> list[str]:
        return [self.sqs.send_message(QueueUrl=url, MessageBody=b)["MessageId"] for b in bodies]

    def drain(self, url: str) -> list[dict]:
        messages = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return messages
            messages.extend(got)

    def counts(self, url: str) -> tuple[int, int]:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )["Attributes"]
        return (
            int(attrs["ApproximateNumberOfMessages"]),
            int(attrs["ApproximateNumberOfMessagesNotVisible"]),
        )


def stats_of(esm: EventSourceMappingEngine, mapping: str) -> dict:
    return esm.stats()[mapping]


def runtime_keys(runtime: FakeRuntime) -> list[str]:
    return [r["dynamodb"]["Keys"]["pk"]["S"] for b in runtime.batches for r in b]


def event_counts(aws: Aws, mapping: str) -> dict[str, float]:
    """The mapping's event-count metrics (AWS/Lambda per EventSourceMappingUUID), summed."""
    cloudwatch = aws.cloudwatch
    found = {}
    for metric in cloudwatch.list_metrics(
        Namespace="AWS/Lambda",
        Dimensions=[{"Name": "EventSourceMappingUUID", "Value": mapping}],
    )["Metrics"]:
        name = metric["MetricName"]
        points = cloudwatch.get_metric_statistics(
            Namespace="AWS/Lambda",
            MetricName=name,
            Dimensions=metric["Dimensions"],
            StartTime=datetime.now(UTC) - timedelta(hours=1),
            EndTime=datetime.now(UTC) + timedelta(minutes=1),
            Period=3600,
            Statistics=["Sum"],
        )["Datapoints"]
        found[name] = sum(p["Sum"] for p in points)
    return found
