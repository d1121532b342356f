"""The policies that are not the caller's, taken from the real template.yaml (its intrinsics
resolved as CloudFormation would for one stack): the bucket's DenyInsecureTransport, the consumer
queues that only their rule or topic may write, the change topic only the router may publish to,
the bucket key only IngestFunction and the key users may use; decided with the identity-based
policies as IAM's evaluation logic documents, and read back from moto as the stack holds them."""

import base64
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from emulator.deploy.rules import chosen, template_conditions
from emulator.deploy.translate import load_template
from emulator.iam.policy import (
    IDENTITY_BASED,
    RESOURCE_BASED,
    Policy,
    PolicyError,
    Principal,
    Request,
    authorize,
)
from emulator.iam.resources import (
    denies_everyone,
    kms_key_arn,
    request_keys,
    resource_policy,
    role_session_context,
    service_may,
    with_context,
)
from emulator.process import ACCOUNT, REGION
from tests.unit.emulator.support import ROOT

pytestmark = pytest.mark.usefixtures("module_credentials")

TEMPLATE = load_template(ROOT / "template.yaml")
STACK_ID = (
    f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/cc/0a1b2c3d-1111-2222-3333-444455556666"
)
BUCKET = f"contacts-{ACCOUNT}-{REGION}-0a1b2c3d"
KEY_ID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
KEY_USER = f"arn:aws:iam::{ACCOUNT}:role/uploader"
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::StackId": STACK_ID,
    "AWS::StackName": "cc",
}


def physical(logical_id: str, attribute: str = "Arn") -> str:
    """What Ref / GetAtt give for a resource of the stack."""
    kind = TEMPLATE["Resources"].get(logical_id, {}).get("Type")  # SAM makes the roles
    if kind == "AWS::S3::Bucket":
        name = BUCKET if logical_id == "ContactsBucket" else logical_id.lower()
        return f"arn:aws:s3:::{name}" if attribute == "Arn" else name
    arns = {
        "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{logical_id}",
        "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{logical_id}",
        "AWS::Events::Rule": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/cc-changes/{logical_id}",
        "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{KEY_ID}",
    }
    return arns.get(kind, f"arn:aws:iam::{ACCOUNT}:role/{logical_id}")


def resolved(value: Any, parameters: dict[str, str]) -> Any:
    """``value`` with the intrinsics the template's policies use resolved."""
    if isinstance(value, list):
        return [resolved(item, parameters) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        name = value["Ref"]
        if name in PSEUDO or name in parameters:
            return PSEUDO.get(name) or parameters[name]
        kind = TEMPLATE["Resources"][name]["Type"]
        return physical(name, "Arn" if kind == "AWS::SNS::Topic" else "Name")
    if set(value) == {"Fn::GetAtt"}:
        return physical(*value["Fn::GetAtt"])
    if set(value) == {"Fn::Split"}:
        separator, text = value["Fn::Split"]
        return resolved(text, parameters).split(separator)
    if set(value) == {"Fn::Select"}:
        index, items = value["Fn::Select"]
        return resolved(items, parameters)[int(index)]
    if set(value) == {"Fn::Sub"}:
        text, names = value["Fn::Sub"] if isinstance(value["Fn::Sub"], list) else (value, {})
        text = text["Fn::Sub"] if isinstance(text, dict) else text
        for name, given in {**PSEUDO, **parameters, **names}.items():
            text = text.replace(f"${{{name}}}", resolved(given, parameters))
        for logical_id in TEMPLATE["Resources"]:
            text = text.replace(f"${{{logical_id}.Arn}}", physical(logical_id))
        return text
    return {key: resolved(item, parameters) for key, item in value.items()}


def template_policy(logical_id: str, fan_out: str = "pipe") -> dict[str, Any]:
    """The resource policy document ``logical_id`` deploys with FanOut ``fan_out``."""
    parameters = {
        name: str(spec.get("Default", "")) for name, spec in TEMPLATE["Parameters"].items()
    }
    parameters |= {"FanOut": fan_out, "ContactsKeyUsers": KEY_USER}
    conditions = template_conditions(TEMPLATE, parameters)
    properties = chosen(TEMPLATE["Resources"][logical_id]["Properties"], conditions)
    return resolved(properties.get("PolicyDocument") or properties["KeyPolicy"], parameters)


def parsed(logical_id: str, fan_out: str = "pipe") -> Policy:
    return Policy.parse(logical_id, template_policy(logical_id, fan_out), resource_based=True)


def role(name: str) -> Principal:
    return Principal.role_session(f"arn:aws:iam::{ACCOUNT}:role/{name}", "session")


def request(
    principal: Principal, action: str, resource: str, secure_transport: str = "true", **context
) -> Request:
    """A role session's request; ``context`` (``kms__ViaService="..."``) over its keys."""
    keys = {k.replace("__", ":").lower(): [v] for k, v in context.items()}
    made = Request(action, resource, role_session_context(principal, secure_transport))
    return with_context(made, keys)


def identity(*statements) -> list[Policy]:
    return [Policy.parse("role", {"Statement": list(statements)})]


ALLOW_EVERYTHING = identity({"Effect": "Allow", "Action": "*", "Resource": "*"})


# --- the template's policies, decided -------------------------------------------------------------
def test_the_bucket_refuses_a_call_marked_insecure_whatever_the_role_allows():
    bucket_policy = parsed("ContactsBucketPolicy")
    caller = role("IngestFunctionRole")
    key = f"arn:aws:s3:::{BUCKET}/incoming/a.csv"
    secure = request(caller, "s3:GetObjectVersion", key)
    assert authorize(secure, caller, ALLOW_EVERYTHING, bucket_policy).allowed
    insecure = request(caller, "s3:GetObjectVersion", key, secure_transport="false")
    decision = authorize(insecure, caller, ALLOW_EVERYTHING, bucket_policy)
    assert not decision.allowed
    assert decision.denied_by == "ContactsBucketPolicy/DenyInsecureTransport"
    assert decision.reason("s3:GetObjectVersion") == (
        "with an explicit deny in a resource-based policy: "
        "ContactsBucketPolicy/DenyInsecureTransport"
    )


def test_the_bucket_refuses_a_put_under_another_encryption_or_key_whatever_the_role_allows():
    """Issue 43, item 3: DenyOtherEncryption and DenyOtherKeys, with the condition keys of the
    request's headers (emulator/iam/authorizations.py)."""
    bucket_policy = parsed("ContactsBucketPolicy")
    caller = role("IngestFunctionRole")
    key = f"arn:aws:s3:::{BUCKET}/rejected/a.csv/v1.errors.jsonl"
    bucket_key = physical("ContactsBucketKey")
    sse = "s3__x-amz-server-side-encryption"
    key_id = "s3__x-amz-server-side-encryption-aws-kms-key-id"

    def put(**headers: str):
        made = request(caller, "s3:PutObject", key, **headers)
        return authorize(made, caller, ALLOW_EVERYTHING, bucket_policy)

    assert put().allowed  # no header: the bucket's default, its key
    assert put(**{sse: "aws:kms"}).allowed  # the bucket's key by default
    assert put(**{sse: "aws:kms", key_id: bucket_key}).allowed  # as Firehose puts
    for denied, headers in (
        ("DenyOtherEncryption", {sse: "AES256"}),
        ("DenyOtherEncryption", {sse: "aws:kms:dsse", key_id: bucket_key}),
        ("DenyOtherKeys", {sse: "aws:kms", key_id: physical("AlarmTopicKey").replace(KEY_ID, "x")}),
        ("DenyOtherKeys", {sse: "aws:kms", key_id: KEY_ID}),  # not by its ARN
    ):
        decision = put(**headers)
        assert not decision.allowed, headers
        assert decision.denied_by == f"ContactsBucketPolicy/{denied}"


def test_a_caller_moto_decides_is_refused_a_put_under_another_encryption():
    """denies_everyone (a test's or ops' put, not a function's) reads the request's keys."""
    bucket_policy = parsed("ContactsBucketPolicy")
    key = f"arn:aws:s3:::{BUCKET}/incoming/a.csv"
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_policy(
            Bucket=BUCKET, Policy=json.dumps(template_policy("ContactsBucketPolicy"))
        )
        assert parsed("ContactsBucketPolicy") == bucket_policy
        assert not denies_everyone("s3:PutObject", key)
        token = request_keys.set({"s3:x-amz-server-side-encryption": ["AES256"]})
        try:
            assert denies_everyone("s3:PutObject", key)
            assert not denies_everyone("s3:GetObject", key)  # a put's keys, for a put only
        finally:
            request_keys.reset(token)


@pytest.mark.parametrize("consumer", ["LastAgent", "Survey", "Goodwill"])
def test_a_consumer_queue_takes_only_its_own_rules_delivery(consumer):
    queue_policy = parsed(f"{consumer}QueuePolicy", "pipe")
    queue = physical(f"{consumer}Queue")
    others = [c for c in ("LastAgent", "Survey", "Goodwill") if c != consumer]

    def delivery(service: str, source: str) -> Request:
        context = {
            "aws:sourcearn": [source],
            "aws:sourceaccount": [ACCOUNT],
            "aws:securetransport": ["true"],
        }
        return Request("sqs:SendMessage", queue, context)

    events = Principal(ACCOUNT, service="events.amazonaws.com")
    own_rule = physical(f"{consumer}ChangeRule")
    assert authorize(delivery("events", own_rule), events, resource_policy=queue_policy).allowed
    for other in others:
        refused = authorize(
            delivery("events", physical(f"{other}ChangeRule")), events, resource_policy=queue_policy
        )
        assert not refused.allowed
        # the queue's deny of every sender but its producer (issue 43, item 5)
        assert refused.reason("sqs:SendMessage") == (
            f"with an explicit deny in a resource-based policy: {consumer}QueuePolicy/"
            "OnlyTheChangesSend"
        )
    sns = Principal(ACCOUNT, service="sns.amazonaws.com")  # the router mode's sender
    assert not authorize(delivery("sns", own_rule), sns, resource_policy=queue_policy).allowed


def test_only_the_routers_role_publishes_to_the_change_topic_whatever_a_role_allows():
    topic_policy = parsed("ChangeTopicPolicy", "router")
    topic = physical("ChangeTopic")
    router = role("RouterFunctionRole")
    assert authorize(request(router, "sns:Publish", topic), router, ALLOW_EVERYTHING, topic_policy)
    other = role("LastAgentFunctionRole")
    decision = authorize(
        request(other, "sns:Publish", topic), other, ALLOW_EVERYTHING, topic_policy
    )
    assert not decision.allowed
    assert decision.denied_by == "ChangeTopicPolicy/OnlyThePublisherPublishes"
    assert decision.denied_in == RESOURCE_BASED


def test_the_bucket_key_is_used_through_s3_by_ingest_and_the_key_users_only():
    key_policy = parsed("ContactsBucketKey")
    key = physical("ContactsBucketKey")
    via_s3 = {"kms__ViaService": f"s3.{REGION}.amazonaws.com"}
    ingest = role("IngestFunctionRole")

    def decide(principal, roles, **context):
        made = request(principal, "kms:Decrypt", key, **context)
        return authorize(made, principal, roles, key_policy, key_policy=True)

    # named in the key policy: no IAM grant needed
    assert decide(ingest, [], **via_s3).allowed
    assert not decide(ingest, [], kms__ViaService="sqs.us-east-1.amazonaws.com").allowed
    # a key user: the key policy names the account (for these roles), so IAM must allow too
    uploader = Principal.role_session(KEY_USER, "upload")
    assert not decide(uploader, [], **via_s3).allowed
    assert decide(uploader, ALLOW_EVERYTHING, **via_s3).allowed
    # anyone else: an IAM grant alone never opens a key
    stranger = role("LastAgentFunctionRole")
    decision = decide(stranger, ALLOW_EVERYTHING, **via_s3)
    assert not decision.allowed
    assert decision.reason("kms:Decrypt") == (
        "because no resource-based policy allows the kms:Decrypt action"
    )


def test_every_resource_policy_of_the_template_is_evaluated_locally():
    kinds = {"AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"}
    names = [
        name
        for name, resource in TEMPLATE["Resources"].items()
        if resource["Type"] in kinds | {"AWS::KMS::Key"}
    ]
    assert len(names) >= 10
    for name in names:
        assert parsed(name, "router" if name.startswith("ChangeTopic") else "pipe").statements


# --- the combination, as IAM's evaluation logic documents it --------------------------------------
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
CALLER = role("fn")


def queue_policy(*statements) -> Policy:
    return Policy.parse("queue", {"Statement": list(statements)}, resource_based=True)


def send(principal: Principal = CALLER) -> Request:
    return request(principal, "sqs:SendMessage", QUEUE)


ROLE_MAY_SEND = identity({"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE})


@pytest.mark.parametrize(
    "principal",
    [
        {"AWS": f"arn:aws:iam::{ACCOUNT}:role/fn"},
        {"AWS": f"arn:aws:sts::{ACCOUNT}:assumed-role/fn/session"},
        "*",
    ],
)
def test_same_account_an_allow_in_the_role_or_the_resource_policy_suffices(principal):
    allows = queue_policy({"Effect": "Allow", "Principal": principal, "Action": "sqs:*"})
    assert authorize(send(), CALLER, ROLE_MAY_SEND).allowed
    decision = authorize(send(), CALLER, [], allows)
    assert decision.allowed
    assert decision.grants == ("queue/#0",)
    assert not authorize(send(), CALLER, []).allowed


def test_a_resource_policy_naming_the_account_leaves_the_decision_to_iam():
    for account in (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root"):
        to_account = queue_policy(
            {"Effect": "Allow", "Principal": {"AWS": account}, "Action": "sqs:SendMessage"}
        )
        assert not authorize(send(), CALLER, [], to_account).allowed
        assert authorize(send(), CALLER, ROLE_MAY_SEND, to_account).allowed


def test_an_explicit_deny_in_a_resource_policy_beats_the_roles_allow():
    denies = queue_policy({"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage"})
    decision = authorize(send(), CALLER, ROLE_MAY_SEND, denies)
    assert not decision.allowed
    assert decision.denied_by == "queue/#0"
    assert decision.reason("sqs:SendMessage").startswith("with an explicit deny in a resource")


def test_an_explicit_deny_in_the_role_beats_the_resource_policys_allow():
    allows = queue_policy({"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage"})
    denies = identity({"Effect": "Deny", "Action": "sqs:*", "Resource": "*"})
    decision = authorize(send(), CALLER, denies, allows)
    assert not decision.allowed
    assert decision.denied_in == IDENTITY_BASED


def test_cross_account_needs_both_the_role_and_the_resource_policy():
    elsewhere = Principal.role_session("arn:aws:iam::210987654321:role/fn", "session")
    may_send = identity({"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE})
    to_caller = queue_policy(
        {"Effect": "Allow", "Principal": {"AWS": "210987654321"}, "Action": "sqs:SendMessage"}
    )
    made = send(elsewhere)
    assert authorize(made, elsewhere, may_send, to_caller, resource_account=ACCOUNT).allowed
    no_policy = authorize(made, elsewhere, may_send, None, resource_account=ACCOUNT)
    assert not no_policy.allowed
    assert no_policy.denied_in == RESOURCE_BASED
    no_role = authorize(made, elsewhere, [], to_caller, resource_account=ACCOUNT)
    assert not no_role.allowed
    assert no_role.denied_in == IDENTITY_BASED


def test_not_principal_applies_to_everyone_it_does_not_list():
    deny_others = queue_policy(
        {
            "Effect": "Deny",
            "NotPrincipal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/fn"},
            "Action": "sqs:SendMessage",
        }
    )
    assert authorize(send(), CALLER, ROLE_MAY_SEND, deny_others).allowed
    other = role("other")
    assert not authorize(send(other), other, ROLE_MAY_SEND, deny_others).allowed


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "sqs:*"},  # no Principal
        {"Effect": "Allow", "Principal": {"Federated": "cognito-identity.amazonaws.com"}},
        {"Effect": "Allow", "Principal": ["*"], "Action": "sqs:*"},
    ],
)
def test_a_resource_policy_the_evaluator_cannot_decide_is_refused_when_read(statement):
    with pytest.raises(PolicyError):
        queue_policy({"Action": "sqs:*", **statement})


# --- read back from moto, as the stack holds them -------------------------------------------------
def test_the_policies_moto_holds_are_the_ones_decided():
    with mock_aws():
        s3, sqs = boto3.client("s3", region_name=REGION), boto3.client("sqs", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_policy(
            Bucket=BUCKET, Policy=json.dumps(template_policy("ContactsBucketPolicy"))
        )
        url = sqs.create_queue(QueueName="LastAgentQueue")["QueueUrl"]
        document = json.dumps(template_policy("LastAgentQueuePolicy"))
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": document})

        bucket_policy, owner, key_policy = resource_policy(f"arn:aws:s3:::{BUCKET}/incoming/a")
        assert (owner, key_policy) == (ACCOUNT, False)
        assert [s.sid for s in bucket_policy.statements] == [
            "DenyOtherEncryption",
            "DenyOtherKeys",
            "DenyInsecureTransport",
        ]
        assert resource_policy(f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t")[0] is None

        queue = physical("LastAgentQueue")
        own_rule, other_rule = physical("LastAgentChangeRule"), physical("SurveyChangeRule")
        events = "events.amazonaws.com"
        given = {"source_account": ACCOUNT}
        assert service_may(events, "sqs:SendMessage", queue, source_arn=own_rule, **given)
        assert not service_may(events, "sqs:SendMessage", queue, source_arn=other_rule, **given)
        unpoliced = sqs.create_queue(QueueName="capture")["QueueUrl"].rsplit("/", 1)[1]
        unpoliced_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{unpoliced}"
        assert service_may(events, "sqs:SendMessage", unpoliced_arn, source_arn=other_rule, **given)


def test_a_kms_request_names_its_key_by_id_arn_alias_or_ciphertext():
    """A function's own KMS call is decided on the key it uses, with the key's policy."""
    with mock_aws():
        kms = boto3.client("kms", region_name=REGION)
        key = kms.create_key()["KeyMetadata"]
        kms.create_alias(AliasName="alias/exports", TargetKeyId=key["KeyId"])
        sealed = kms.encrypt(KeyId=key["KeyId"], Plaintext=b"x")["CiphertextBlob"]
        names = [
            key["KeyId"],
            key["Arn"],
            "alias/exports",
            f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/exports",
        ]
        for name in names:
            assert kms_key_arn(name, None, REGION, ACCOUNT) == key["Arn"], name
        ciphertext = base64.b64encode(sealed).decode()
        assert kms_key_arn(None, ciphertext, REGION, ACCOUNT) == key["Arn"]
        assert kms_key_arn("alias/none", None, REGION, ACCOUNT) == "*"
        assert kms_key_arn(None, "bm90IGEgY2lwaGVydGV4dA==", REGION, ACCOUNT) == "*"
        [policy, owner, is_key_policy] = resource_policy(key["Arn"])
        assert policy is not None and owner == ACCOUNT and is_key_policy
