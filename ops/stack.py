"""The deployed stack as ops reads it: boto3 against its resources, found by the stack's outputs
(cloudformation describe_stacks, as the SAM pipeline templates do it), on AWS (``Stack.deployed``:
credentials and region from boto3's usual chain, AWS_ENDPOINT_URL included) or on a local stack.
Its queues by their role (work, failure, each consumer's in the modes that have them), its table's
items ops shows, its resources, alarms and mappings. The tooling's client of a stack it started
(its local controls, test helpers) is harness.stack.StackClient, built on this one.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.utils import ArnParser
from shared import keys

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
# (Stack.work_queues, .failure_queues).
WORK_QUEUES = ("IngestQueueUrl", "NotificationQueueUrl", "MailQueueUrl", "MailEventsQueueUrl")
FAILURE_QUEUES = (
    "IngestDeadLetterQueueUrl",
    "NotificationDeadLetterQueueUrl",
    "MailDeadLetterQueueUrl",
    "MailDeliveryDeadLetterQueueUrl",
    "MailEventsDeadLetterQueueUrl",
    "StreamFailureQueueUrl",
)
# What NotificationsTopic could not deliver to MailQueue: no queue's redrive target.
MAIL_DELIVERIES = {"MailDeliveryDeadLetterQueue": "MailQueueUrl"}
# Its SES events are recorded by ops itself, never moved back to MailEventsQueue: on their way
# there they would be in neither place a sender in doubt looks (ops/delivery_redrive.py).
MAIL_EVENTS_DLQ = "MailEventsDeadLetterQueue"
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
_ARNS = ArnParser()
SAMCONFIG = Path(__file__).resolve().parents[1] / "samconfig.toml"


def parse_arn(arn: str) -> dict[str, str]:
    """An ARN's partition, service, region, account and resource (botocore's own parser; its
    InvalidArnException, a ValueError, for text that is no ARN)."""
    return _ARNS.parse_arn(arn)


def lambda_function_name(arn: str) -> str:
    """arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>] -> name."""
    return parse_arn(arn)["resource"].split(":")[1]


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


@dataclass
class Stack:
    name: str
    session: boto3.session.Session
    outputs: dict[str, str]
    parameters: dict[str, str]
    endpoint: str | None = None  # a local stack's (None: boto3's own, AWS_ENDPOINT_URL included)
    ca_bundle: str | None = None  # a local stack served over TLS: its certificate authority
    _clients: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def deployed(
        cls,
        name: str,
        session: boto3.session.Session | None = None,
        endpoint: str | None = None,
    ) -> Self:
        """The stack ``name`` where boto3's usual chain points (AWS_ENDPOINT_URL included), or
        at ``endpoint`` with ``session``'s credentials (another emulator's, e.g. the bench's)."""
        return cls._described(name, session or boto3.session.Session(), endpoint)

    @classmethod
    def _described(
        cls,
        name: str,
        session: boto3.session.Session,
        endpoint: str | None = None,
        ca_bundle: str | None = None,
        **more: Any,
    ) -> Self:
        cloudformation = session.client(
            "cloudformation", endpoint_url=endpoint, verify=ca_bundle, config=RETRIES
        )
        described = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        missing = [output for output in OUTPUT_NAMES if output not in outputs]
        assert not missing, f"stack {name} lacks outputs {missing}"
        parameters = {
            p["ParameterKey"]: p["ParameterValue"] for p in described.get("Parameters", [])
        }
        return cls(name, session, outputs, parameters, endpoint, ca_bundle, **more)

    @property
    def is_local(self) -> bool:
        """A local stack the tooling started (harness.stack.StackClient): ops waits less."""
        return False

    def client(self, service: str):
        """The stack's client of ``service``, made once."""
        if service not in self._clients:
            self._clients[service] = self.new_client(service)
        return self._clients[service]

    def new_client(self, service: str):
        """A client of ``service`` of its own (for a thread), reaching the stack."""
        endpoint = self.endpoint or os.environ.get("AWS_ENDPOINT_URL")
        config = RETRIES
        if endpoint and not takes_host_prefix(endpoint):
            config = config.merge(Config(inject_host_prefix=False))
        return self.session.client(
            service,
            endpoint_url=self.endpoint,
            verify=self.ca_bundle,  # a local stack served over TLS: its authority
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
        """The DLQs of what a topic or a bus could not deliver to a queue, by name -> the output
        of the queue their messages belong in: MailDeliveryDeadLetterQueue -> MailQueueUrl, and
        in pipe, router and pipe-topic mode each consumer's (LastAgentChangeDeliveryDeadLetterQueue
        -> LastAgentQueueUrl)."""
        if not self.fan_out_dead_letters:
            return dict(MAIL_DELIVERIES)  # a caller's copy: the module's table stays as it is
        return MAIL_DELIVERIES | {
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
