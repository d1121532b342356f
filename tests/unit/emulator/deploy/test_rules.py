"""The template's Rules and Conditions, evaluated as CloudFormation evaluates them."""

import pytest

from emulator.deploy.errors import DeployError
from emulator.deploy.rules import check_rules, chosen, template_conditions


def test_template_rules_are_checked_before_anything_is_created():
    rules = {
        "Rules": {
            "BigNeedsOwner": {
                "RuleCondition": {
                    "Fn::Or": [
                        {"Fn::Equals": [{"Ref": "Size"}, "big"]},
                        {"Fn::Contains": [["huge", "vast"], {"Ref": "Size"}]},
                    ]
                },
                "Assertions": [
                    {
                        "Assert": {
                            "Fn::And": [{"Fn::Not": [{"Fn::Equals": [{"Ref": "Owner"}, ""]}]}]
                        },
                        "AssertDescription": "a big one needs an owner",
                    }
                ],
            }
        }
    }
    check_rules(rules, {"Size": "small", "Owner": ""})
    check_rules(rules, {"Size": "big", "Owner": "me"})
    for size in ("big", "vast"):
        with pytest.raises(DeployError, match="BigNeedsOwner: a big one needs an owner"):
            check_rules(rules, {"Size": size, "Owner": ""})
    unsupported = {"Rules": {"R": {"Assertions": [{"Assert": {"Fn::EachMemberIn": [[], []]}}]}}}
    with pytest.raises(DeployError, match="Fn::EachMemberIn is not evaluated"):
        check_rules(unsupported, {})


def test_conditions_and_the_values_they_choose():
    template = {
        "Conditions": {
            "ByLambda": {"Fn::Equals": [{"Ref": "FanOut"}, "lambda"]},
            "ByQueues": {"Fn::Not": [{"Condition": "ByLambda"}]},
        }
    }
    assert template_conditions(template, {"FanOut": "pipe"}) == {
        "ByLambda": False,
        "ByQueues": True,
    }
    value = {
        "Policies": [
            "Always",
            {"Fn::If": ["ByLambda", "StreamRead", {"Ref": "AWS::NoValue"}]},
            {"Fn::If": ["ByQueues", "QueueRead", "StreamRead"]},
        ],
        "Timeout": {"Fn::If": ["ByLambda", 30, {"Ref": "AWS::NoValue"}]},
    }
    for fan_out, deployed in (
        ("lambda", {"Policies": ["Always", "StreamRead", "StreamRead"], "Timeout": 30}),
        ("router", {"Policies": ["Always", "QueueRead"]}),
    ):
        assert chosen(value, template_conditions(template, {"FanOut": fan_out})) == deployed
