"""A deployed stack as its clients see it: boto3 against its resources, found by the stack's
outputs (cloudformation describe_stacks, as the SAM pipeline templates do it).

One class for both targets: a stack on AWS (``StackClient.deployed``: credentials and region from
the usual boto3 chain) and the local stack (``StackClient.local``: a `python -m emulator up`
process, dummy credentials, its endpoint). The local stack's control endpoints (faults, status,
the failed invocations its engine logged) are there only when ``local`` is set.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from shared import keys

from emulator.process import FailedInvocation, LocalStackProcess
from harness import ROOT  # (and the layer on sys.path)
from harness.builders import connect_event
from harness.polling import eventually
from ops import fan_out

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
    "ContactRecordsDeliveryStreamName",
)
# The queues of every stack; a stack of any fan-out mode but lambda adds a queue and a DLQ per
# consumer, and a DLQ per consumer for what the fan-out could not deliver to its queue
# (StackClient.work_queues, .failure_queues).
WORK_QUEUES = ("IngestQueueUrl", "NotificationQueueUrl", "MailQueueUrl", "MailEventsQueueUrl")
FAILURE_QUEUES = (
    "IngestDeadLetterQueueUrl",
    "NotificationDeadLetterQueueUrl",
    "MailDeadLetterQueueUrl",
    "MailEventsDeadLetterQueueUrl",
    "StreamFailureQueueUrl",
)
# The stream's consumers (LogicalIds). The fan-out mode (template parameter FanOut, the stack
# output FanOut: ops/fan_out.py's table) brings them the table's changes.
CONSUMERS = ("LastAgentFunction", "SurveyFunction", "GoodwillFunction")
# A failure record of a stream mapping reaches StreamFailureQueue within this (the mapping's
# retries of a batch that fails at once, with a margin).
STREAM_FAILURE_SECONDS = 120
RETRIES = Config(retries={"max_attempts": 8, "mode": "standard"})
# What one Firehose PutRecordBatch call takes (the API reference): 500 records, 4 MiB of them.
FIREHOSE_BATCH_RECORDS = 500
FIREHOSE_BATCH_BYTES = 4 * 1024 * 1024
# Rounds of putting again the entries a call reports failed (FailedPutCount), with backoff.
FIREHOSE_ATTEMPTS = 8
SAMCONFIG = ROOT / "samconfig.toml"


def fan_out_args(mode: str | None) -> list[str]:
    """The `emulator up` arguments that deploy the stack in fan-out mode ``mode``; none for None
    or "" (samconfig's parameter_overrides decide, else the template's default, lambda).
    ValueError for a mode the template does not have."""
    if not mode:
        return []
    return ["--parameter-overrides", f"FanOut={fan_out.mode(mode).name}"]


def samconfig_stack_name(path: Path = SAMCONFIG, environment: str = "default") -> str:
    """The stack name samconfig.toml gives an environment ([<env>.global.parameters])."""
    with path.open("rb") as config:
        return tomllib.load(config)[environment]["global"]["parameters"]["stack_name"]


def takes_host_prefix(endpoint: str) -> bool:
    """Whether an endpoint's host can take an operation's host prefix (StartSyncExecution's
    "sync-"): a name can, an IP address or localhost (the local stack's) cannot."""
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return True
    return False


@dataclass(frozen=True)
class FailureRoute:
    """Where the changes a stream consumer keeps failing on end up, in the stack's fan-out mode,
    and how an operator delivers them again (docs/design.md, "Fan-out modes").

    - lambda: StreamFailureQueue gets the mapping's failure record (DDBStreamBatchInfo: shard and
      sequence numbers, not the records; requestContext.functionArn names the consumer), once
      the retries are spent; ``python -m ops stream replay`` reads the batch back and invokes
      the consumer with it.
    - pipe, router, pipe-topic, pipe-sfn: the consumer's own <X>DeadLetterQueue gets the message
      itself (its body is the stream record) after maxReceiveCount receives; ``python -m ops dlq
      redrive <X>DeadLetterQueue`` moves it back to the consumer's queue.
    """

    function: str  # the consumer's LogicalId
    output: str  # the stack output of the queue the failures end in
    holds_records: bool  # True: each message is a stream record; False: a batch's failure record
    bound_seconds: float  # how long a change that fails every time takes to get there (margin)
    recover: tuple[str, ...]  # `python -m ops` arguments that deliver them again
    dry_run: tuple[str, ...] | None  # the same, showing only what it would do (None: no dry run)

    @property
    def queue(self) -> str:
        """The queue's name as ops and the docs call it (StreamFailureQueue, <X>DeadLetterQueue)."""
        return self.output.removesuffix("Url")


@dataclass
class StackClient:
    name: str
    session: boto3.session.Session
    outputs: dict[str, str]
    parameters: dict[str, str]
    local: LocalStackProcess | None = None
    _clients: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def deployed(cls, name: str) -> StackClient:
        return cls._described(name, boto3.session.Session(), None)

    @classmethod
    def local_stack(cls, process: LocalStackProcess) -> StackClient:
        """The stack a started `emulator up` process deployed (its name from the `ready` line)."""
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (the local stack's dummy credentials)
            region_name=process.region,
        )
        assert process.stack_name, "the local stack is not ready"
        return cls._described(process.stack_name, session, process)

    @classmethod
    def _described(
        cls, name: str, session: boto3.session.Session, local: LocalStackProcess | None
    ) -> StackClient:
        endpoint, verify = (local.endpoint, local.ca_bundle) if local else (None, None)
        cloudformation = session.client(
            "cloudformation", endpoint_url=endpoint, verify=verify, config=RETRIES
        )
        described = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        missing = [output for output in OUTPUT_NAMES if output not in outputs]
        assert not missing, f"stack {name} lacks outputs {missing}"
        parameters = {
            p["ParameterKey"]: p["ParameterValue"] for p in described.get("Parameters", [])
        }
        return cls(name, session, outputs, parameters, local)

    # -- clients ---------------------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return self.local is not None

    def client(self, service: str):
        """The stack's client of ``service``, made once."""
        if service not in self._clients:
            self._clients[service] = self.new_client(service)
        return self._clients[service]

    def new_client(self, service: str):
        """A client of ``service`` of its own (for a thread), reaching the stack."""
        endpoint = self.local.endpoint if self.local else os.environ.get("AWS_ENDPOINT_URL")
        config = RETRIES
        if endpoint and not takes_host_prefix(endpoint):
            config = config.merge(Config(inject_host_prefix=False))
        return self.session.client(
            service,
            endpoint_url=self.local.endpoint if self.local else None,
            verify=self.local.ca_bundle if self.local else None,  # served over TLS: its CA
            config=config,
        )

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

    @property
    def goodwill_wait_seconds(self) -> int:
        return int(self.parameters["GoodwillWaitSeconds"])

    # -- fan-out ---------------------------------------------------------------------------------
    @property
    def fan_out(self) -> str:
        """How the table's changes reach the consumers: the FanOut output (a mode of
        ops/fan_out.py); lambda for a stack from before the fan-out modes (no such output)."""
        return self.fan_out_mode.name

    @property
    def fan_out_mode(self) -> fan_out.FanOutMode:
        return fan_out.mode(self.outputs.get("FanOut", "lambda"))

    @property
    def consumers_read_queues(self) -> bool:
        """Every mode but lambda: each consumer reads its own queue (+DLQ), not the stream."""
        return self.fan_out_mode.consumer_queues

    @property
    def fan_out_dead_letters(self) -> bool:
        """A change the bus or the topic cannot deliver to a consumer's queue goes to that
        consumer's <X>ChangeDeliveryDeadLetterQueue (FanOutMode.delivery_dead_letters)."""
        return self.fan_out_mode.delivery_dead_letters

    @staticmethod
    def consumer_queue(function: str) -> str:
        """The output of a consumer's queue in pipe/router mode: LastAgentFunction ->
        LastAgentQueueUrl."""
        return f"{function.removesuffix('Function')}QueueUrl"

    @staticmethod
    def consumer_dead_letter_queue(function: str) -> str:
        return f"{function.removesuffix('Function')}DeadLetterQueueUrl"

    @staticmethod
    def consumer_delivery_dead_letter_queue(function: str) -> str:
        """pipe/router: the output of the DLQ where the bus (the consumer's rule target) or the
        topic (its subscription) puts a change it could not deliver to the consumer's queue:
        LastAgentFunction -> LastAgentChangeDeliveryDeadLetterQueueUrl."""
        return f"{function.removesuffix('Function')}ChangeDeliveryDeadLetterQueueUrl"

    @property
    def work_queues(self) -> tuple[str, ...]:
        """Outputs of the queues functions consume (the consumers' own ones when they have)."""
        if not self.consumers_read_queues:
            return WORK_QUEUES
        return WORK_QUEUES + tuple(self.consumer_queue(f) for f in CONSUMERS)

    @property
    def failure_queues(self) -> tuple[str, ...]:
        """Outputs of the queues nothing consumes: anything in them is work for the operator."""
        if not self.consumers_read_queues:
            return FAILURE_QUEUES
        queues = [self.consumer_dead_letter_queue]
        if self.fan_out_dead_letters:
            queues.append(self.consumer_delivery_dead_letter_queue)
        return FAILURE_QUEUES + tuple(queue(f) for queue in queues for f in CONSUMERS)

    @property
    def delivery_dead_letter_queues(self) -> dict[str, str]:
        """pipe, router, pipe-topic: each delivery DLQ by name
        (LastAgentChangeDeliveryDeadLetterQueue) -> the output of the consumer queue its changes
        belong in; none in lambda and pipe-sfn mode."""
        if not self.fan_out_dead_letters:
            return {}
        return {
            self.consumer_delivery_dead_letter_queue(f).removesuffix("Url"): self.consumer_queue(f)
            for f in CONSUMERS
        }

    @property
    def dead_letter_queues(self) -> tuple[str, ...]:
        """Names of the DLQs `ops dlq redrive` takes (IngestDeadLetterQueue, ...)."""
        return tuple(
            output.removesuffix("Url")
            for output in self.failure_queues
            if output.endswith("DeadLetterQueueUrl")
        )

    def failure_route(self, function: str) -> FailureRoute:
        """Where ``function``'s (a consumer's) failed changes end up, and how to recover them."""
        assert function in CONSUMERS, f"{function} is not a stream consumer ({CONSUMERS})"
        if not self.consumers_read_queues:
            return FailureRoute(
                function,
                "StreamFailureQueueUrl",
                holds_records=False,
                bound_seconds=STREAM_FAILURE_SECONDS,
                recover=("stream", "replay", "--function", function),
                dry_run=("stream", "replay", "--dry-run", "--function", function),
            )
        queue = self.consumer_queue(function)
        attributes = self.queue_attributes(queue, "VisibilityTimeout", "RedrivePolicy")
        receives = int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])
        dead_letters = self.consumer_dead_letter_queue(function)
        return FailureRoute(
            function,
            dead_letters,
            holds_records=True,
            bound_seconds=int(attributes["VisibilityTimeout"]) * receives + 60,
            recover=("dlq", "redrive", dead_letters.removesuffix("Url")),
            dry_run=None,
        )

    @contextlib.contextmanager
    def failing_consumer(self, function: str) -> Iterator[FailureRoute]:
        """The failure route of a consumer a test is about to make fail. On the local stack in
        pipe/router mode the consumer's queue redelivers after 1 s meanwhile (its visibility
        timeout is set back at the end), so the receives that dead-letter a message take
        seconds rather than maxReceiveCount x the visibility timeout."""
        if not (self.is_local and self.consumers_read_queues):
            yield self.failure_route(function)
            return
        with self.redelivering_at_once(self.consumer_queue(function)):
            yield self.failure_route(function)

    @contextlib.contextmanager
    def redelivering_at_once(self, queue: str) -> Iterator[None]:
        """The queue (a stack output) redelivers a message 1 s after a failed receive while the
        block runs, its visibility timeout set back at the end: the receives that dead-letter a
        message take seconds rather than maxReceiveCount x its visibility timeout."""
        visibility = self.queue_attributes(queue, "VisibilityTimeout")
        self.sqs.set_queue_attributes(
            QueueUrl=self.outputs[queue], Attributes={"VisibilityTimeout": "1"}
        )
        try:
            yield
        finally:
            self.sqs.set_queue_attributes(QueueUrl=self.outputs[queue], Attributes=visibility)

    def failed_changes(self, route: FailureRoute, marker: str, since: float) -> list[dict]:
        """The messages (peeked, not consumed) at ``route``'s queue that stand for a test's
        failed change: the stream record itself, holding ``marker`` (every mode but lambda), or
        a failure record of the consumer's mapping sent since ``since`` (lambda: it names a
        batch, not the records)."""
        found = []
        for message in self.peek(route.output):
            if route.holds_records:
                mine = marker in message["Body"]
            else:
                try:
                    body = json.loads(message["Body"])
                    function_arn = body["requestContext"]["functionArn"]
                except (ValueError, KeyError, TypeError):
                    continue
                mine = (
                    "DDBStreamBatchInfo" in body
                    and route.function in function_arn
                    and int(message["Attributes"]["SentTimestamp"]) / 1000 >= since - 5
                )
            if mine:
                found.append(message)
        return found

    def delete_failed_changes(self, route: FailureRoute, marker: str, since: float) -> None:
        """Remove a test's failed changes from ``route``'s queue (see ``failed_changes``)."""
        ids = {m["MessageId"] for m in self.failed_changes(route, marker, since)}
        self.delete_where(route.output, lambda message: message["MessageId"] in ids)

    # -- the local stack's controls --------------------------------------------------------------
    def _local(self) -> LocalStackProcess:
        assert self.local, "the local stack's controls exist only on the local stack"
        return self.local

    def faults(self, **switches: Any) -> dict:
        """Set fault switches (docs/local-stack.md); the switches and what struck so far."""
        return self._local().control("/_emulator/faults", switches)

    def age_deduplication(self, seconds: float) -> dict:
        """The FIFO topics' and queues' 5-minute deduplication ``seconds`` further on
        (docs/local-stack.md): an id accepted longer ago than 5 minutes by then is delivered
        again. Their counts of ids aged and expired."""
        return self._local().control("/_emulator/age-deduplication", {"seconds": seconds})

    def reset_faults(self) -> None:
        """Every switch back to what the local stack started with."""
        self._local().control("/_emulator/faults/reset", {})

    def failures(self) -> list[FailedInvocation]:
        """Every invocation the local engine reported failed so far, by logical id; [] on AWS."""
        if not self.local:
            return []
        return [
            failure._replace(function=_logical_id(failure.function))
            for failure in list(self.local.failed_invocations)
        ]

    def failed_invocations(self, logical_id: str | None = None) -> int:
        """How many invocations (of one function) failed so far: 0 on AWS."""
        return sum(logical_id in (None, f.function) for f in self.failures())

    def idle(self) -> bool:
        """Nothing left to do: the work queues empty (in flight included) and, on the local
        stack, its engine idle (no batch being delivered)."""
        if any(self.queue_depth(output) for output in self.work_queues):
            return False
        return not self.local or bool(self._local().control("/_emulator/status").get("idle"))

    def longest_redelivery(self) -> int:
        """Seconds a failed receive keeps a message out of sight: the longest visibility timeout
        of the work queues (2-12 s locally, minutes in a deployed environment)."""
        return max(
            int(self.queue_attributes(output, "VisibilityTimeout")["VisibilityTimeout"])
            for output in self.work_queues
        )

    # -- mail ------------------------------------------------------------------------------------
    def inbox(self) -> list[dict]:
        """Every e-mail the local stack's SES accepted, oldest first (GET /_emulator/inbox)."""
        return self._local().control("/_emulator/inbox")["messages"]

    def mail_sent(self, notification_ids: Iterable[str]) -> dict[str, dict]:
        """SES's Send events recorded by MailEventsFunction (MAIL_SENT items), by notification
        id: on AWS as locally, SES's own word on what it sent."""
        items = self.get_items(
            [{"pk": f"MAIL_SENT#{n}", "sk": "MAIL_SENT"} for n in notification_ids]
        )
        return {item["notification_id"]["S"]: item for item in items}

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
        """Remove a client's own messages (those ``predicate`` picks) from a queue that nothing
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

    # -- table -----------------------------------------------------------------------------------
    def get_item(self, key: dict[str, str], projection: str | None = None) -> dict | None:
        request: dict[str, Any] = {
            "TableName": self.contacts_table,
            "Key": {name: {"S": value} for name, value in key.items()},
            "ConsistentRead": True,
        }
        if projection:
            request["ProjectionExpression"] = projection
        return self.dynamodb.get_item(**request).get("Item")

    def get_items(self, item_keys: list[dict[str, str]]) -> list[dict]:
        """BatchGetItem of many keys (100 per request, unprocessed keys asked again)."""
        found: list[dict] = []
        for start in range(0, len(item_keys), 100):
            request: dict | None = {
                self.contacts_table: {
                    "Keys": [
                        {name: {"S": value} for name, value in key.items()}
                        for key in item_keys[start : start + 100]
                    ],
                    "ConsistentRead": True,
                }
            }
            while request:
                page = self.dynamodb.batch_get_item(RequestItems=request)
                found += page["Responses"].get(self.contacts_table, [])
                request = page.get("UnprocessedKeys") or None
        return found

    def delete_items(self, item_keys: Iterable[dict[str, str]]) -> None:
        for key in item_keys:
            self.dynamodb.delete_item(
                TableName=self.contacts_table,
                Key={name: {"S": value} for name, value in key.items()},
            )

    def items_of_type(self, item_type: str) -> list[dict]:
        """Every item of one type (a Scan: for small tables and the end of a run)."""
        return self._scan(item_type, count=False)

    def count_of_type(self, item_type: str) -> int:
        return self._scan(item_type, count=True)

    def _scan(self, item_type: str, *, count: bool) -> Any:
        request: dict[str, Any] = {
            "TableName": self.contacts_table,
            "FilterExpression": "#t = :t",
            "ExpressionAttributeNames": {"#t": "type"},
            "ExpressionAttributeValues": {":t": {"S": item_type}},
            "ConsistentRead": True,
        }
        if count:
            request["Select"] = "COUNT"
        total, found = 0, []
        while True:
            page = self.dynamodb.scan(**request)
            total += page["Count"]
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return total if count else found
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def contacts_of(self, caller: str) -> list[dict]:
        items: list[dict] = []
        request: dict[str, Any] = {
            "TableName": self.contacts_table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :sk)",
            "ExpressionAttributeValues": {
                ":pk": {"S": keys.caller_pk(caller)},
                ":sk": {"S": "CONTACT#"},
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.dynamodb.query(**request)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def file_outcome(self, key: str, version: str | None, run: int | None = None) -> dict | None:
        """A file's processing log once its outcome is final (with ``run``: that reprocess run's
        outcome; until the run's first step starts, the log is still the earlier run's); None
        before (a file is IN_PROGRESS from its first step's start, and longer when it takes
        more than one)."""
        if version is None:  # unversioned bucket: the file id ends in the (unknown) sequencer
            logs = [
                log for log in self.items_of_type(keys.PROCESSING_LOG) if log["key"]["S"] == key
            ]
            log = logs[0] if logs else None
        else:
            log = self.file_log(self.file_id(key, version))
        if run is not None and log and log.get("run", {}).get("N") != str(run):
            return None
        return log if log and log["outcome"]["S"] != "IN_PROGRESS" else None

    def file_id(self, key: str, version: str) -> str:
        """A file's id as the ingest names it (shared.s3_events.S3Object): bucket/key#version."""
        return f"{self.bucket}/{key}#{version}"

    def file_log(self, file_id: str, projection: str | None = None) -> dict | None:
        """The processing log of a file (bucket/key#version), whatever its outcome."""
        return self.get_item(keys.processing_log_key(file_id), projection)

    def last_agents(self, callers: Iterable[str]) -> dict[str, dict[str, str]]:
        """caller -> the stored LAST_AGENT's agent_id, contact_id and ended_at."""
        by_key = {keys.last_agent_key(caller)["pk"]: caller for caller in callers}
        items = self.get_items([keys.last_agent_key(caller) for caller in by_key.values()])
        return {
            by_key[item["pk"]["S"]]: {
                name: item[name]["S"] for name in ("agent_id", "contact_id", "ended_at")
            }
            for item in items
        }

    # -- Amazon Connect's contact records -------------------------------------------------------
    @property
    def delivery_stream(self) -> str:
        return self.outputs["ContactRecordsDeliveryStreamName"]

    def put_contact_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Put contact records into the stack's delivery stream as Amazon Connect does: each
        record's compact JSON on its own (the stream appends the delimiter), in PutRecordBatch
        calls of at most FIREHOSE_BATCH_RECORDS records and FIREHOSE_BATCH_BYTES, in order;
        the entries a call reports failed (FailedPutCount: throttled, service errors) are put
        again until they are in. Returns the number of calls (the local stack writes one object
        each; Firehose on AWS buffers them into fewer)."""
        batch: list[bytes] = []
        size, calls = 0, 0
        for record in records:
            data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
            if batch and (
                len(batch) == FIREHOSE_BATCH_RECORDS or size + len(data) > FIREHOSE_BATCH_BYTES
            ):
                calls += self._put_record_batch(batch)
                batch, size = [], 0
            batch.append(data)
            size += len(data)
        if batch:
            calls += self._put_record_batch(batch)
        return calls

    def _put_record_batch(self, batch: list[bytes]) -> int:
        firehose = self.client("firehose")
        for attempt in range(FIREHOSE_ATTEMPTS):
            answer = firehose.put_record_batch(
                DeliveryStreamName=self.delivery_stream, Records=[{"Data": d} for d in batch]
            )
            if not answer["FailedPutCount"]:
                return attempt + 1
            batch = [
                data
                for data, entry in zip(batch, answer["RequestResponses"], strict=True)
                if entry.get("ErrorCode")
            ]
            time.sleep(min(0.1 * 2**attempt, 5))
        raise RuntimeError(
            f"{len(batch)} contact records not accepted by {self.delivery_stream} "
            f"after {FIREHOSE_ATTEMPTS} calls"
        )

    # -- route -----------------------------------------------------------------------------------
    def route(self, caller: str) -> dict[str, str]:
        """RouteFunction's answer for a caller, invoked as Amazon Connect invokes it."""
        response = self.client("lambda").invoke(
            FunctionName=self.outputs["RouteFunctionName"],
            Payload=json.dumps(connect_event(caller)).encode(),
        )
        payload = json.loads(response["Payload"].read() or b"null")
        assert "FunctionError" not in response, f"RouteFunction failed: {payload}"
        return payload

    # -- resources -------------------------------------------------------------------------------
    def resources(self, resource_type: str) -> dict[str, str]:
        """The stack's resources of one type: logical id -> physical id."""
        found: dict[str, str] = {}
        paginator = self.client("cloudformation").get_paginator("list_stack_resources")
        for page in paginator.paginate(StackName=self.name):
            for resource in page["StackResourceSummaries"]:
                if resource["ResourceType"] == resource_type:
                    found[resource["LogicalResourceId"]] = resource["PhysicalResourceId"]
        return found

    def functions(self) -> dict[str, str]:
        """LogicalId -> function name."""
        return self.resources("AWS::Lambda::Function")

    def alarms(self) -> list[dict]:
        """The stack's CloudWatch alarms as describe_alarms gives them."""
        names = sorted(self.resources("AWS::CloudWatch::Alarm").values())
        alarms: list[dict] = []
        for start in range(0, len(names), 100):
            page = self.client("cloudwatch").describe_alarms(AlarmNames=names[start : start + 100])
            alarms += page["MetricAlarms"] + page.get("CompositeAlarms", [])
        return alarms

    # -- event source mappings -------------------------------------------------------------------
    def mappings(self) -> list[tuple[str, dict]]:
        """Every event source mapping of the stack's functions: (function LogicalId, mapping)."""
        found = []
        paginator = self.client("lambda").get_paginator("list_event_source_mappings")
        for logical_id, name in sorted(self.functions().items()):
            for page in paginator.paginate(FunctionName=name):
                found += [(logical_id, mapping) for mapping in page["EventSourceMappings"]]
        return found

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

    def pause_ingest(self) -> None:
        """Disable the IngestFunction mapping and wait until delivery has stopped: Lambda reports
        the mapping "Disabling" until its pollers have stopped, "Disabled" after (the local stack
        too), so a message sent then stays in the queue until delivery resumes."""
        self.set_mapping_enabled("IngestQueueUrl", False)


def _logical_id(physical_name: str) -> str:
    """<stack>-<LogicalId>-<suffix>, the name CloudFormation gives a function -> LogicalId."""
    found = re.search(r"-([A-Za-z0-9]+)-[A-Za-z0-9]+$", physical_name)
    return found[1] if found else physical_name
