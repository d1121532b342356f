"""moto 5.2.6's SNS: FIFO topics that deduplicate and answer with a SequenceNumber, and
AWS::SNS::Subscription and AWS::SNS::TopicPolicy in CloudFormation (filter policies:
sns_filter_policies.py)."""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from moto.core.responses import ActionResult
from moto.sns.exceptions import InvalidParameterValue
from moto.sns.models import SNSBackend, Topic, sns_backends
from moto.sns.responses import SNSResponse

from emulator.core.arns import parse_arn
from emulator.core.values import parse_bool
from emulator.services import patching
from emulator.services.cloudformation import StackResource

log = logging.getLogger("emulator.moto")


def install() -> None:
    _patch_sns_fifo_topic_attributes()
    _patch_sns_fifo_deduplication()
    _patch_publish_batch_refusals()


# --- SNS FIFO topics deduplicate ------------------------------------------------------------------
# Gap: moto/sns/models.py Topic.publish hands every message to every subscription; a FIFO topic
# never deduplicates (an SQS FIFO subscriber's own dedupe hides it, a standard queue subscriber
# gets every copy), the Publish / PublishBatch responses carry no SequenceNumber, and
# GetTopicAttributes has no FifoThroughputScope. AWS (SNS developer guide, "message
# deduplication for FIFO topics"; Publish API): a message whose deduplication id
# (MessageDeduplicationId, else the SHA-256 of the body with ContentBasedDeduplication) was
# accepted within the 5-minute deduplication interval is accepted but not delivered; the scope
# is the topic, or each message group with FifoThroughputScope=MessageGroup. The interval starts
# at the first successful publish and duplicates do not extend it (as SQS's). A duplicate's
# response here repeats the original's MessageId and SequenceNumber. Also: CreateTopic through
# CloudFormation takes FifoTopic / ContentBasedDeduplication as given, so a "false" string read
# as true; they are made booleans.
SNS_DEDUPLICATION_SECONDS = 300.0
_sns_lock = threading.Lock()
_sns_sequences = threading.local()  # message id -> sequence number, for the response in hand
clock: Callable[[], float] = time.monotonic  # tests move time forward


class _FifoState:
    """Per FIFO topic: accepted deduplication ids (oldest first) and the sequence counter."""

    def __init__(self) -> None:
        self.accepted: collections.OrderedDict[tuple[str | None, str], tuple[float, str, str]] = (
            collections.OrderedDict()
        )
        self.sequence = 10**19

    def expire(self, now: float) -> None:
        while self.accepted:
            first = next(iter(self.accepted.values()))
            if now - first[0] < SNS_DEDUPLICATION_SECONDS:
                return
            self.accepted.popitem(last=False)

    def next_sequence(self) -> str:
        self.sequence += 1 + int.from_bytes(uuid.uuid4().bytes[:2]) % 997  # large, not consecutive
        return f"{self.sequence:020d}"


def age_deduplication(seconds: float, region: str, account: str) -> dict[str, int]:
    """Every FIFO topic's accepted deduplication ids as if accepted ``seconds`` earlier, those
    then past the interval forgotten (POST /_emulator/age-deduplication): the interval's time
    passing without waiting for it, so that a later publish of the same id is delivered as it is
    on AWS after 5 minutes. The topics' counts: FIFO topics, ids aged, ids expired."""
    counts = {"topics": 0, "aged": 0, "expired": 0}
    with _sns_lock:
        now = clock()
        for topic in list(sns_backends[account][region].topics.values()):
            state = topic.__dict__.get("_emulator_fifo")
            if state is None:  # not FIFO, or nothing published yet
                continue
            counts["topics"] += 1
            counts["aged"] += len(state.accepted)
            for key, (accepted_at, message_id, sequence) in list(state.accepted.items()):
                state.accepted[key] = (accepted_at - seconds, message_id, sequence)
            before = len(state.accepted)
            state.expire(now)
            counts["expired"] += before - len(state.accepted)
    return counts


def _patch_sns_fifo_topic_attributes() -> None:
    original_create = SNSBackend.create_topic

    def create_topic(
        self: Any, name: str, attributes: dict[str, Any] | None = None, tags: Any = None
    ) -> Any:
        if attributes:
            attributes = dict(attributes)
            for key in ("FifoTopic", "ContentBasedDeduplication"):
                if key in attributes:
                    attributes[key] = parse_bool(attributes[key])
        return original_create(self, name, attributes, tags)

    patching.replace(SNSBackend, "create_topic", create_topic)

    original_attributes = SNSResponse.get_topic_attributes

    def get_topic_attributes(self: Any) -> Any:
        result = original_attributes(self)
        topic = self.backend.get_topic(self._get_param("TopicArn"))
        body = result.result if isinstance(result, ActionResult) else None
        if parse_bool(topic.fifo_topic) and isinstance(body, dict):
            attributes = body.setdefault("Attributes", {})
            attributes["FifoTopic"] = "true"
            attributes["ContentBasedDeduplication"] = str(
                parse_bool(topic.content_based_deduplication)
            ).lower()
            attributes["FifoThroughputScope"] = str(
                getattr(topic, "fifo_throughput_scope", "Topic")
            )
        return result

    patching.replace(SNSResponse, "get_topic_attributes", get_topic_attributes)


def _patch_sns_fifo_deduplication() -> None:
    original_publish = Topic.publish

    def publish(  # noqa: PLR0917 - moto's signature
        self: Any,
        message: str,
        subject: str | None = None,
        message_attributes: dict[str, Any] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        message_structure: str | None = None,
    ) -> str:
        def deliver(deduplication_id: str | None) -> str:
            return original_publish(
                self,
                message,
                subject=subject,
                message_attributes=message_attributes,
                group_id=group_id,
                deduplication_id=deduplication_id,
                message_structure=message_structure,
            )

        if not parse_bool(self.fifo_topic):
            return deliver(deduplication_id)
        if deduplication_id is None and parse_bool(self.content_based_deduplication):
            deduplication_id = hashlib.sha256(message.encode()).hexdigest()
        per_group = str(getattr(self, "fifo_throughput_scope", "Topic")) == "MessageGroup"
        scope_key = (group_id if per_group else None, deduplication_id or "")
        with _sns_lock:
            state = self.__dict__.setdefault("_emulator_fifo", _FifoState())
            now = clock()
            state.expire(now)
            seen = state.accepted.get(scope_key) if deduplication_id else None
            if seen is not None:
                _, message_id, sequence = seen
            else:
                message_id = deliver(deduplication_id)
                sequence = state.next_sequence()
                if deduplication_id:
                    state.accepted[scope_key] = (now, message_id, sequence)
        sequences = getattr(_sns_sequences, "value", None)
        if sequences is not None:
            sequences[message_id] = sequence
        return message_id

    patching.replace(Topic, "publish", publish)

    patching.replace(SNSResponse, "publish", _with_sequence_numbers(SNSResponse.publish, None))
    patching.replace(
        SNSResponse,
        "publish_batch",
        _with_sequence_numbers(SNSResponse.publish_batch, "Successful"),
    )


# --- PublishBatch names every refused entry -------------------------------------------------
# Gap: moto/sns/models.py SNSBackend.publish_batch lists an entry as Failed only when its publish
# raised InvalidParameterValue; moto's own checks in SNSBackend.publish raise ValueError (a Subject
# over 100 characters, an SMS over 1,600 bytes), and such an entry is left out of both Successful
# and Failed. AWS (PublishBatch API) answers every entry in one of them: it refuses that entry
# (Failed, InvalidParameter) as Publish refuses the message, and a caller that reads "not Failed"
# as published would count it published. The ValueError is raised as InvalidParameterValue
# instead: the same code and message as Publish's answer (moto's SNSInvalidParameter of it).
def _patch_publish_batch_refusals() -> None:
    original_publish = SNSBackend.publish

    def publish(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_publish(self, *args, **kwargs)
        except ValueError as refusal:
            raise InvalidParameterValue(str(refusal)) from None

    patching.replace(SNSBackend, "publish", publish)


def _with_sequence_numbers(original: Callable[..., Any], entries_key: str | None) -> Any:
    """Publish / PublishBatch handler that adds the FIFO SequenceNumber to the response."""

    def handler(self: Any) -> Any:
        _sns_sequences.value = {}
        try:
            result = original(self)
            sequences = _sns_sequences.value
        finally:
            _sns_sequences.value = None
        body = result.result if isinstance(result, ActionResult) else None
        if sequences and isinstance(body, dict):
            entries = body.get(entries_key, []) if entries_key else [body]
            for entry in entries:
                if isinstance(entry, dict) and entry.get("MessageId") in sequences:
                    entry["SequenceNumber"] = sequences[entry["MessageId"]]
        return result

    return handler


# --- AWS::SNS::Subscription in CloudFormation -----------------------------------------------------
# Gap: moto/cloudformation/parsing.py resource_class_from_type knows no AWS::SNS::Subscription
# (it logs "No Moto CloudFormation support" and skips it), so a stack's topic -> queue
# subscriptions do not exist. The model below creates them through the SNS backend with their
# attributes (RawMessageDelivery, FilterPolicy, FilterPolicyScope, RedrivePolicy,
# DeliveryPolicy); Ref gives the subscription ARN as on AWS. Standard and FIFO queues may both
# subscribe to a FIFO topic (moto refuses only a FIFO queue on a standard topic, as AWS does).
# Lambda subscriptions are not delivered locally (moto would invoke through Docker): skipped
# with a warning.
_SUBSCRIPTION_ATTRIBUTES = (
    "FilterPolicyScope",  # first: FilterPolicy is validated against it
    "FilterPolicy",
    "RawMessageDelivery",
    "RedrivePolicy",
    "DeliveryPolicy",
)


class SnsSubscriptionModel(StackResource):
    TYPE = "AWS::SNS::Subscription"

    def __init__(self, arn: str, account_id: str, region_name: str) -> None:
        self.arn = arn
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.arn

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> SnsSubscriptionModel:
        topic_arn = properties["TopicArn"]
        protocol = properties["Protocol"]
        endpoint = properties.get("Endpoint", "")
        region = parse_arn(topic_arn).region
        if protocol == "lambda":
            log.warning(
                "SNS subscription %s (lambda) not created: the local stack does not deliver "
                "SNS to Lambda",
                logical_id,
            )
            return cls(f"{topic_arn}:{uuid.uuid4()}", account_id, region)
        backend = sns_backends[account_id][region]
        subscription = backend.subscribe(topic_arn, endpoint, protocol)
        for name in _SUBSCRIPTION_ATTRIBUTES:
            if name not in properties:
                continue
            value = properties[name]
            if name == "RawMessageDelivery":
                value = parse_bool(value)
            elif isinstance(value, dict | list):
                value = json.dumps(value)
            backend.set_subscription_attributes(subscription.arn, name, value)
        return cls(subscription.arn, account_id, region)

    def delete(self, account_id: str, region_name: str) -> None:
        backend = sns_backends[self.account_id][self.region_name]
        backend.subscriptions.pop(self.arn, None)


# --- AWS::SNS::TopicPolicy in CloudFormation ------------------------------------------------------
# Gap: moto/cloudformation/parsing.py knows no AWS::SNS::TopicPolicy (skipped), so a deployed
# topic keeps moto's default policy. Here the policy is set on each of its Topics; deleting the
# resource gives them the default policy again, as SNS does.
class TopicPolicyModel(StackResource):
    TYPE = "AWS::SNS::TopicPolicy"

    def __init__(self, topic_arns: list[str], account_id: str) -> None:
        self.topic_arns = topic_arns
        self.account_id = account_id
        self.id = f"topic-policy-{uuid.uuid4()}"

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
    ) -> TopicPolicyModel:
        arns = list(properties["Topics"])
        for arn in arns:
            _topic(account_id, arn)._policy_json = copy.deepcopy(properties["PolicyDocument"])
        return cls(arns, account_id)

    def delete(self, account_id: str, region_name: str) -> None:
        for arn in self.topic_arns:
            topic = _topic(self.account_id, arn)
            name = parse_arn(arn).resource
            topic._policy_json = topic._create_default_topic_policy(
                parse_arn(arn).region, self.account_id, name
            )


def _topic(account_id: str, arn: str) -> Topic:
    return sns_backends[account_id][parse_arn(arn).region].get_topic(arn)
