"""The IAM evaluator on cases from the IAM user guide and the DynamoDB / S3 developer guides:
evaluation order, wildcards, NotAction / NotResource, condition operators and set operators."""

import pytest

from emulator.iam.policy import (
    Policy,
    PolicyError,
    Request,
    evaluate,
    granted_actions,
    known_action,
)

TABLE = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"


def policy(*statements, name="p"):
    return Policy.parse(name, {"Version": "2012-10-17", "Statement": list(statements)})


def allowed(policies, action, resource, **context):
    request = Request(action, resource, {k.replace("__", ":"): v for k, v in context.items()})
    return evaluate(policies if isinstance(policies, list) else [policies], request).allowed


def test_nothing_allows_means_implicit_deny():
    p = policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"})
    assert allowed(p, "s3:GetObject", "arn:aws:s3:::b/k")
    assert not allowed(p, "s3:PutObject", "arn:aws:s3:::b/k")
    assert not allowed(p, "s3:GetObject", "arn:aws:s3:::other/k")


def test_an_explicit_deny_in_any_policy_wins_over_allows():
    allow = policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}, name="a")
    deny = policy({"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"}, name="d")
    decision = evaluate([allow, deny], Request("s3:DeleteObject", "arn:aws:s3:::b/k"))
    assert not decision.allowed
    assert decision.denied_by == "d/#0"
    assert allowed([allow, deny], "s3:GetObject", "arn:aws:s3:::b/k")


def test_actions_match_case_insensitively_with_wildcards():
    p = policy({"Effect": "Allow", "Action": ["s3:get*", "sqs:SendMessage?"], "Resource": "*"})
    assert allowed(p, "s3:GetObjectVersion", "*")
    assert allowed(p, "sqs:SendMessageX", "*")
    assert not allowed(p, "sqs:SendMessage", "*")  # ? is exactly one character


def test_resource_wildcards_stay_within_the_prefix_they_name():
    p = policy(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/incoming/*"}
    )
    assert allowed(p, "s3:GetObject", "arn:aws:s3:::b/incoming/2024/a.csv")
    assert not allowed(p, "s3:GetObject", "arn:aws:s3:::b/rejected/a.csv")
    assert not allowed(p, "s3:GetObject", "arn:aws:s3:::b")


def test_arn_components_are_matched_one_by_one():
    p = policy({"Effect": "Allow", "Action": "sqs:*", "Resource": "arn:aws:sqs:*:123456789012:q*"})
    assert allowed(p, "sqs:SendMessage", "arn:aws:sqs:eu-west-1:123456789012:queue")
    assert not allowed(p, "sqs:SendMessage", "arn:aws:sqs:eu-west-1:999999999999:queue")


def test_not_action_allows_everything_else():
    # User guide, NotAction: "allow everything except IAM".
    p = policy({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})
    assert allowed(p, "dynamodb:GetItem", TABLE)
    assert not allowed(p, "iam:CreateUser", "*")


def test_not_resource_denies_everything_outside():
    p = [
        policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}, name="a"),
        policy(
            {"Effect": "Deny", "Action": "s3:*", "NotResource": ["arn:aws:s3:::mine/*"]}, name="d"
        ),
    ]
    assert allowed(p, "s3:GetObject", "arn:aws:s3:::mine/k")
    assert not allowed(p, "s3:GetObject", "arn:aws:s3:::theirs/k")


def leading_keys_policy():
    # DynamoDB developer guide, fine-grained access control: items of one partition only.
    return policy(
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
            "Resource": TABLE,
            "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["user-1"]}},
        }
    )


def test_leading_keys_allow_the_own_partition_and_deny_another():
    p = leading_keys_policy()
    assert allowed(p, "dynamodb:GetItem", TABLE, dynamodb__LeadingKeys=["user-1"])
    assert not allowed(p, "dynamodb:GetItem", TABLE, dynamodb__LeadingKeys=["user-2"])
    assert not allowed(p, "dynamodb:Query", TABLE, dynamodb__leadingkeys=["user-1", "user-2"])


def test_for_all_values_passes_on_a_missing_key_and_for_any_value_fails():
    # User guide, "multivalued context keys": ForAllValues is true when the key is absent.
    assert allowed(leading_keys_policy(), "dynamodb:GetItem", TABLE)
    p = policy(
        {
            "Effect": "Allow",
            "Action": "dynamodb:GetItem",
            "Resource": TABLE,
            "Condition": {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["user-*"]}},
        }
    )
    assert not allowed(p, "dynamodb:GetItem", TABLE)
    assert allowed(p, "dynamodb:GetItem", TABLE, dynamodb__leadingkeys=["x", "user-3"])


def test_attributes_and_select_restrict_what_a_read_returns():
    # DynamoDB developer guide: only some attributes, Select SPECIFIC_ATTRIBUTES if present.
    p = policy(
        {
            "Effect": "Allow",
            "Action": "dynamodb:GetItem",
            "Resource": TABLE,
            "Condition": {
                "ForAllValues:StringEquals": {"dynamodb:Attributes": ["Wins", "Losses"]},
                "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
            },
        }
    )
    specific = {"dynamodb__select": ["SPECIFIC_ATTRIBUTES"]}
    assert allowed(p, "dynamodb:GetItem", TABLE, dynamodb__attributes=["Wins"], **specific)
    assert not allowed(
        p, "dynamodb:GetItem", TABLE, dynamodb__attributes=["Wins", "Email"], **specific
    )
    assert not allowed(p, "dynamodb:GetItem", TABLE, dynamodb__select=["ALL_ATTRIBUTES"])
    assert allowed(p, "dynamodb:GetItem", TABLE)  # IfExists: no Select, no Attributes


def test_negated_operators_pass_on_a_missing_key():
    p = policy(
        {
            "Effect": "Allow",
            "Action": "dynamodb:UpdateItem",
            "Resource": TABLE,
            "Condition": {"StringNotEquals": {"dynamodb:ReturnValues": ["ALL_NEW", "ALL_OLD"]}},
        }
    )
    assert allowed(p, "dynamodb:UpdateItem", TABLE)
    assert allowed(p, "dynamodb:UpdateItem", TABLE, dynamodb__returnvalues=["NONE"])
    assert not allowed(p, "dynamodb:UpdateItem", TABLE, dynamodb__returnvalues=["ALL_NEW"])


def test_bool_arn_like_null_and_numeric_operators():
    bucket = "arn:aws:s3:::b/*"
    p = [
        policy({"Effect": "Allow", "Action": "s3:*", "Resource": "*"}, name="a"),
        # User guide / S3: deny requests not sent over TLS.
        policy(
            {
                "Effect": "Deny",
                "Action": "s3:*",
                "Resource": bucket,
                "Condition": {"Bool": {"aws:SecureTransport": False}},
            },
            name="tls",
        ),
    ]
    assert not allowed(p, "s3:GetObject", "arn:aws:s3:::b/k", aws__SecureTransport=["false"])
    assert allowed(p, "s3:GetObject", "arn:aws:s3:::b/k", aws__SecureTransport=["true"])
    source = policy(
        {
            "Effect": "Allow",
            "Action": "sqs:SendMessage",
            "Resource": "*",
            "Condition": {
                "ArnLike": {"aws:SourceArn": "arn:aws:s3:::contacts-*"},
                "Null": {"aws:SourceAccount": "false"},
                "NumericLessThanEquals": {"s3:max-keys": "10"},
            },
        }
    )
    ok = {"aws__SourceArn": ["arn:aws:s3:::contacts-1"], "aws__SourceAccount": ["1"]}
    assert allowed(source, "sqs:SendMessage", "*", **ok, s3__max_keys=["3"]) is False  # key name
    assert allowed(source, "sqs:SendMessage", "*", **ok, **{"s3:max-keys": ["3"]})
    assert not allowed(source, "sqs:SendMessage", "*", **ok, **{"s3:max-keys": ["11"]})
    assert not allowed(
        source, "sqs:SendMessage", "*", aws__SourceArn=["arn:aws:s3:::contacts-1"]
    )  # Null false: SourceAccount must be present


def test_a_resource_the_stack_cannot_tell_is_decided_on_action_and_conditions():
    p = policy({"Effect": "Allow", "Action": "kinesis:PutRecord", "Resource": "arn:aws:x:::y"})
    assert allowed(p, "kinesis:PutRecord", None)


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::${aws:username}/*"},
        {
            "Effect": "Allow",
            "Action": "s3:*",
            "Resource": "*",
            "Condition": {"IpAddress": {"aws:SourceIp": "203.0.113.0/24"}},
        },
    ],
)
def test_what_cannot_be_decided_locally_is_refused_when_loaded(statement):
    with pytest.raises(PolicyError):
        policy(statement)


def test_catalogue_expands_wildcards_to_real_actions():
    sam_template = policy({"Effect": "Allow", "Action": "sqs:SendMessage*", "Resource": "*"})
    # SendMessageBatch is authorized as sqs:SendMessage: the catalogue has no action of its own.
    assert granted_actions(sam_template.statements[0]) == ["sqs:SendMessage"]
    assert known_action("dynamodb:ConditionCheckItem")
    assert not known_action("dynamodb:TransactWriteItems")
