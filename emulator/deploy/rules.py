"""What CloudFormation evaluates of a template against its parameter values: the Rules (checked
before anything is created; moto ignores them), the Conditions, and the Fn::If branch each picks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.deploy.errors import DeployError


def check_rules(template: dict[str, Any], parameters: dict[str, str]) -> None:
    """CloudFormation's template Rules: for each rule whose RuleCondition holds, every Assert
    must; DeployError naming the rule and its AssertDescription otherwise, before anything is
    created (moto ignores Rules)."""
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not _rule_value(rule["RuleCondition"], parameters):
            continue
        for assertion in rule.get("Assertions", []):
            if not _rule_value(assertion["Assert"], parameters):
                reason = assertion.get("AssertDescription", "an assertion failed")
                raise DeployError(f"template rule {name}: {reason}")


# The rule functions the local stack evaluates, over their evaluated arguments.
_RULE_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "Fn::Equals": lambda args: args[0] == args[1],
    "Fn::Not": lambda args: not args[0],
    "Fn::And": all,
    "Fn::Or": any,
    "Fn::Contains": lambda args: args[1] in args[0],
}


def _rule_value(
    value: Any,
    parameters: dict[str, str],
    condition: Callable[[str], bool] | None = None,
) -> Any:
    if not isinstance(value, dict):
        return value
    ((function, argument),) = value.items()
    if function == "Ref":
        if argument not in parameters:
            raise DeployError(f"template rules: Ref to {argument!r}, not a parameter")
        return parameters[argument]
    if function == "Condition" and condition is not None:
        return condition(argument)
    if function not in _RULE_FUNCTIONS:
        raise DeployError(f"template rules: {function} is not evaluated by the local stack")
    return _RULE_FUNCTIONS[function](
        [_rule_value(item, parameters, condition) for item in argument]
    )


def template_conditions(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, bool]:
    """The template's Conditions, evaluated as CloudFormation does (moto evaluates them too, but
    keeps the result to itself)."""
    definitions = template.get("Conditions", {})
    values: dict[str, bool] = {}

    def condition(name: str) -> bool:
        if name not in values:
            values[name] = bool(_rule_value(definitions[name], parameters, condition))
        return values[name]

    for name in definitions:
        condition(name)
    return values


_NO_VALUE = object()


def chosen(value: Any, conditions: dict[str, bool]) -> Any:
    """A template value with each Fn::If replaced by the branch its condition picked, and
    AWS::NoValue left out, as CloudFormation does."""
    if isinstance(value, list):
        return [v for v in (chosen(item, conditions) for item in value) if v is not _NO_VALUE]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::If"}:
        name, when_true, when_false = value["Fn::If"]
        return chosen(when_true if conditions[name] else when_false, conditions)
    if value == {"Ref": "AWS::NoValue"}:
        return _NO_VALUE
    items = ((key, chosen(item, conditions)) for key, item in value.items())
    return {key: item for key, item in items if item is not _NO_VALUE}
