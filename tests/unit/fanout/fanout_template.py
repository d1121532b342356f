"""The fan-out's selections as template.yaml declares them, in every FanOut mode: each consumer's
stream mapping filter (lambda), its rule's event pattern (pipe), its subscription's filter policy
(router: over attributes; pipe-topic: over the body, with its queue mapping's filter), its queue
mapping's filter (pipe-sfn: ChangeMachine sends it every change the pipe admits), and the
pipe's and the router mapping's own filters; compiled with the local stack's
matchers (emulator/core/filters.py, emulator/services/sns_filter_policies.py: the same language
AWS documents)."""

import functools
import json
from dataclasses import dataclass

from cfnlint.decode import cfn_yaml

from emulator.core.filters import FilterCriteria, Pattern, compile_event_pattern
from emulator.deploy.rules import chosen, template_conditions
from emulator.services.sns_filter_policies import FilterPolicy
from harness import ROOT

CONSUMERS = {
    "LastAgentFunction": "LastAgent",
    "SurveyFunction": "Survey",
    "GoodwillFunction": "Goodwill",
}


@dataclass(frozen=True)
class Selection:
    """How one consumer's changes are selected in each mode."""

    stream: FilterCriteria  # <X>StreamMapping FilterCriteria (lambda)
    rule: Pattern  # <X>ChangeRule EventPattern (pipe)
    subscription: FilterPolicy  # <X>ChangeSubscription FilterPolicy (router)
    subscription_policy: dict  # the policy as the template writes it
    body_subscription: FilterPolicy  # <X>ChangeSubscription FilterPolicy (pipe-topic)
    body_subscription_policy: dict
    queue: FilterCriteria  # <X>QueueMapping FilterCriteria (pipe-topic; none: every message)
    machine_queue: FilterCriteria  # <X>QueueMapping FilterCriteria (pipe-sfn)


@functools.cache
def template() -> dict:
    return cfn_yaml.load(str(ROOT / "template.yaml"))


def resources() -> dict:
    return template()["Resources"]


def deployed(value, mode: str):
    """``value`` as a stack of FanOut ``mode`` deploys it (Fn::If chosen; the other parameters
    their defaults)."""
    defaults = {name: str(p.get("Default", "")) for name, p in template()["Parameters"].items()}
    return chosen(value, template_conditions(template(), defaults | {"FanOut": mode}))


def _policy(subscription: dict) -> tuple[FilterPolicy, dict]:
    policy = json.loads(json.dumps(subscription["FilterPolicy"]))
    return FilterPolicy(policy, subscription.get("FilterPolicyScope")), policy


@functools.cache
def selections() -> dict[str, Selection]:
    """Consumer logical id -> its selections."""
    found = resources()
    result = {}
    for function, prefix in CONSUMERS.items():
        subscription = found[f"{prefix}ChangeSubscription"]["Properties"]
        by_attributes, attributes_policy = _policy(deployed(subscription, "router"))
        by_body, body_policy = _policy(deployed(subscription, "pipe-topic"))
        queue_mapping = deployed(found[f"{prefix}QueueMapping"]["Properties"], "pipe-topic")
        machine_mapping = deployed(found[f"{prefix}QueueMapping"]["Properties"], "pipe-sfn")
        result[function] = Selection(
            stream=FilterCriteria.from_mapping(
                found[f"{prefix}StreamMapping"]["Properties"]["FilterCriteria"]
            ),
            rule=compile_event_pattern(found[f"{prefix}ChangeRule"]["Properties"]["EventPattern"]),
            subscription=by_attributes,
            subscription_policy=attributes_policy,
            body_subscription=by_body,
            body_subscription_policy=body_policy,
            queue=FilterCriteria.from_mapping(queue_mapping.get("FilterCriteria")),
            machine_queue=FilterCriteria.from_mapping(machine_mapping["FilterCriteria"]),
        )
    return result


@functools.cache
def pipe_filter() -> FilterCriteria:
    pipe = resources()["ChangePipe"]["Properties"]
    return FilterCriteria.from_mapping(pipe["SourceParameters"]["FilterCriteria"])


@functools.cache
def router_filter() -> FilterCriteria:
    return FilterCriteria.from_mapping(
        resources()["RouterStreamMapping"]["Properties"]["FilterCriteria"]
    )


def publish_attributes(attributes: dict[str, str]) -> dict[str, dict[str, str]]:
    """Attributes as Publish takes them (what shared.aws.messaging.publish_change sends)."""
    return {
        name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
    }


def queue_message(body: str) -> dict:
    """An SQS record of an event source mapping's batch, carrying ``body`` (what a queue mapping's
    FilterCriteria see)."""
    return {
        "messageId": "2e1424d4-f796-459a-8184-9c92662be6da",
        "receiptHandle": "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:last-agent-routing-SurveyQueue",
        "awsRegion": "us-east-1",
    }


def bus_event(record: dict) -> dict:
    """What ChangePipe puts on ChangeBus for one record, as EventBridge hands it to the rules."""
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "Event from aws:dynamodb",
        "source": "Pipe last-agent-routing-ChangePipe",
        "account": "123456789012",
        "time": "2026-11-29T10:05:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": record,
    }
