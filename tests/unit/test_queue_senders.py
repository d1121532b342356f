"""Who may send to the queues whose messages become a customer's e-mail or a gift card
(NotificationQueue) or a consumer's work (the consumer queues of the modes that deliver through
queues, and ChangeBus in mode pipe): only their producers and the operators' redrives (parameter
OperatorRoles), whatever IAM grants other principals of the account (issue 43, item 5). Decided
by the local stack's IAM evaluator (emulator/iam/policy.py) on the policies as each FanOut mode
deploys them."""

import re

import pytest

from emulator.deploy.rules import chosen, template_conditions
from emulator.iam.policy import Policy, Principal, Request, authorize
from ops import fan_out
from tests.unit.fanout.fanout_template import CONSUMERS, template

ACCOUNT = "111122223333"
QUEUE_MODES = tuple(m.name for m in fan_out.MODES.values() if m.consumer_queues)
OPERATOR = f"arn:aws:iam::{ACCOUNT}:role/oncall/OnCall"
# Another function of the stack whose role a mistake (or an attacker holding it) let send anywhere.
OUTSIDER = f"arn:aws:iam::{ACCOUNT}:role/IngestFunctionRole"
SEND_ANYWHERE = Policy.parse(
    "identity",
    {"Statement": [{"Effect": "Allow", "Action": ["sqs:*", "events:*"], "Resource": "*"}]},
)
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": ACCOUNT,
    "AWS::StackName": "stack",
}
CHANGE_BUS = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/stack-changes"


def arn_of(logical_id: str) -> str:
    """The ARN GetAtt / Ref gives the resources these policies name."""
    if logical_id.endswith("Role"):
        return f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"
    if logical_id.endswith("Rule"):
        return f"arn:aws:events:us-east-1:{ACCOUNT}:rule/{logical_id}"
    if logical_id.endswith("Topic"):
        return f"arn:aws:sns:us-east-1:{ACCOUNT}:{logical_id}"
    return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{logical_id}"


def resolved(value, parameters: dict[str, str]):
    """``value`` with the intrinsic functions these policies use evaluated."""
    if isinstance(value, list):
        return [resolved(v, parameters) for v in value]
    if not isinstance(value, dict):
        return value
    if "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        return arn_of(target[0] if isinstance(target, list) else target.split(".")[0])
    if "Ref" in value:
        return parameters.get(value["Ref"]) or arn_of(value["Ref"])
    if "Fn::Sub" in value:
        return re.sub(
            r"\$\{([A-Za-z:]+)(\.Arn)?\}",
            lambda m: parameters.get(m[1]) or arn_of(m[1]),
            value["Fn::Sub"],
        )
    if "Fn::Split" in value:
        separator, text = value["Fn::Split"]
        return resolved(text, parameters).split(separator)
    return {k: resolved(v, parameters) for k, v in value.items()}


def queue_policy(name: str, mode: str, operators: str = "") -> Policy:
    return resource_policy(f"{name}Policy", "PolicyDocument", mode, operators)


def resource_policy(resource: str, field: str, mode: str, operators: str = "") -> Policy:
    """The policy the property ``field`` of ``resource`` holds, as a stack of FanOut ``mode``
    and OperatorRoles ``operators`` deploys it."""
    parameters = {n: str(p.get("Default", "")) for n, p in template()["Parameters"].items()} | {
        "FanOut": mode,
        "OperatorRoles": operators,
    }
    conditions = template_conditions(template(), parameters)
    document = template()["Resources"][resource]["Properties"][field]
    return Policy.parse(
        resource,
        resolved(chosen(document, conditions), parameters | PSEUDO),
        resource_based=True,
    )


def may_send(
    policy: Policy,
    queue: str,
    *,
    role: str = "",
    service: str = "",
    source: str = "",
    action: str = "sqs:SendMessage",
):
    context = {"aws:securetransport": ["true"]}
    if source:
        context |= {"aws:sourcearn": [source], "aws:sourceaccount": [ACCOUNT]}
    if role:
        principal = Principal.role_session(role, "session")
        context |= {"aws:principalarn": [role]}
        identity = [SEND_ANYWHERE]
    else:
        principal, identity = Principal(ACCOUNT, service=service), []
    target = queue if queue.startswith("arn:") else arn_of(queue)
    request = Request(action, target, context)
    return authorize(request, principal, identity, policy, resource_account=ACCOUNT).allowed


@pytest.mark.parametrize("operators", ["", OPERATOR])
def test_only_survey_goodwill_and_the_operators_send_notifications(operators):
    policy = queue_policy("NotificationQueue", "lambda", operators)
    for producer in ("SurveyFunctionRole", "GoodwillFunctionRole"):
        assert may_send(policy, "NotificationQueue", role=arn_of(producer))
    assert not may_send(policy, "NotificationQueue", role=OUTSIDER)
    assert not may_send(policy, "NotificationQueue", role=arn_of("LastAgentFunctionRole"))
    assert may_send(policy, "NotificationQueue", role=OPERATOR) == bool(operators)


@pytest.mark.parametrize("mode", QUEUE_MODES)
@pytest.mark.parametrize("consumer", CONSUMERS.values())
@pytest.mark.parametrize("operators", ["", OPERATOR])
def test_only_the_fan_out_and_the_operators_send_to_a_consumer_queue(consumer, mode, operators):
    queue = f"{consumer}Queue"
    policy = queue_policy(queue, mode, operators)
    if mode == "pipe-sfn":
        assert may_send(policy, queue, role=arn_of("ChangeMachineRole"))
    else:
        service, source = (
            ("events.amazonaws.com", arn_of(f"{consumer}ChangeRule"))
            if mode == "pipe"
            else ("sns.amazonaws.com", arn_of("ChangeTopic"))
        )
        assert may_send(policy, queue, service=service, source=source)
        # the same service for another rule or topic of the account is no producer
        assert not may_send(policy, queue, service=service, source=source + "-other")
    assert not may_send(policy, queue, role=OUTSIDER)
    assert may_send(policy, queue, role=OPERATOR) == bool(operators)


def test_only_the_pipe_puts_changes_on_the_bus():
    policy = resource_policy("ChangeBus", "Policy", "pipe")
    put = "events:PutEvents"
    assert may_send(policy, CHANGE_BUS, role=arn_of("ChangePipeRole"), action=put)
    assert not may_send(policy, CHANGE_BUS, role=OUTSIDER, action=put)


@pytest.mark.parametrize(
    ("queue", "service", "source"),
    [
        ("MailQueue", "sns.amazonaws.com", "NotificationsTopic"),
        ("MailEventsQueue", "events.amazonaws.com", "MailEventsRule"),
    ],
)
@pytest.mark.parametrize("operators", ["", OPERATOR])
def test_only_their_source_and_the_operators_send_to_the_mail_queues(
    queue, service, source, operators
):
    policy = queue_policy(queue, "lambda", operators)
    assert may_send(policy, queue, service=service, source=arn_of(source))
    assert not may_send(policy, queue, service=service, source=arn_of(source) + "-other")
    assert not may_send(policy, queue, role=arn_of("NotifierFunctionRole"))
    assert may_send(policy, queue, role=OPERATOR) == bool(operators)
