"""What the unit tests and the benchmark need to run handlers in process (mock_aws): the stack's
stores and queues as plain moto resources (keys and stream settings as template.yaml gives them),
a handler loaded cold, and the Lambda context it is called with."""

import functools
import importlib.util
import os
import sys
import uuid
from dataclasses import dataclass
from types import ModuleType

import boto3

from emulator.process import ACCOUNT, REGION
from harness import ROOT

FUNCTIONS_DIR = ROOT / "functions"


@dataclass
class Resources:
    bucket: str
    contacts_table: str
    idempotency_table: str
    ingest_queue_url: str
    notification_queue_url: str
    topic_arn: str
    topic_capture_url: str  # a FIFO queue subscribed to the FIFO topic with raw delivery

    def function_env(self) -> dict[str, str]:
        """The variables template.yaml hands the functions, pointing at these resources."""
        return {
            "CONTACTS_TABLE_NAME": self.contacts_table,
            "IDEMPOTENCY_TABLE_NAME": self.idempotency_table,
            "INGEST_QUEUE_URL": self.ingest_queue_url,
            "NOTIFICATION_QUEUE_URL": self.notification_queue_url,
            "NOTIFICATIONS_TOPIC_ARN": self.topic_arn,
        }


def client(service: str):
    """A boto3 client of the region, built once per endpoint (creating one costs ~0.1 s; moto's
    mock intercepts whatever client calls while it is active)."""
    return _client(service, os.environ.get("AWS_ENDPOINT_URL"))


@functools.cache
def _client(service: str, endpoint_url: str | None):
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint_url)


def create_stream_table(dynamodb, name: str, sort_key_type: str = "S") -> str:
    """A table keyed as ContactsTable (pk, sk) with a NEW_AND_OLD_IMAGES stream; its stream ARN."""
    return dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": sort_key_type},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]


def create_resources(prefix: str = "") -> Resources:
    """Create the resources under moto (call inside mock_aws or against a moto server)."""
    dynamodb = client("dynamodb")
    create_stream_table(dynamodb, f"{prefix}contacts")
    dynamodb.create_table(
        TableName=f"{prefix}idempotency",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    s3 = client("s3")
    bucket = f"{prefix}contacts-bucket"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    sqs = client("sqs")
    ingest_url = sqs.create_queue(QueueName=f"{prefix}ingest")["QueueUrl"]
    notification_url = sqs.create_queue(QueueName=f"{prefix}notifications")["QueueUrl"]
    capture_url = sqs.create_queue(
        QueueName=f"{prefix}topic-capture.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    capture_arn = sqs.get_queue_attributes(QueueUrl=capture_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    sns = client("sns")
    topic_arn = sns.create_topic(
        Name=f"{prefix}notifications.fifo",
        Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"},
    )["TopicArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=capture_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return Resources(
        bucket=bucket,
        contacts_table=f"{prefix}contacts",
        idempotency_table=f"{prefix}idempotency",
        ingest_queue_url=ingest_url,
        notification_queue_url=notification_url,
        topic_arn=topic_arn,
        topic_capture_url=capture_url,
    )


def load_handler(function_dir: str, monkeypatch=None) -> ModuleType:
    """functions/<function_dir>/app.py imported as a fresh module: a cold start (its module-level
    clients and settings built afresh). Every handler module is called `app`, so each load gets a
    unique module name. With ``monkeypatch``, as Lambda starts the function:
    AWS_LAMBDA_FUNCTION_NAME set and the function's directory first on sys.path (the task root)."""
    path = FUNCTIONS_DIR / function_dir / "app.py"
    if monkeypatch is not None:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", f"{function_dir}-function")
        monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"app_{function_dir}_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cold_start(function_dir: str, monkeypatch) -> ModuleType:
    """load_handler under a Powertools service name of its own. Powertools configures a service's
    logger once per process, bound to the sys.stdout of that moment: a fresh name, loaded in the
    test's body (capsys swaps sys.stdout between setup and call), lets capsys see the handler's
    JSON logs as CloudWatch would."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", f"{function_dir}-{uuid.uuid4().hex[:8]}")
    return load_handler(function_dir, monkeypatch)


class FakeLambdaContext:
    """The attributes of a Lambda context that Powertools and the handlers read."""

    def __init__(self, function_name: str = "test-function", remaining_ms: int = 30_000):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 256
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "2026/11/29/[$LATEST]test"
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


# Who reads a context's remaining time for a claim's in-progress expiry: Powertools, and the
# layer's claims for a batch.
CLAIMERS = ("aws_lambda_powertools", "shared/aws/batch_claims.py")


class ShrinkingClock(FakeLambdaContext):
    """A Lambda context whose remaining time shrinks by `cost_ms` each time the function reads it,
    so an invocation that checks the clock per step of work lasts a fixed number of steps.

    Powertools reads it too, for the in-progress expiry of a claim, as does shared.aws.batch_claims
    for the claims it takes through Powertools: to them it answers 0 by default. SQS redelivers a
    message only after its visibility timeout, later than the deadline of an invocation that
    crashed with it, so by then the claim such a crash left behind has expired; a test that
    redelivers at once must see it expired too. With `claims_held` it answers them the time left
    (without shrinking it): a test that keeps its own clock (tests/unit/model/pipeline.py) lets
    the claim expire when its clock passes the invocation's deadline, and a duplicate delivered
    before then meets the claim in progress."""

    def __init__(self, remaining_ms: int = 30_000, cost_ms: int = 5_000, claims_held: bool = False):
        super().__init__(remaining_ms=remaining_ms)
        self.cost_ms = cost_ms
        self.claims_held = claims_held

    def get_remaining_time_in_millis(self) -> int:
        caller = sys._getframe(1).f_code.co_filename
        if any(claimer in caller for claimer in CLAIMERS):
            return max(self._remaining_ms, 0) if self.claims_held else 0
        remaining = self._remaining_ms
        self._remaining_ms -= self.cost_ms
        return remaining
