"""Integration fixtures: one suite, two targets.

- AWS: with AWS_SAM_STACK_NAME set and no AWS_ENDPOINT_URL, the tests run against that deployed
  stack; its resources come from the stack outputs (cloudformation describe_stacks), as the SAM
  pipeline templates do it. Credentials and region come from the usual boto3 chain.
- Local (everything else): a session fixture starts the local stack
  (`python -m emulator up --port <free port in 4800-4899> --duplicate-rate 0.05`: some batches
  are delivered twice in every run, see DUPLICATE_RATE), waits for its `ready` line, points
  every boto3 client at it with dummy credentials and reads the same outputs from its
  CloudFormation, under the samconfig.toml stack name.

Every test creates its own data (unique prefix, contact ids and callers), waits with bounded
polling (`eventually`) and removes what it created, so the suite can run again and again against a
long-lived stack.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import gzip
import io
import json
import os
import sys
import time
import tomllib
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
# The layer's pure modules (keys, rules) are the single source of the table keys and the rules.
if str(ROOT / "layers" / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "layers" / "shared"))

from shared import keys, model, rules  # noqa: E402

from emulator.process import LocalStackProcess, free_port  # noqa: E402

LOCAL_PORTS = range(4800, 4900)
READY_TIMEOUT = 90.0
# The local stack delivers 5% of its SQS and stream batches twice (the duplicate_rate switch):
# Lambda's pollers are at-least-once, so every run, and not only the duplicate tests, should meet
# some duplicates. A suite run delivers a few hundred batches, so 5% is a few dozen duplicates
# spread over the tests (each one mostly on the normal path), for a few percent more invocations.
DUPLICATE_RATE = 0.05
LOCAL_REGION = "us-east-1"
OUTPUT_NAMES = (
    "ContactsBucketName",
    "ContactsTableName",
    "IdempotencyTableName",
    "IngestQueueUrl",
    "IngestDeadLetterQueueUrl",
    "NotificationQueueUrl",
    "NotificationDeadLetterQueueUrl",
    "StreamFailureQueueUrl",
    "NotificationsTopicArn",
    "RouteFunctionName",
)

# The local stack this session started (its output tail is shown when something failed).
_LOCAL_STACKS: list[LocalStackProcess] = []


# --------------------------------------------------------------------------------------------
# Polling
# --------------------------------------------------------------------------------------------
def eventually(fn: Callable[[], Any], timeout: float = 30.0, interval: float = 0.5) -> Any:
    """Call ``fn`` until it returns a truthy value without raising AssertionError.

    Returns that value; after ``timeout`` seconds raises AssertionError carrying the last failure
    (the last assertion message or the last falsy value), so a timeout says what was missing.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = fn()
            if value:
                return value
            last = f"last value: {value!r}"
        except AssertionError as error:
            last = error
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout:.0f} s: {last}")
        time.sleep(interval)


def stable(fn: Callable[[], Any], polls: int = 3, timeout: float = 30.0, interval: float = 0.7):
    """Bounded wait until ``fn()`` returns the same value ``polls`` times in a row; return it.

    Used before counting side effects: "exactly one" needs a pipeline that stopped moving, not
    just the first message to have arrived.
    """
    seen: list[Any] = []

    def settled():
        seen.append(fn())
        del seen[:-polls]
        return len(seen) == polls and all(v == seen[0] for v in seen)

    eventually(settled, timeout=timeout, interval=interval)
    return seen[-1]


# --------------------------------------------------------------------------------------------
# The local stack
# --------------------------------------------------------------------------------------------
def samconfig() -> dict[str, Any]:
    path = ROOT / "samconfig.toml"
    if not path.exists():
        return {}
    with path.open("rb") as handle:
        return tomllib.load(handle)


def samconfig_stack_name() -> str:
    config = samconfig().get("default", {})
    for section in ("global", "deploy"):
        name = config.get(section, {}).get("parameters", {}).get("stack_name")
        if name:
            return name
    return "last-agent-routing"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for local in _LOCAL_STACKS:
        if local.killed:
            terminalreporter.write_line(
                f"local stack: no exit within {local.stop_seconds:.0f} s of SIGTERM, killed",
                yellow=True,
            )
        if exitstatus not in (0, 5) and local.lines():
            terminalreporter.section("local stack output (tail)")
            for line in local.lines(60):
                terminalreporter.write_line(line)


# --------------------------------------------------------------------------------------------
# The stack as the tests see it
# --------------------------------------------------------------------------------------------
@dataclass
class Stack:
    name: str
    region: str
    outputs: dict[str, str]
    local: LocalStackProcess | None = None
    _clients: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.local is not None

    def client(self, service: str):
        if service not in self._clients:
            self._clients[service] = boto3.client(
                service,
                region_name=self.region,
                config=Config(retries={"max_attempts": 8, "mode": "standard"}),
            )
        return self._clients[service]

    @property
    def s3(self):
        return self.client("s3")

    @property
    def sqs(self):
        return self.client("sqs")

    @property
    def dynamodb(self):
        return self.client("dynamodb")

    @property
    def bucket(self) -> str:
        return self.outputs["ContactsBucketName"]

    @property
    def contacts_table(self) -> str:
        return self.outputs["ContactsTableName"]

    # -- faults (local only) --------------------------------------------------------------------
    def faults(self, **switches: Any) -> dict:
        assert self.local, "fault switches exist only on the local stack"
        return self.local.control("/_emulator/faults", switches)

    def reset_faults(self) -> None:
        if not self.local:
            return
        current = self.local.control("/_emulator/faults")
        self.local.control(
            "/_emulator/faults",
            {
                "duplicate_deliveries": 1,
                "duplicate_rate": DUPLICATE_RATE,
                "sqs_pollers": None,  # Lambda's scaling
                "crash_after_side_effects": dict.fromkeys(
                    current.get("crash_after_side_effects", {}), 0
                ),
                "crash_after_call": [],
                "throttle": [],
            },
        )

    def failed_invocations(self, logical_id: str) -> int:
        """Failed invocations of a function the local engine reported so far (0 on AWS)."""
        if not self.local:
            return 0
        failed = list(self.local.failed_invocations)
        return sum(1 for failure in failed if f"-{logical_id}-" in failure.function)

    def status(self) -> dict:
        return self.local.control("/_emulator/status") if self.local else {}

    # -- queues ----------------------------------------------------------------------------------
    def queue_attributes(self, output: str, *names: str) -> dict[str, str]:
        return self.sqs.get_queue_attributes(
            QueueUrl=self.outputs[output], AttributeNames=list(names) or ["All"]
        )["Attributes"]

    def queue_depth(self, output: str) -> int:
        """Messages in a queue, visible or in flight (delayed ones included)."""
        attributes = self.queue_attributes(
            output,
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
        return sum(int(v) for v in attributes.values())

    def peek(self, output: str, rounds: int = 3) -> list[dict]:
        """Messages of a queue without consuming them (received with a zero visibility timeout).

        Meant for dead-letter queues, where nothing else receives.
        """
        found: dict[str, dict] = {}
        for _ in range(rounds):
            for message in self.sqs.receive_message(
                QueueUrl=self.outputs[output],
                MaxNumberOfMessages=10,
                VisibilityTimeout=0,
                WaitTimeSeconds=0 if self.is_local else 1,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", []):
                found[message["MessageId"]] = message
        return list(found.values())

    def delete_where(self, output: str, predicate: Callable[[dict], bool], rounds: int = 5):
        """Remove a test's own messages (those ``predicate`` picks) from a queue that nothing
        else consumes (DLQs, failure queues); the others become visible again at once."""
        url = self.outputs[output]
        for _ in range(rounds):
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=5, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return
            for message in messages:
                if predicate(message):
                    self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    self.sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )

    def pipeline_idle(self) -> bool:
        """Nothing left to do: work queues empty (in-flight included), local engine idle if it
        says so."""
        if self.queue_depth("IngestQueueUrl") or self.queue_depth("NotificationQueueUrl"):
            return False
        status = self.status()
        return bool(status.get("idle", True))

    # -- table -----------------------------------------------------------------------------------
    def contacts_of(self, caller: str) -> list[dict]:
        items: list[dict] = []
        kwargs: dict[str, Any] = {
            "TableName": self.contacts_table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :sk)",
            "ExpressionAttributeValues": {
                ":pk": {"S": keys.caller_pk(caller)},
                ":sk": {"S": "CONTACT#"},
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.dynamodb.query(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_item(self, key: dict[str, str]) -> dict | None:
        return self.dynamodb.get_item(
            TableName=self.contacts_table,
            Key={name: {"S": value} for name, value in key.items()},
            ConsistentRead=True,
        ).get("Item")

    def delete_items(self, item_keys: Iterable[dict[str, str]]) -> None:
        for key in item_keys:
            self.dynamodb.delete_item(
                TableName=self.contacts_table,
                Key={name: {"S": value} for name, value in key.items()},
            )

    # -- route -----------------------------------------------------------------------------------
    def route(self, caller: str) -> dict[str, str]:
        response = self.client("lambda").invoke(
            FunctionName=self.outputs["RouteFunctionName"],
            Payload=json.dumps(connect_event(caller)).encode(),
        )
        payload = json.loads(response["Payload"].read() or b"null")
        assert "FunctionError" not in response, f"RouteFunction failed: {payload}"
        return payload

    # -- event source mappings -------------------------------------------------------------------
    def queue_arn(self, output: str) -> str:
        return self.queue_attributes(output, "QueueArn")["QueueArn"]

    def mapping_of(self, output: str) -> dict:
        mappings = self.client("lambda").list_event_source_mappings(
            EventSourceArn=self.queue_arn(output)
        )["EventSourceMappings"]
        assert len(mappings) == 1, f"expected one mapping on {output}, found {mappings}"
        return mappings[0]

    def set_mapping_enabled(self, output: str, enabled: bool, timeout: float = 120.0) -> None:
        mapping = self.mapping_of(output)
        self.client("lambda").update_event_source_mapping(UUID=mapping["UUID"], Enabled=enabled)
        wanted = "Enabled" if enabled else "Disabled"

        def reached():
            state = self.client("lambda").get_event_source_mapping(UUID=mapping["UUID"])["State"]
            assert state == wanted, f"mapping state {state}, waiting for {wanted}"
            return True

        eventually(reached, timeout=timeout, interval=0.5 if self.is_local else 3)

    def pause_ingest(self, timeout: float = 60.0) -> None:
        """Disable the IngestFunction mapping and make sure delivery really stopped.

        "Disabled" should mean stopped (AWS says "Disabling" until it is), but the local stack
        reports "Disabled" at once and its poller can still receive for a moment. So an
        s3:TestEvent canary (harmless: acknowledged once delivery resumes) has to stay in the
        queue over a few polls; a consumed canary is replaced until one stays.
        """
        self.set_mapping_enabled("IngestQueueUrl", False)
        canary = json.dumps(
            {
                "Service": "Amazon S3",
                "Event": "s3:TestEvent",
                "Bucket": self.bucket,
                "RequestId": f"it-canary-{uuid.uuid4().hex}",
            }
        )

        def canary_stays():
            if self.queue_depth("IngestQueueUrl") == 0:
                self.sqs.send_message(QueueUrl=self.outputs["IngestQueueUrl"], MessageBody=canary)
            return stable(lambda: self.queue_depth("IngestQueueUrl"), polls=4, timeout=10) > 0

        eventually(canary_stays, timeout=timeout, interval=0.2)


def outputs_of(cloudformation, stack_name: str) -> dict[str, str]:
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    missing = [name for name in OUTPUT_NAMES if name not in outputs]
    assert not missing, f"stack {stack_name} lacks outputs {missing}"
    return outputs


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    stack_name = os.environ.get("AWS_SAM_STACK_NAME")
    if stack_name and not os.environ.get("AWS_ENDPOINT_URL"):
        session = boto3.session.Session()
        region = session.region_name or os.environ.get("AWS_REGION") or LOCAL_REGION
        cloudformation = session.client("cloudformation", region_name=region)
        yield Stack(stack_name, region, outputs_of(cloudformation, stack_name))
        return

    local = LocalStackProcess(
        free_port(LOCAL_PORTS),
        up_args=["--duplicate-rate", str(DUPLICATE_RATE)],
        tail_lines=80,
    )
    _LOCAL_STACKS.append(local)
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            patch.delenv(name, raising=False)
        for name, value in {
            "AWS_ENDPOINT_URL": local.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": LOCAL_REGION,
            "AWS_REGION": LOCAL_REGION,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }.items():
            patch.setenv(name, value)
        try:
            local.start(READY_TIMEOUT)
        except RuntimeError as error:
            pytest.fail(f"{error}:\n{local.tail()}", pytrace=False)
        try:
            stack_name = samconfig_stack_name()
            cloudformation = boto3.client("cloudformation", region_name=LOCAL_REGION)
            yield Stack(stack_name, LOCAL_REGION, outputs_of(cloudformation, stack_name), local)
        finally:
            local.stop()


@pytest.fixture
def local_stack(stack: Stack) -> Iterator[Stack]:
    """The stack, for tests that need the local fault switches; faults reset afterwards."""
    if not stack.is_local:
        pytest.skip("needs local fault injection")
    stack.reset_faults()
    try:
        yield stack
    finally:
        stack.reset_faults()


# --------------------------------------------------------------------------------------------
# Per-test data and clean-up
# --------------------------------------------------------------------------------------------
class Files:
    """A test's own corner of the bucket: incoming/it-<uuid>/..., removed with every version."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.prefix = f"incoming/it-{uuid.uuid4().hex[:12]}/"
        self.versions: list[tuple[str, str]] = []

    def put(self, name: str, body: bytes) -> tuple[str, str | None]:
        key = self.prefix + name
        response = self.stack.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body)
        if response.get("VersionId"):
            self.versions.append((key, response["VersionId"]))
        return key, response.get("VersionId")

    def put_jsonl(self, name: str, rows: Iterable[dict | str]) -> tuple[str, str | None]:
        return self.put(name, jsonl(rows))

    def read_report(self, key: str) -> list[dict]:
        body = self.stack.s3.get_object(Bucket=self.stack.bucket, Key=report_key(key))["Body"]
        return [json.loads(line) for line in body.read().decode().splitlines() if line.strip()]

    def report_exists(self, key: str) -> bool:
        try:
            self.stack.s3.head_object(Bucket=self.stack.bucket, Key=report_key(key))
        except self.stack.s3.exceptions.ClientError:
            return False
        return True

    def cleanup(self) -> None:
        """Objects (every version) and reports under the prefix; no processing log item stays
        behind either (the rejected/ reports are not ingested: they are outside incoming/)."""
        for prefix in (self.prefix, "rejected/" + self.prefix):
            delete_all_versions(self.stack.s3, self.stack.bucket, prefix)

    def forget_processing_logs(self) -> None:
        """The processing log of every file, and the newest version recorded for every key."""
        self.stack.delete_items(
            keys.processing_log_key(f"{self.stack.bucket}/{key}#{version}")
            for key, version in self.versions
        )
        self.stack.delete_items(
            keys.object_key(self.stack.bucket, key) for key in {key for key, _ in self.versions}
        )


def delete_all_versions(s3, bucket: str, prefix: str) -> None:
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        objects = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if objects:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})


def report_key(key: str) -> str:
    return f"rejected/{key}.errors.jsonl"


@pytest.fixture
def files(stack: Stack) -> Iterator[Files]:
    corner = Files(stack)
    try:
        yield corner
    finally:
        corner.cleanup()
        corner.forget_processing_logs()


@pytest.fixture
def contact_cleanup(stack: Stack) -> Iterator[list[str]]:
    """Callers a test used: their CONTACT (with its CONTACT_REF), LAST_AGENT and GIFT_CARD items
    are removed at the end (idempotency records stay: their keys are hashes of unique contact
    ids, and they expire)."""
    callers: list[str] = []
    yield callers
    for caller in callers:
        contacts = stack.contacts_of(caller)
        item_keys = [{"pk": i["pk"]["S"], "sk": i["sk"]["S"]} for i in contacts]
        item_keys += [keys.gift_card_key(i["contact_id"]["S"]) for i in contacts]
        item_keys += [keys.contact_ref_key(i["contact_id"]["S"]) for i in contacts]
        item_keys.append(keys.last_agent_key(caller))
        stack.delete_items(item_keys)


class TopicCapture:
    """A FIFO queue subscribed to NotificationsTopic (raw delivery): what a subscriber gets. A
    FIFO subscriber keeps the FIFO topic's exactly-once delivery (a standard queue would get
    SNS's at-least-once), so every duplicate it sees is one the application sent."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.messages: list[dict] = []
        sqs = stack.sqs
        self.url = sqs.create_queue(
            QueueName=f"it-topic-capture-{uuid.uuid4().hex[:12]}.fifo",
            Attributes={"FifoQueue": "true"},
        )["QueueUrl"]
        self.arn = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        topic_arn = stack.outputs["NotificationsTopicArn"]
        if not stack.is_local:
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "sns.amazonaws.com"},
                        "Action": "sqs:SendMessage",
                        "Resource": self.arn,
                        "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                    }
                ],
            }
            sqs.set_queue_attributes(QueueUrl=self.url, Attributes={"Policy": json.dumps(policy)})
        self.subscription_arn = stack.client("sns").subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=self.arn,
            Attributes={"RawMessageDelivery": "true"},
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]

    def collect(self) -> list[dict]:
        """Receive (and delete) what arrived; return every message collected so far."""
        while True:
            batch = self.stack.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0 if self.stack.is_local else 1,
            ).get("Messages", [])
            if not batch:
                return self.messages
            for message in batch:
                body = json.loads(message["Body"])
                attribute = message.get("MessageAttributes", {}).get("kind", {})
                body["_kind_attribute"] = attribute.get("StringValue")
                self.messages.append(body)
            self.stack.sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
                ],
            )

    def for_contacts(self, contact_ids: Iterable[str]) -> list[dict]:
        wanted = set(contact_ids)
        return [m for m in self.collect() if m.get("contact_id") in wanted]

    def counts(self, contact_ids: Iterable[str]) -> collections.Counter:
        return collections.Counter(
            (m["kind"], m["contact_id"]) for m in self.for_contacts(contact_ids)
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stack.client("sns").unsubscribe(SubscriptionArn=self.subscription_arn)
        with contextlib.suppress(Exception):
            self.stack.sqs.delete_queue(QueueUrl=self.url)


@pytest.fixture
def topic(stack: Stack) -> Iterator[TopicCapture]:
    capture = TopicCapture(stack)
    try:
        yield capture
    finally:
        capture.close()


# --------------------------------------------------------------------------------------------
# Data builders
# --------------------------------------------------------------------------------------------
BASE_TIME = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def new_caller() -> str:
    """A unique, valid E.164 number in the fictional 555 range."""
    return "+1555" + f"{uuid.uuid4().int % 10**7:07d}"


def new_contact_id(tag: str = "c") -> str:
    return f"it-{tag}-{uuid.uuid4().hex[:16]}"


def contact(
    caller: str,
    *,
    minutes: int = 0,
    agent_id: str | None = "agent-1",
    disposition: str = "ESCALATED",
    wait_seconds: int = 5,
    email: str | None = None,
    survey_opt_in: bool | None = None,
    contact_id: str | None = None,
    queue: str | None = "support",
) -> dict:
    """One valid input row; ``minutes`` places its end relative to a fixed base time."""
    ended = BASE_TIME + timedelta(minutes=minutes)
    row: dict[str, Any] = {
        "contact_id": contact_id or new_contact_id(),
        "caller": caller,
        "started_at": (ended - timedelta(seconds=wait_seconds + 120)).isoformat(),
        "ended_at": ended.isoformat().replace("+00:00", "Z"),
        "disposition": disposition,
        "wait_seconds": wait_seconds,
    }
    if agent_id is not None:
        row["agent_id"] = agent_id
    if queue is not None:
        row["queue"] = queue
    if email is not None:
        row["email"] = email
    if survey_opt_in is not None:
        row["survey_opt_in"] = survey_opt_in
    return row


def jsonl(rows: Iterable[dict | str]) -> bytes:
    return "".join(
        (row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows
    ).encode()


def csv_gz(rows: Iterable[dict]) -> bytes:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=model.INPUT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {
                **row,
                "survey_opt_in": (
                    "" if "survey_opt_in" not in row else str(row["survey_opt_in"]).lower()
                ),
            }
        )
    return gzip.compress(text.getvalue().encode())


def connect_event(caller: str) -> dict:
    """An Amazon Connect contact flow event (Lambda function invoked from a flow)."""
    contact_id = str(uuid.uuid4())
    return {
        "Name": "ContactFlowEvent",
        "Details": {
            "ContactData": {
                "Attributes": {},
                "Channel": "VOICE",
                "ContactId": contact_id,
                "CustomerEndpoint": {"Address": caller, "Type": "TELEPHONE_NUMBER"},
                "InitialContactId": contact_id,
                "InitiationMethod": "INBOUND",
                "InstanceARN": "arn:aws:connect:us-east-1:123456789012:instance/"
                "00000000-0000-0000-0000-000000000000",
                "PreviousContactId": contact_id,
                "Queue": None,
                "SystemEndpoint": {"Address": "+18005550100", "Type": "TELEPHONE_NUMBER"},
            },
            "Parameters": {},
        },
    }


# Clear of any sensible GoodwillWaitSeconds on either side: the tests do not depend on its value.
SHORT_WAIT = 5
LONG_WAIT = 100_000


# --------------------------------------------------------------------------------------------
# Expectations and waits shared by the tests
# --------------------------------------------------------------------------------------------
def expected_notifications(rows: list[dict]) -> Counter:
    expected: Counter = Counter()
    for row in rows:
        if rules.survey_due(row):
            expected[(keys.SURVEY, row["contact_id"])] += 1
        if rules.gift_card_due(row, rules.DEFAULT_GOODWILL_WAIT_SECONDS):
            expected[(keys.GIFT_CARD, row["contact_id"])] += 1
    return expected


def processing_log(stack: Stack, key: str, version: str | None) -> dict | None:
    """The file's processing log once its outcome is final; None before (a file is IN_PROGRESS
    from its first step's start, and longer when it takes more than one step)."""
    log = _any_processing_log(stack, key, version)
    return log if log and log["outcome"]["S"] != "IN_PROGRESS" else None


def _any_processing_log(stack: Stack, key: str, version: str | None) -> dict | None:
    if version is None:  # unversioned bucket: the file id ends in the (unknown) sequencer
        items = stack.dynamodb.scan(
            TableName=stack.contacts_table,
            FilterExpression="#t = :t AND #k = :k",
            ExpressionAttributeNames={"#t": "type", "#k": "key"},
            ExpressionAttributeValues={":t": {"S": keys.PROCESSING_LOG}, ":k": {"S": key}},
            ConsistentRead=True,
        )["Items"]
        return items[0] if items else None
    return stack.get_item(keys.processing_log_key(f"{stack.bucket}/{key}#{version}"))


def wait_for_notifications(stack: Stack, topic, expected: Counter, timeout: float = 90) -> Counter:
    """Until every expected notification arrived and the pipeline stopped moving; the counts."""
    contact_ids = {contact_id for _, contact_id in expected}

    def all_arrived():
        missing = set(expected) - set(topic.counts(contact_ids))
        assert not missing, f"not yet at the topic: {sorted(missing)}"
        return True

    eventually(all_arrived, timeout=timeout, interval=0.5)
    eventually(stack.pipeline_idle, timeout=timeout, interval=0.5)
    return stable(lambda: topic.counts(contact_ids), polls=3, timeout=timeout)
