"""LastAgentRoutingFlow (template.yaml), the routing flow of docs/connect.md in Amazon Connect's
flow language, walked: every transition lands on an action of the flow, every action is reached
from StartAction, every error branch ends in normal routing (the default queue), and what the
flow reads of ``$.External`` is exactly what RouteFunction answers, read only where it answers
it."""

import json
import re
from collections import deque

import pytest
from boto3.dynamodb.types import TypeSerializer
from cfnlint.decode.cfn_yaml import load as load_cfn_yaml
from shared.aws import table

from harness import ROOT
from harness.events import contact
from harness.in_process import cold_start

TEMPLATE = load_cfn_yaml(str(ROOT / "template.yaml"))
FLOW_RESOURCE = TEMPLATE["Resources"]["LastAgentRoutingFlow"]
ROUTE_ARN = "arn:aws:lambda:us-east-1:123456789012:function:stack-RouteFunction-ABC"
QUEUE_ARN = "arn:aws:connect:us-east-1:123456789012:instance/0c6d5e7a/queue/0d7c2b1a"
# what the flow's !Sub fills in
SUBSTITUTIONS = {
    "RouteFunction.Arn": ROUTE_ARN,
    "ConnectDefaultQueueArn": QUEUE_ARN,
    "AWS::StackName": "stack",
}
# The actions of Connect's flow language this flow may use, and the errors each may raise
# (the flow language reference: InvokeLambdaFunction, Compare, UpdateContactTargetQueue,
# TransferContactToQueue, DisconnectParticipant).
ERRORS = {
    "InvokeLambdaFunction": {"NoMatchingError"},
    "Compare": {"NoMatchingCondition"},
    "UpdateContactTargetQueue": {"NoMatchingError"},
    "TransferContactToQueue": {"QueueAtCapacity", "NoMatchingError"},
    "DisconnectParticipant": set(),
}
EXTERNAL = re.compile(r"\$\.External\.([A-Za-z0-9_]+)")


def flow() -> dict:
    content = FLOW_RESOURCE["Properties"]["Content"]["Fn::Sub"]
    return json.loads(re.sub(r"\$\{([^}]+)\}", lambda m: SUBSTITUTIONS[m[1]], content))


FLOW = flow()
ACTIONS = {action["Identifier"]: action for action in FLOW["Actions"]}


def transitions(action: dict) -> list[tuple[str, str]]:
    """(kind, target) of every way out of an action: next, a condition, an error."""
    out = action.get("Transitions", {})
    found = [("next", out["NextAction"])] if "NextAction" in out else []
    found += [("condition", c["NextAction"]) for c in out.get("Conditions", [])]
    found += [(f"error {e['ErrorType']}", e["NextAction"]) for e in out.get("Errors", [])]
    return found


def reachable(start: str) -> set[str]:
    seen, todo = {start}, deque([start])
    while todo:
        for _, target in transitions(ACTIONS[todo.popleft()]):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# Normal routing: the caller goes to the default queue, then the flow ends.
NORMAL_ROUTING = "set-default-queue"


def test_the_flow_is_connects_flow_language_with_unique_identifiers():
    assert FLOW["Version"] == "2019-10-30"
    assert len(ACTIONS) == len(FLOW["Actions"])
    for identifier, action in ACTIONS.items():
        assert 0 < len(identifier) <= 50 and not set("%:(\\/)=$,;[]{}") & set(identifier)
        assert set(action) == {"Identifier", "Type", "Parameters", "Transitions"}, identifier
        assert action["Type"] in ERRORS, action["Type"]
        for kind, _ in transitions(action):
            if kind.startswith("error "):
                assert kind.removeprefix("error ") in ERRORS[action["Type"]], (identifier, kind)
    assert FLOW_RESOURCE["Properties"]["Type"] == "CONTACT_FLOW"
    assert FLOW_RESOURCE["Condition"] == "HasConnectFlow"


def test_every_transition_lands_on_an_action_of_the_flow():
    assert FLOW["StartAction"] in ACTIONS
    for identifier, action in ACTIONS.items():
        for kind, target in transitions(action):
            assert target in ACTIONS, f"{identifier} {kind} -> {target}"


def test_every_action_is_reached_from_the_start():
    assert reachable(FLOW["StartAction"]) == set(ACTIONS)


def test_every_error_branch_ends_in_normal_routing():
    """Every error of the last-agent path (the function, the comparison, the agent's queue) goes
    to normal routing; normal routing's own errors end the flow, nothing loops back."""
    normal = reachable(NORMAL_ROUTING)
    assert FLOW["StartAction"] not in normal  # normal routing never asks for the agent again
    queue = ACTIONS[NORMAL_ROUTING]
    assert queue["Type"] == "UpdateContactTargetQueue"
    assert queue["Parameters"] == {"QueueId": QUEUE_ARN}
    transfers = [a for a in normal if ACTIONS[a]["Type"] == "TransferContactToQueue"]
    assert transfers == [queue["Transitions"]["NextAction"]]
    ends = {a for a in normal if not transitions(ACTIONS[a])}
    assert ends and all(ACTIONS[a]["Type"] == "DisconnectParticipant" for a in ends)
    for identifier, action in ACTIONS.items():
        errors = [t for k, t in transitions(action) if k.startswith("error ")]
        assert errors or not ERRORS[action["Type"]], f"{identifier} handles no error"
        for target in errors:
            if identifier in normal:
                assert target in ends, identifier
            else:
                assert target == NORMAL_ROUTING, identifier


def test_the_function_is_asked_as_docs_connect_md_says():
    [invoke] = [a for a in ACTIONS.values() if a["Type"] == "InvokeLambdaFunction"]
    assert invoke["Identifier"] == FLOW["StartAction"]
    assert invoke["Parameters"]["LambdaFunctionARN"] == ROUTE_ARN
    assert invoke["Parameters"]["ResponseValidation"] == {"ResponseType": "STRING_MAP"}
    assert 0 < int(invoke["Parameters"]["InvocationTimeLimitSeconds"]) <= 8


def external_reads() -> dict[str, set[str]]:
    """Which action reads which key of ``$.External``."""
    reads: dict[str, set[str]] = {}
    for identifier, action in ACTIONS.items():
        for key in EXTERNAL.findall(json.dumps(action["Parameters"])):
            reads.setdefault(key, set()).add(identifier)
    return reads


def connect_event(caller: str) -> dict:
    event = json.loads((ROOT / "events" / "connect-contact-flow.json").read_text())
    event["Details"]["ContactData"]["CustomerEndpoint"]["Address"] = caller
    return event


@pytest.fixture
def answers(stack, monkeypatch, lambda_context) -> dict[str, dict[str, str]]:
    """What RouteFunction answers a caller with a last agent, and one without."""
    seen = contact("c-42", "+14155550101", "2026-11-29T10:05:00Z", agent_id="agent-7")
    stack.dynamodb.put_item(
        TableName=stack.contacts_table,
        Item={name: TypeSerializer().serialize(value) for name, value in seen.items()},
    )
    assert table.update_last_agent(stack.dynamodb, stack.contacts_table, seen) == "updated"
    route = cold_start("route", monkeypatch)
    return {
        "found": route.lambda_handler(connect_event("+14155550101"), lambda_context),
        "not found": route.lambda_handler(connect_event("+14155550199"), lambda_context),
    }


def test_the_flow_reads_exactly_the_keys_route_function_answers(answers):
    assert answers["not found"] == {"found": "false"}
    assert set(answers["found"]) == {"found", "agent_id", "contact_id", "ended_at"}
    reads = external_reads()
    assert set(reads) <= set(answers["found"])
    assert set(reads) == {"found", "agent_id"}  # the agent's own queue needs nothing else
    # the decision reads "found", against the value the function gives when it found one
    [compare] = reads["found"]
    conditions = ACTIONS[compare]["Transitions"]["Conditions"]
    assert [c["Condition"] for c in conditions] == [
        {"Operator": "Equals", "Operands": [answers["found"]["found"]]}
    ]
    # the rest only where the function answered them: past that condition, never otherwise
    found_branch = reachable(conditions[0]["NextAction"])
    assert not {compare, FLOW["StartAction"]} & found_branch
    for key, readers in reads.items():
        if key != "found":
            assert readers <= found_branch - reachable(NORMAL_ROUTING), key
