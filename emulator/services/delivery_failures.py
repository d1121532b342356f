"""What EventBridge and SNS do with a message they cannot deliver to an SQS queue, as AWS documents
it, and the queue policies that decide whether they may deliver at all.

Gaps in moto 5.2.6 and what this module does about them:

- moto's CloudFormation skips ``AWS::SQS::QueuePolicy``, so no queue of a deployed stack has a
  policy. Here the policy is set on each of its ``Queues`` (intrinsics resolved by moto's
  parser), as CloudFormation does.
- moto delivers from a rule's SQS target and from an SNS subscription whatever the queue's policy
  says, and a delivery that fails is logged (EventBridge) or raised into the publisher (SNS).
  Here, before each delivery, the queue's policy is evaluated for the service principal
  (``events.amazonaws.com``, ``sns.amazonaws.com``) with ``aws:SourceArn`` (the rule, the topic),
  ``aws:SourceAccount`` and ``aws:SecureTransport`` by emulator/iam/resources.py. A queue that no
  longer exists, or whose policy does not allow the service, is a client-side error; any other
  failure of the send is a server-side one. A queue with no policy at all is let in (moto's
  default, which the tests' capture queues rely on; AWS would refuse the service).
- EventBridge ("Using dead-letter queues to process undelivered events"): a client-side error
  (``NO_RESOURCE``, ``NO_PERMISSIONS``) is not retried; any other is retried with exponential
  backoff (1 s doubling to 60 s locally) until the target's RetryPolicy ends it
  (``MaximumRetryAttempts``, default 185; ``MaximumEventAgeInSeconds``, default 86,400). Then the
  event itself goes to the target's ``DeadLetterConfig`` queue with the message attributes
  ``RULE_ARN``, ``TARGET_ARN``, ``ERROR_CODE``, ``ERROR_MESSAGE``, ``RETRY_ATTEMPTS`` and, when
  the retries ran out, ``EXHAUSTED_RETRY_CONDITION``; without a DLQ it is dropped (logged).
- SNS ("Amazon SNS dead-letter queues"): a client-side error goes to the subscription's
  RedrivePolicy queue at once; a server-side error is retried (locally the delivery policy's
  3 immediate retries, not the 100,015 over 23 days AWS applies to SQS endpoints) and then goes
  there too. The DLQ gets what the queue would have got (the raw message and its attributes with
  RawMessageDelivery, else the JSON envelope). Without a RedrivePolicy the message is dropped.
- A DLQ that is gone or whose policy refuses the service loses the message, logged as the
  metric AWS counts it in (InvocationsFailedToBeSentToDLQ,
  NumberOfNotificationsFailedToRedriveToDlq).
- The metrics the fan-out's alarms read: each event a rule's target gives up on counts 1 in
  ``AWS/Events`` ``FailedInvocations`` (EventBusName, RuleName), each SNS delivery that failed 1
  in ``AWS/SNS`` ``NumberOfNotificationsFailed`` (TopicName), put into moto's CloudWatch.

``install()`` is called by moto_patches.install(); its patches are undone by uninstall().
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from moto.sns.models import Subscription
from moto.sqs.exceptions import QueueDoesNotExist
from moto.sqs.models import sqs_backends

from emulator.core.arns import parse_arn
from emulator.iam.resources import service_may
from emulator.services import cloudwatch, patching
from emulator.services.cloudformation import StackResource

log = logging.getLogger("emulator.delivery_failures")

EVENTS = "events.amazonaws.com"
SNS = "sns.amazonaws.com"
RETRY_ATTEMPTS = 185  # EventBridge's RetryPolicy defaults
EVENT_AGE_SECONDS = 86_400
FIRST_RETRY_SECONDS = 1.0
LONGEST_RETRY_SECONDS = 60.0
SNS_IMMEDIATE_RETRIES = 3


@dataclass(frozen=True)
class Refusal:
    code: str  # EventBridge's ERROR_CODE
    message: str


# --- the queue's policy ---------------------------------------------------------------------------
def refusal(queue_arn: str, service: str, source_arn: str) -> Refusal | None:
    """Why SQS refuses ``service`` sending to the queue for ``source_arn`` (None: it may send)."""
    queue = parse_arn(queue_arn)
    try:
        sqs_backends[queue.account][queue.region].get_queue(queue.resource)
    except QueueDoesNotExist:
        return Refusal("NO_RESOURCE", f"queue {queue.resource} does not exist")
    source_account = parse_arn(source_arn).account
    if not service_may(
        service, "sqs:SendMessage", queue_arn, source_arn=source_arn, source_account=source_account
    ):
        return Refusal(
            "NO_PERMISSIONS", f"the policy of {queue.resource} does not let {service} send"
        )
    return None


def _send(queue_arn: str, body: str, attributes: dict[str, str]) -> None:
    queue = parse_arn(queue_arn)
    sqs_backends[queue.account][queue.region].send_message(
        queue_name=queue.resource,
        message_body=body,
        message_attributes={
            name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
        },
    )


# --- EventBridge: a rule's SQS target -------------------------------------------------------------
def deliver_to_target(
    rule: Any, target: dict[str, Any], event: dict[str, Any], body: str, group_id: str | None
) -> None:
    """Send ``body`` (what the target gets of ``event``) to the target's queue; what cannot be
    delivered goes the way the target's RetryPolicy and DeadLetterConfig say."""
    _TargetDelivery(rule.arn, rule.name, target, event, body, group_id).attempt()


@dataclass
class _TargetDelivery:
    rule_arn: str
    rule_name: str
    target: dict[str, Any]
    event: dict[str, Any]
    body: str
    group_id: str | None
    attempts: int = 0
    started: float = 0.0

    def attempt(self) -> None:
        if not self.started:
            self.started = time.monotonic()
        refused = refusal(self.target["Arn"], EVENTS, self.rule_arn)
        if refused is not None:  # not retried: nothing changes until someone fixes it
            self.dead_letter(refused, exhausted=None)
            return
        queue = parse_arn(self.target["Arn"])
        try:
            sqs_backends[queue.account][queue.region].send_message(
                queue_name=queue.resource, message_body=self.body, group_id=self.group_id
            )
        except Exception as error:  # any failure of the send is retried
            self.retry(Refusal("ERROR_FROM_TARGET", str(error)))

    def retry(self, failure: Refusal) -> None:
        policy = self.target.get("RetryPolicy") or {}
        most = int(policy.get("MaximumRetryAttempts", RETRY_ATTEMPTS))
        oldest = float(policy.get("MaximumEventAgeInSeconds", EVENT_AGE_SECONDS))
        delay = min(FIRST_RETRY_SECONDS * 2**self.attempts, LONGEST_RETRY_SECONDS)
        if self.attempts >= most:
            self.dead_letter(failure, exhausted="MaximumRetryAttempts")
        elif time.monotonic() + delay - self.started > oldest:
            self.dead_letter(failure, exhausted="MaximumEventAgeInSeconds")
        else:
            self.attempts += 1
            timer = threading.Timer(delay, self.attempt)
            timer.daemon = True
            timer.start()

    def dead_letter(self, failure: Refusal, exhausted: str | None) -> None:
        where = f"rule {self.rule_name} target {self.target.get('Id')}"
        rule = parse_arn(self.rule_arn).resource.split("/")  # rule/[<bus>/]<name>
        bus = rule[1] if len(rule) > 2 else "default"
        dimensions = {"EventBusName": bus, "RuleName": self.rule_name}
        cloudwatch.count(self.rule_arn, "AWS/Events", "FailedInvocations", dimensions)
        dead_letters = (self.target.get("DeadLetterConfig") or {}).get("Arn")
        if not dead_letters:
            log.error("events: %s dropped event %s: %s", where, self.event.get("id"), failure)
            return
        attributes = {
            "RULE_ARN": self.rule_arn,
            "TARGET_ARN": self.target["Arn"],
            "ERROR_CODE": failure.code,
            "ERROR_MESSAGE": failure.message,
            "RETRY_ATTEMPTS": str(self.attempts),
        }
        if exhausted:
            attributes["EXHAUSTED_RETRY_CONDITION"] = exhausted
        refused = refusal(dead_letters, EVENTS, self.rule_arn)
        if refused is not None:
            log.error(
                "events: %s: InvocationsFailedToBeSentToDLQ: event %s lost (%s; DLQ: %s)",
                where,
                self.event.get("id"),
                failure.code,
                refused.message,
            )
            return
        _send(dead_letters, json.dumps(self.event), attributes)
        log.warning(
            "events: %s: event %s sent to its dead-letter queue (%s)",
            where,
            self.event.get("id"),
            failure.code,
        )


# --- SNS: a subscription's SQS endpoint -----------------------------------------------------------
def install() -> None:
    original_publish = patching.original(Subscription, "publish")

    def publish(  # noqa: PLR0917 - moto's signature
        self: Subscription,
        message: str,
        message_id: str,
        subject: str | None = None,
        message_attributes: dict[str, Any] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        message_structure: str | None = None,
    ) -> None:
        delivery = (
            message,
            message_id,
            subject,
            message_attributes,
            group_id,
            deduplication_id,
            message_structure,
        )
        if self.protocol != "sqs":
            return original_publish(self, *delivery)
        matcher = self._filter_policy_matcher
        if matcher is not None and not matcher.matches(message_attributes, message):
            return None  # filtered out: not a delivery
        failure = refusal(self.endpoint, SNS, self.topic.arn)
        for _ in range(1 + SNS_IMMEDIATE_RETRIES if failure is None else 0):
            try:
                return original_publish(self, *delivery)
            except QueueDoesNotExist:  # deleted in the meantime: client-side
                failure = Refusal("NO_RESOURCE", f"{self.endpoint} does not exist")
                break
            except Exception as error:  # server-side: retried
                failure = Refusal("SERVER_ERROR", str(error))
        _redrive(self, delivery, failure, original_publish)
        return None

    patching.replace(Subscription, "publish", publish)


def _redrive(subscription: Subscription, delivery: tuple, failure: Refusal, publish: Any) -> None:
    """The subscription's RedrivePolicy queue gets the delivery SNS could not make."""
    message_id = delivery[1]
    topic = subscription.topic
    cloudwatch.count(topic.arn, "AWS/SNS", "NumberOfNotificationsFailed", {"TopicName": topic.name})
    redrive = json.loads(subscription.attributes.get("RedrivePolicy") or "{}")
    dead_letters = redrive.get("deadLetterTargetArn")
    where = f"sns: {subscription.topic.arn} -> {subscription.endpoint}"
    if not dead_letters:
        log.error("%s: message %s dropped (%s)", where, message_id, failure)
        return
    refused = refusal(dead_letters, SNS, subscription.topic.arn)
    if refused is not None:
        log.error(
            "%s: NumberOfNotificationsFailedToRedriveToDlq: message %s lost (%s)",
            where,
            message_id,
            refused.message,
        )
        return
    to_dlq = copy.copy(subscription)  # the same delivery (raw or envelope), to the DLQ instead
    to_dlq.endpoint = dead_letters
    to_dlq._filter_policy_matcher = None
    publish(to_dlq, *delivery)
    log.warning(
        "%s: message %s sent to its dead-letter queue (%s)", where, message_id, failure.code
    )


# --- AWS::SQS::QueuePolicy in CloudFormation ------------------------------------------------------
class QueuePolicyModel(StackResource):
    """Sets the policy on each of its queues; Ref gives a generated id, as on AWS."""

    TYPE = "AWS::SQS::QueuePolicy"

    def __init__(self, queue_urls: list[str], account_id: str, region_name: str) -> None:
        self.queue_urls = queue_urls
        self.account_id = account_id
        self.region_name = region_name
        self.id = f"queue-policy-{abs(hash(tuple(queue_urls))):x}"

    @property
    def physical_resource_id(self) -> str:
        return self.id

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> QueuePolicyModel:
        urls = list(properties["Queues"])
        document = json.dumps(properties["PolicyDocument"])
        for url in urls:
            _set_policy(url, account_id, region_name, document)
        return cls(urls, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        for url in self.queue_urls:
            _set_policy(url, self.account_id, self.region_name, "")


def _set_policy(url: str, account_id: str, region_name: str, document: str) -> None:
    name = url.rstrip("/").rsplit("/", 1)[-1]
    try:
        sqs_backends[account_id][region_name].set_queue_attributes(name, {"Policy": document})
    except QueueDoesNotExist:
        log.warning("queue policy: queue %s does not exist", name)
