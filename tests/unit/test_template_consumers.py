"""The three consumers' blocks in template.yaml are written out, one each (docs/template.md, "One
block per consumer"); this holds them in step: with the consumer's name swapped, every resource of
one consumer equals the same resource of the others, except for what makes each consumer itself
(OWN: its filters, its code, its environment and grants). A retry count, an alarm threshold or a
queue policy changed in one block and not the others fails here."""

import copy
import json

from tests.unit.fanout.fanout_template import CONSUMERS, template

# The consumer's own parts, by resource suffix: the paths (under the resource) that may differ.
OWN = {
    "ChangeRule": {"Properties/EventPattern"},
    "ChangeSubscription": {"Properties/FilterPolicy"},
    "QueueMapping": {"Properties/FilterCriteria"},
    "StreamMapping": {"Properties/FilterCriteria"},
    "Function": {
        "Metadata/UnusedGrants",
        "Properties/Description",
        "Properties/Environment/Variables",
        "Properties/Policies",
    },
}
# Named after one consumer, not part of its block: the contact flow that asks RouteFunction for
# the last agent, and the survey's e-mail template (the mail flow's).
ONLY = {"LastAgentRoutingFlow", "SurveyMailTemplate"}


def spellings(prefix: str) -> list[tuple[str, str]]:
    """LastAgent -> last-agent, last_agent, LAST_AGENT: every way the template names it."""
    words = "".join(f" {ch}" if ch.isupper() else ch for ch in prefix).split()
    lower = [w.lower() for w in words]
    return [
        (prefix, "<C>"),
        ("-".join(lower), "<c>"),
        ("_".join(lower), "<c>"),
        ("_".join(lower).upper(), "<C_UPPER>"),
    ]


def as_generic(prefix: str, resource: dict) -> dict:
    text = json.dumps(resource, sort_keys=True, default=str)
    for name, placeholder in spellings(prefix):
        text = text.replace(name, placeholder)
    return json.loads(text)


def without(resource: dict, paths: set[str]) -> dict:
    trimmed = copy.deepcopy(resource)
    for path in paths:
        *parents, last = path.split("/")
        node = trimmed
        for part in parents:
            node = node.get(part, {})
        node.pop(last, None)
    return trimmed


def out_of_step(resources: dict) -> list[str]:
    """Each resource of a consumer that differs from the first consumer's beyond OWN."""
    prefixes = list(CONSUMERS.values())
    suffixes = {
        name.removeprefix(prefix)
        for name in resources
        for prefix in prefixes
        if name.startswith(prefix) and name not in ONLY
    }
    found = []
    for suffix in sorted(suffixes):
        reference = None
        for prefix in prefixes:
            name = prefix + suffix
            if name not in resources:
                found.append(f"{name} is missing")
                continue
            generic = without(as_generic(prefix, resources[name]), OWN.get(suffix, set()))
            if reference is None:
                reference = (name, generic)
            elif generic != reference[1]:
                found.append(f"{name} differs from {reference[0]}")
    return found


def test_the_consumers_blocks_are_in_step():
    assert out_of_step(template()["Resources"]) == []


def test_a_setting_changed_in_one_consumers_block_alone_is_found():
    resources = copy.deepcopy(template()["Resources"])
    resources["SurveyQueue"]["Properties"]["VisibilityTimeout"] = 999
    resources["GoodwillDeadLetterQueueAlarm"]["Properties"]["Threshold"] = 5
    del resources["LastAgentFunctionErrorsAlarm"]
    assert out_of_step(resources) == [
        "GoodwillDeadLetterQueueAlarm differs from LastAgentDeadLetterQueueAlarm",
        "LastAgentFunctionErrorsAlarm is missing",
        "SurveyQueue differs from LastAgentQueue",
    ]
