"""The fan-out's selections as template.yaml declares them, in every FanOut mode: each consumer's
stream mapping filter (lambda), its rule's event pattern (pipe), its subscription's filter policy
(router), and the pipe's and the router mapping's own filters; compiled with the local stack's
matchers (emulator/core/filters.py, emulator/services/sns_filter_policies.py: the same language
AWS documents)."""

import functools
import json
from dataclasses import dataclass

from cfnlint.decode import cfn_yaml

from emulator.core.filters import FilterCriteria, Pattern, compile_event_pattern
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


def resources() -> dict:
    return cfn_yaml.load(str(ROOT / "template.yaml"))["Resources"]


@functools.cache
def selections() -> dict[str, Selection]:
    """Consumer logical id -> its selections."""
    found = resources()
    result = {}
    for function, prefix in CONSUMERS.items():
        subscription = found[f"{prefix}ChangeSubscription"]["Properties"]
        policy = json.loads(json.dumps(subscription["FilterPolicy"]))
        result[function] = Selection(
            stream=FilterCriteria.from_mapping(
                found[f"{prefix}StreamMapping"]["Properties"]["FilterCriteria"]
            ),
            rule=compile_event_pattern(found[f"{prefix}ChangeRule"]["Properties"]["EventPattern"]),
            subscription=FilterPolicy(policy, subscription.get("FilterPolicyScope")),
            subscription_policy=policy,
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
