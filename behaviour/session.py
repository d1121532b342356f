"""One case's view of an endpoint: boto3 clients that turn "not served" answers into
``Unsupported``, and the helpers the cases share (a function deployed by CloudFormation that
reports every event it gets, queues, a table with a stream, waiting)."""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from behaviour.case import Unsupported

REGION = "us-east-1"
# What a target answers for an operation or service it does not implement.
NOT_SERVED_CODES = frozenset(
    {
        "NotImplemented",
        "NotImplementedException",
        "InvalidAction",
        "UnknownOperation",
        "UnknownOperationException",
        "UnsupportedOperation",
        "404",
        "501",
    }
)
NOT_SERVED_STATUS = frozenset({404, 501})
# The function's timeout (Lambda's default) and its source queues' visibility timeout, twice
# it: Lambda refuses a mapping whose queue's is the shorter, and with the two equal, an
# invocation slowed by a busy machine ended after its messages reappeared, so a message the
# function had processed was delivered again (a CI run of sqs_partial_batch_response_with_filter).
FUNCTION_TIMEOUT = 3
VISIBILITY = 2 * FUNCTION_TIMEOUT
# What the emulators accept; against AWS, run with a profile's credentials instead.
DUMMY_CREDENTIALS = dict.fromkeys(("aws_access_key_id", "aws_secret_access_key"), "testing")

# The function every mapping and pipe invokes: it sends each event it gets to the queue
# OBSERVE_QUEUE (so a case sees every batch: its records and their order), raises when a record
# says "raise" and reports as failed every record that says "fail" (partial batch response).
HANDLER = """
import json, os

try:
    import boto3

    sqs = boto3.client("sqs", endpoint_url=os.environ.get("OBSERVE_ENDPOINT") or None)
except ImportError:  # an emulator running functions without the runtime's boto3 (botocore only)
    import botocore.session

    sqs = botocore.session.get_session().create_client(
        "sqs",
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_url=os.environ.get("OBSERVE_ENDPOINT") or None,
    )


def text(record):
    if "body" in record:
        return record["body"]
    image = record.get("dynamodb", {}).get("NewImage", {})
    return image.get("body", {}).get("S", "")


def identifier(record):
    return record.get("messageId") or record["dynamodb"]["SequenceNumber"]


def handler(event, context):
    records = event if isinstance(event, list) else event.get("Records", [])
    sqs.send_message(QueueUrl=os.environ["OBSERVE_QUEUE"], MessageBody=json.dumps(event))
    if any("raise" in text(r) for r in records):
        raise RuntimeError("a record said raise")
    failed = [{"itemIdentifier": identifier(r)} for r in records if "fail" in text(r)]
    return {"batchItemFailures": failed}
"""
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "pipes.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}
ALLOW_ALL = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}


@dataclass(frozen=True)
class Function:
    name: str
    arn: str
    role_arn: str
    observe_url: str


class _Client:
    """A boto3 client whose calls raise Unsupported where the target does not serve them."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("get_") and name in {"get_waiter", "get_paginator"}:
            return attribute
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attribute(*args, **kwargs)
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                not_found = code.endswith("NotFound") or "NotFound" in code
                if code in NOT_SERVED_CODES or (status in NOT_SERVED_STATUS and not not_found):
                    service = self._client.meta.service_model.service_name
                    raise Unsupported(f"{service} {name}: {code or status}") from error
                raise

        return call


class Session:
    def __init__(self, endpoint: str, case_name: str) -> None:
        self.endpoint = endpoint
        # Short and unique: resource names have length limits (SQS 80, a function 64).
        self.prefix = f"bh{uuid.uuid4().hex[:6]}-{case_name.replace('_', '')[:24]}"
        self._config = Config(retries={"max_attempts": 2, "mode": "standard"})
        self._clients: dict[str, _Client] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = _Client(
                boto3.client(
                    service,
                    endpoint_url=self.endpoint,
                    region_name=REGION,
                    **DUMMY_CREDENTIALS,
                    config=self._config,
                )
            )
        return self._clients[service]

    # -- resources ----------------------------------------------------------------------------
    def queue(self, suffix: str, *, fifo: bool = False, **attributes: str) -> tuple[str, str]:
        """A new queue: (url, arn)."""
        sqs = self.client("sqs")
        name = f"{self.prefix}-{suffix}" + (".fifo" if fifo else "")
        if fifo:
            attributes["FifoQueue"] = "true"
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return url, arn["Attributes"]["QueueArn"]

    def queue_with_dlq(self, max_receive_count: int) -> tuple[str, str, str]:
        """A queue whose messages move to a dead-letter queue after ``max_receive_count``
        receives: (url, arn, dlq url)."""
        dlq_url, dlq_arn = self.queue("dlq")
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
        url, arn = self.queue(
            "src", VisibilityTimeout=str(VISIBILITY), RedrivePolicy=json.dumps(redrive)
        )
        return url, arn, dlq_url

    def table_with_stream(self) -> tuple[str, str]:
        """A new table streaming new images: (name, stream arn). The items ``put_items`` writes
        share one partition key, so they are on one shard, in order."""
        ddb = self.client("dynamodb")
        name = f"{self.prefix}-table"
        table = ddb.create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )["TableDescription"]
        wait_for(
            lambda: ddb.describe_table(TableName=name)["Table"]["TableStatus"] == "ACTIVE",
            "the table to be ACTIVE",
        )
        return name, table["LatestStreamArn"]

    def put_items(self, table: str, *bodies: str) -> None:
        """One item per body, in order (sort key: its position, zero-padded)."""
        ddb = self.client("dynamodb")
        for position, body in enumerate(bodies):
            item = {"pk": {"S": "p"}, "sk": {"S": f"{position:03d}"}, "body": {"S": body}}
            ddb.put_item(TableName=table, Item=item)

    def role(self) -> str:
        """A new role that Lambda and Pipes may assume, allowed everything: its ARN."""
        iam = self.client("iam")
        name = f"{self.prefix}-role"[:64]
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))
        iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL))
        return arn["Role"]["Arn"]

    def function(self, *, probe: bool = True) -> Function:
        """``HANDLER`` deployed by a CloudFormation change set (what `sam deploy` does), with a
        role allowed everything and the queue it reports its events to; with ``probe``, invoked
        once (Unsupported where the target cannot run it)."""
        s3, cfn = self.client("s3"), self.client("cloudformation")
        bucket = f"{self.prefix}-code".lower()
        s3.create_bucket(Bucket=bucket)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.writestr("index.py", HANDLER)
        s3.put_object(Bucket=bucket, Key="function.zip", Body=archive.getvalue())
        # Unique across stacks: the local stack's function runtime tells functions apart by
        # their logical ID (a second stack's "Function" would replace the first's).
        logical_id = "Fn" + self.prefix.split("-")[0]
        template = {
            "Resources": {
                "Observed": {"Type": "AWS::SQS::Queue"},
                "Role": {
                    "Type": "AWS::IAM::Role",
                    "Properties": {
                        "AssumeRolePolicyDocument": TRUST,
                        "Policies": [{"PolicyName": "all", "PolicyDocument": ALLOW_ALL}],
                    },
                },
                logical_id: {
                    "Type": "AWS::Lambda::Function",
                    "Properties": {
                        "Runtime": "python3.13",
                        "Handler": "index.handler",
                        "Timeout": FUNCTION_TIMEOUT,
                        "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                        "Code": {"S3Bucket": bucket, "S3Key": "function.zip"},
                        "Environment": {
                            "Variables": {
                                "OBSERVE_QUEUE": {"Ref": "Observed"},
                                "OBSERVE_ENDPOINT": self.endpoint,
                            }
                        },
                    },
                },
            },
        }
        stack = self.prefix
        self._deploy(cfn, stack, template)
        # By the stack's resources, not its Outputs: moto's server leaves a stack made by a
        # change set without Outputs.
        physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]
        }
        if logical_id not in physical:
            raise AssertionError(f"the change set created no function: {sorted(physical)}")
        lam, iam = self.client("lambda"), self.client("iam")
        function = Function(
            physical[logical_id],
            lam.get_function_configuration(FunctionName=physical[logical_id])["FunctionArn"],
            iam.get_role(RoleName=physical["Role"].rsplit("/", 1)[-1])["Role"]["Arn"],
            physical["Observed"],
        )
        if probe:
            self._check_invocable(function)
        return function

    def _deploy(self, cfn: Any, stack: str, template: dict[str, Any]) -> None:
        # A name of its own, not "create" for every stack: the local stack (moto) finds a
        # change set by its name alone, so stacks deployed at once executed each other's.
        change_set = f"{stack}-create"
        cfn.create_change_set(
            StackName=stack,
            ChangeSetName=change_set,
            ChangeSetType="CREATE",
            TemplateBody=json.dumps(template),
            Capabilities=["CAPABILITY_IAM"],
        )
        wait_for(
            lambda: _change_set_ready(cfn, stack, change_set),
            "the change set to be created",
            timeout=60,
        )
        cfn.execute_change_set(StackName=stack, ChangeSetName=change_set)
        wait_for(lambda: _stack_done(cfn, stack), "the stack to be created", timeout=60)

    def _check_invocable(self, function: Function) -> None:
        """Unsupported when the target cannot run the function at all (moto's server needs
        Docker for it), so the mapping cases say so instead of failing on a silent engine."""
        answer = self.client("lambda").invoke(
            FunctionName=function.name, Payload=json.dumps({"Records": []}).encode()
        )
        if "FunctionError" in answer:
            payload = answer["Payload"].read().decode(errors="replace")
            raise Unsupported(f"lambda Invoke of a deployed function: {payload[:160]}")
        self.messages(function.observe_url, 1, "the probe invocation's report", timeout=20)

    def mapping(self, function: Function, **settings: Any) -> str:
        """An event source mapping for ``function``, waited for until Enabled: its UUID."""
        lam = self.client("lambda")
        created = lam.create_event_source_mapping(FunctionName=function.name, **settings)
        mapping_id = created["UUID"]
        wait_for(
            lambda: lam.get_event_source_mapping(UUID=mapping_id)["State"] == "Enabled",
            "the mapping to be Enabled",
            timeout=60,
        )
        return mapping_id

    # -- observing ----------------------------------------------------------------------------
    def observed(
        self,
        function: Function,
        done: Callable[[list[Any]], bool],
        what: str,
        *,
        timeout: float = 30,
        settle: float = 0.0,
    ) -> list[Any]:
        """The events ``function`` got (in order of arrival), read until ``done`` holds of
        them, then for ``settle`` seconds more (to see what should not come)."""
        events: list[Any] = []
        sqs = self.client("sqs")
        deadline = time.monotonic() + timeout
        settled: float | None = None
        while True:
            for message in receive_all(sqs, function.observe_url, wait=1):
                events.append(json.loads(message["Body"]))
            now = time.monotonic()
            if settled is None and done(events):
                settled = now + settle
            if settled is not None and now >= settled:
                return events
            if now > deadline:
                raise AssertionError(f"timed out waiting for {what}; the function got {events}")

    def messages(
        self, url: str, count: int, what: str, *, timeout: float = 30, settle: float = 0.0
    ) -> list[dict[str, Any]]:
        """Messages of queue ``url`` (deleted as read) until ``count`` arrived, then for
        ``settle`` seconds more."""
        got: list[dict[str, Any]] = []
        sqs = self.client("sqs")
        deadline = time.monotonic() + timeout
        settled: float | None = None
        while True:
            got.extend(receive_all(sqs, url, wait=1))
            now = time.monotonic()
            if settled is None and len(got) >= count:
                settled = now + settle
            if settled is not None and now >= settled:
                return got
            if now > deadline:
                raise AssertionError(f"timed out waiting for {what}: {len(got)} of {count}")


def receive_all(sqs: Any, url: str, *, wait: int) -> list[dict[str, Any]]:
    """One receive of up to 10 messages (FIFO attributes included), deleted as read."""
    answer = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=wait,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    messages = answer.get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def queue_depth(sqs: Any, url: str) -> int:
    """Messages visible or in flight."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(value) for value in attributes.values())


def wait_for(check: Callable[[], bool], what: str, *, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _change_set_ready(cfn: Any, stack: str, name: str) -> bool:
    change_set = cfn.describe_change_set(StackName=stack, ChangeSetName=name)
    if change_set["Status"] == "FAILED":
        raise AssertionError(f"change set failed: {change_set.get('StatusReason')}")
    return change_set["Status"] == "CREATE_COMPLETE"


def _stack_done(cfn: Any, stack: str) -> bool:
    status = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    if status.endswith("FAILED") or "ROLLBACK" in status:
        raise AssertionError(f"stack {status}")
    return status.endswith("COMPLETE")
