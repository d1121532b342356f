"""Parameter values checked as CloudFormation checks them at CreateStack, UpdateStack and
CreateChangeSet, with its messages (AWS CloudFormation User Guide, "Parameters syntax":
AllowedValues, AllowedPattern, MinLength/MaxLength, MinValue/MaxValue, Number and list types)."""

import pytest

from emulator.deploy.errors import DeployError
from emulator.deploy.parameters import check_parameters

DECLARED = {
    "FanOut": {"Type": "String", "Default": "lambda", "AllowedValues": ["lambda", "pipe"]},
    "AppName": {"Type": "String", "Default": "app", "AllowedPattern": "[a-z]+"},
    "Owner": {"Type": "String", "Default": "ops", "MinLength": 2, "MaxLength": 4},
    "Timeout": {"Type": "Number", "Default": 30, "MinValue": 1, "MaxValue": 900},
    "Retention": {"Type": "Number", "Default": 7, "AllowedValues": [1, 7, 14]},
    "Zones": {"Type": "CommaDelimitedList", "Default": "a,b", "AllowedPattern": "[a-z]"},
    "Sizes": {"Type": "List<Number>", "Default": "1,2", "MaxValue": 10},
    "Email": {"Type": "String", "Default": "", "AllowedPattern": "^$|^.+@.+$"},
    "Level": {
        "Type": "String",
        "Default": "INFO",
        "AllowedValues": ["INFO", "DEBUG"],
        "ConstraintDescription": "INFO or DEBUG",
    },
}


def test_the_defaults_and_values_within_the_constraints_pass():
    check_parameters(DECLARED, {})
    check_parameters(
        DECLARED,
        {
            "FanOut": "pipe",
            "Owner": "dev",
            "Timeout": "900",
            "Retention": "14",
            "Zones": "c",
            "Sizes": "10, 3",
            "Email": "a@b",
        },
    )


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"FanOut": "foo"}, "Parameter 'FanOut' must be one of AllowedValues"),
        ({"Retention": "2"}, "Parameter 'Retention' must be one of AllowedValues"),
        ({"AppName": "App1"}, "Parameter 'AppName' must match pattern [a-z]+"),
        ({"AppName": "ab1"}, "Parameter 'AppName' must match pattern [a-z]+"),  # the whole value
        ({"Owner": "x"}, "Parameter 'Owner' must contain at least 2 characters"),
        ({"Owner": "devops"}, "Parameter 'Owner' must contain at most 4 characters"),
        ({"Timeout": "soon"}, "Parameter 'Timeout' must be a number."),
        ({"Timeout": "0"}, "Parameter 'Timeout' must be a number not less than 1"),
        ({"Timeout": "901"}, "Parameter 'Timeout' must be a number not greater than 900"),
        ({"Zones": "a,B"}, "Parameter 'Zones' must match pattern [a-z]"),  # each member
        ({"Sizes": "1,x"}, "Parameter 'Sizes' must be a number."),
        ({"Sizes": "1,11"}, "Parameter 'Sizes' must be a number not greater than 10"),
        ({"Level": "TRACE"}, "Parameter Level failed to satisfy constraint: INFO or DEBUG"),
        ({"Nope": "1"}, "Parameters: [Nope] do not exist in the template"),
    ],
)
def test_a_value_outside_its_constraints_is_refused_with_cloudformations_message(given, message):
    with pytest.raises(DeployError) as refused:
        check_parameters(DECLARED, given)
    assert str(refused.value) == message


def test_a_parameter_without_a_value_or_default_is_refused():
    with pytest.raises(DeployError) as refused:
        check_parameters({"Stage": {"Type": "String"}, "Owner": {"Type": "String"}}, {})
    assert str(refused.value) == "Parameters: [Owner, Stage] must have values"
