"""template.checkov.yaml's template-wide checkov skips: each reason, asserted for every resource of
its type in template.yaml, so that a resource the reason does not fit fails here instead of being
skipped unseen."""

from pathlib import Path

import pytest
import yaml
from cfnlint.decode.cfn_yaml import load as load_cfn_yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "template.checkov.yaml").read_text())
TEMPLATE = load_cfn_yaml(str(ROOT / "template.yaml"))
RESOURCES = TEMPLATE["Resources"]
FUNCTION = "AWS::Serverless::Function"


def of_type(resource_type: str) -> dict[str, dict]:
    return {lid: r for lid, r in RESOURCES.items() if r["Type"] == resource_type}


def names(value) -> set[str]:
    """The logical ids a Ref or GetAtt names."""
    if isinstance(value, dict):
        if "Ref" in value:
            return {value["Ref"]}
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return {target[0] if isinstance(target, list) else target.split(".")[0]}
    return set()


def mapped_functions() -> set[str]:
    """Functions an event source mapping invokes."""
    return {
        lid
        for mapping in of_type("AWS::Lambda::EventSourceMapping").values()
        for lid in names(mapping["Properties"]["FunctionName"])
    }


def connect_functions() -> set[str]:
    """Functions Amazon Connect invokes (synchronously, from a contact flow)."""
    return {
        lid
        for permission in of_type("AWS::Lambda::Permission").values()
        if permission["Properties"].get("Principal") == "connect.amazonaws.com"
        for lid in names(permission["Properties"]["FunctionName"])
    }


def function_property(lid: str, name: str):
    properties = RESOURCES[lid].get("Properties", {})
    return properties.get(name, TEMPLATE.get("Globals", {}).get("Function", {}).get(name))


def queues_use_sse_sqs() -> list[str]:
    return [
        lid
        for lid, queue in of_type("AWS::SQS::Queue").items()
        if queue.get("Properties", {}).get("SqsManagedSseEnabled") is not True
        or "KmsMasterKeyId" in queue.get("Properties", {})
    ]


def unreserved_functions_are_mapped() -> list[str]:
    return [
        lid
        for lid in of_type(FUNCTION)
        if function_property(lid, "ReservedConcurrentExecutions") is None
        and lid not in mapped_functions()
    ]


def functions_are_never_invoked_asynchronously() -> list[str]:
    driven = mapped_functions() | connect_functions()
    invoke_configs = {
        lid
        for config in of_type("AWS::Lambda::EventInvokeConfig").values()
        for lid in names(config["Properties"]["FunctionName"])
    }
    return [
        lid
        for lid in of_type(FUNCTION)
        if lid not in driven
        or lid in invoke_configs
        or function_property(lid, "Events")
        or function_property(lid, "DeadLetterQueue") is not None
    ]


def functions_have_no_vpc() -> list[str]:
    return [lid for lid in of_type(FUNCTION) if function_property(lid, "VpcConfig") is not None]


SECRET_WORDS = ("SECRET", "PASSWORD", "TOKEN", "CREDENTIAL", "PRIVATE", "API_KEY")


def environments_hold_no_secrets() -> list[str]:
    """Every variable is a reference to a resource or parameter, or a plain tunable (a name, a
    number, a level), and none is named like a secret."""
    bad = []
    globals_ = TEMPLATE.get("Globals", {}).get("Function", {}).get("Environment", {})
    for lid, function in [
        ("Globals", {"Properties": {"Environment": globals_}}),
        *of_type(FUNCTION).items(),
    ]:
        variables = function.get("Properties", {}).get("Environment", {}).get("Variables", {})
        for name, value in variables.items():
            reference = isinstance(value, dict) and {"Ref", "Fn::GetAtt", "Fn::Sub"} >= set(value)
            tunable = isinstance(value, str | int) and str(value).replace("-", "").isalnum()
            if any(word in name for word in SECRET_WORDS) or not (reference or tunable):
                bad.append(f"{lid}.{name}")
    return bad


def log_groups_are_the_functions() -> list[str]:
    """The functions' log groups, and the delivery stream's (Firehose logs its delivery errors
    there: S3 or KMS refusals, never a record)."""
    expected = {f"/aws/lambda/${{AWS::StackName}}-{lid}" for lid in of_type(FUNCTION)}
    expected |= {
        "/aws/kinesisfirehose/" + stream["Properties"]["DeliveryStreamName"]["Fn::Sub"]
        for stream in of_type("AWS::KinesisFirehose::DeliveryStream").values()
    }
    return [
        lid
        for lid, group in of_type("AWS::Logs::LogGroup").items()
        if group["Properties"].get("LogGroupName", {}).get("Fn::Sub") not in expected
        or "KmsKeyId" in group["Properties"]
    ]


# check id -> (the resource type it is skipped for, what of the template its reason claims)
REASONS = {
    "CKV_AWS_27": ("AWS::SQS::Queue", queues_use_sse_sqs),
    "CKV_AWS_115": (FUNCTION, unreserved_functions_are_mapped),
    "CKV_AWS_116": (FUNCTION, functions_are_never_invoked_asynchronously),
    "CKV_AWS_117": (FUNCTION, functions_have_no_vpc),
    "CKV_AWS_173": (FUNCTION, environments_hold_no_secrets),
    "CKV_AWS_158": ("AWS::Logs::LogGroup", log_groups_are_the_functions),
}


def test_every_template_wide_skip_has_a_reason_checked_here():
    assert sorted(CONFIG["skip-check"]) == sorted(REASONS)


@pytest.mark.parametrize("check", sorted(REASONS))
def test_the_reason_holds_for_every_resource_of_its_type(check):
    resource_type, holds = REASONS[check]
    assert of_type(resource_type), f"{check}: no {resource_type} in template.yaml"
    assert holds() == [], f"{check}'s reason in template.checkov.yaml does not hold for these"


def test_no_resource_repeats_a_template_wide_skip():
    repeated = [
        f"{lid}: {skip['id']}"
        for lid, resource in RESOURCES.items()
        for skip in (resource.get("Metadata") or {}).get("checkov", {}).get("skip", [])
        if skip["id"] in REASONS
    ]
    assert repeated == []
