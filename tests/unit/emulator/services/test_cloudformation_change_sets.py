"""CloudFormation as `sam deploy` drives it (emulator/services/cloudformation.py), moto in
process: a change set from a TemplateURL in the stack's own S3, the SAM transform expanded, Rules
and Capabilities checked, executed with events, the resources listed complete, an update that
keeps what did not change, GetTemplate's stages, a delete."""

import io
import json
import zipfile

import pytest
from botocore.exceptions import ClientError

from tests.unit.emulator.support import client

pytestmark = pytest.mark.usefixtures("moto_patched")

BUCKET = "artifacts"
SAM_TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage: {Type: String, Default: local, AllowedValues: [local, test, prod]}
  AlarmEmail: {Type: String, Default: ""}
Rules:
  ProdHasAlarmEmail:
    RuleCondition: !Equals [!Ref Stage, prod]
    Assertions:
      - Assert: !Not [!Equals [!Ref AlarmEmail, ""]]
        AssertDescription: Stage=prod needs AlarmEmail.
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
Resources:
  Shared:
    Type: AWS::Serverless::LayerVersion
    Properties: {ContentUri: s3://artifacts/layer.zip}
  Work:
    Type: AWS::SQS::Queue
  WorkPolicy:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [!Ref Work]
      PolicyDocument: {Statement: [{Effect: Deny, Principal: "*", Action: "sqs:*", Resource: "*"}]}
  ProdOnly:
    Type: AWS::SQS::Queue
    Condition: IsProd
  Handler:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://artifacts/code.zip
      Handler: app.handler
      Runtime: python3.13
      Layers: [!Ref Shared]
      Environment: {Variables: {QUEUE_URL: !Ref Work, STAGE: !Ref Stage}}
Outputs:
  WorkUrl: {Value: !Ref Work}
"""


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()


@pytest.fixture
def s3(moto_in_process):
    s3 = client("s3")
    s3.create_bucket(Bucket=BUCKET)
    for key in ("code.zip", "layer.zip"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=_zip())
    return s3


def _change_set(cfn, stack: str, kind: str = "CREATE", **request):
    request.setdefault("Capabilities", ["CAPABILITY_IAM"])
    created = cfn.create_change_set(
        StackName=stack, ChangeSetName=f"samcli-deploy-{kind.lower()}", ChangeSetType=kind,
        **request,
    )  # fmt: skip
    return cfn.describe_change_set(ChangeSetName=created["Id"], StackName=stack)


def _deploy(cfn, stack: str, kind: str = "CREATE", **request) -> dict:
    change_set = _change_set(cfn, stack, kind, **request)
    assert change_set["Status"] == "CREATE_COMPLETE", change_set.get("StatusReason")
    cfn.execute_change_set(ChangeSetName=change_set["ChangeSetId"], StackName=stack)
    return change_set


def test_a_change_set_reads_its_template_url_from_the_local_stacks_s3(s3):
    """What `sam deploy` sends: a path-style URL on the endpoint (moto read bucket '127')."""
    s3.put_object(Bucket=BUCKET, Key="stack/abc.template", Body=SAM_TEMPLATE.encode())
    cfn = client("cloudformation")

    change_set = _deploy(
        cfn, "url", TemplateURL=f"http://127.0.0.1:4566/{BUCKET}/stack/abc.template"
    )

    added = {c["ResourceChange"]["LogicalResourceId"] for c in change_set["Changes"]}
    assert {"Handler", "HandlerRole", "Work", "WorkPolicy"} <= added
    stack = cfn.describe_stacks(StackName="url")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack["Outputs"][0]["OutputValue"] in client("sqs").list_queues()["QueueUrls"]


def test_the_serverless_transform_is_expanded_and_its_function_created(s3):
    cfn = client("cloudformation")
    _deploy(cfn, "sam", TemplateBody=SAM_TEMPLATE)

    resources = cfn.describe_stack_resources(StackName="sam")["StackResources"]
    by_id = {r["LogicalResourceId"]: r for r in resources}
    function = client("lambda").get_function(FunctionName=by_id["Handler"]["PhysicalResourceId"])
    assert function["Configuration"]["Handler"] == "app.handler"
    assert by_id["HandlerRole"]["ResourceType"] == "AWS::IAM::Role"
    events = cfn.describe_stack_events(StackName="sam")["StackEvents"]
    assert events[0]["ResourceStatus"] == "CREATE_COMPLETE"
    assert events[0]["LogicalResourceId"] == "sam"
    assert "Handler" in {e["LogicalResourceId"] for e in events}


def test_every_resource_is_listed_with_its_ids_and_type_and_false_conditions_are_not(s3):
    """moto listed None entries (no LogicalResourceId, ResourceType, PhysicalResourceId) for
    what its model map lacks or a false Condition left out."""
    cfn = client("cloudformation")
    _deploy(cfn, "listed", TemplateBody=SAM_TEMPLATE)

    described = cfn.describe_stack_resources(StackName="listed")["StackResources"]
    summaries = cfn.list_stack_resources(StackName="listed")["StackResourceSummaries"]

    for entries in (described, summaries):
        ids = {r["LogicalResourceId"] for r in entries}
        assert "ProdOnly" not in ids
        assert {"Work", "WorkPolicy", "Handler", "HandlerRole"} <= ids
        assert any(i.startswith("Shared") for i in ids)  # the layer, named by its content
        assert all(r["PhysicalResourceId"] and r["ResourceType"] for r in entries)
        assert all(r["ResourceStatus"] == "CREATE_COMPLETE" for r in entries)


def test_without_the_iam_capability_the_change_set_is_refused(s3):
    cfn = client("cloudformation")
    with pytest.raises(ClientError) as refused:
        _change_set(cfn, "nocap", TemplateBody=SAM_TEMPLATE, Capabilities=[])
    assert refused.value.response["Error"]["Code"] == "InsufficientCapabilitiesException"
    assert refused.value.response["Error"]["Message"] == "Requires capabilities : [CAPABILITY_IAM]"


def test_a_parameter_outside_its_allowed_values_refuses_and_leaves_no_stack(s3):
    """`sam deploy --parameter-overrides Stage=staging`: CloudFormation's ValidationError."""
    cfn = client("cloudformation")
    with pytest.raises(ClientError) as refused:
        _change_set(
            cfn, "staging", TemplateBody=SAM_TEMPLATE,
            Parameters=[{"ParameterKey": "Stage", "ParameterValue": "staging"}],
        )  # fmt: skip
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert refused.value.response["Error"]["Message"] == (
        "Parameter 'Stage' must be one of AllowedValues"
    )
    with pytest.raises(ClientError, match="Stack with id staging does not exist"):
        cfn.describe_stacks(StackName="staging")


def test_a_failed_rule_refuses_with_its_assert_description_and_leaves_no_stack(s3):
    cfn = client("cloudformation")
    with pytest.raises(ClientError) as refused:
        _change_set(
            cfn, "prod", TemplateBody=SAM_TEMPLATE,
            Parameters=[{"ParameterKey": "Stage", "ParameterValue": "prod"}],
        )  # fmt: skip
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert refused.value.response["Error"]["Message"] == "Stage=prod needs AlarmEmail."
    with pytest.raises(ClientError, match="Stack with id prod does not exist"):
        cfn.describe_stacks(StackName="prod")

    prod = [
        {"ParameterKey": "Stage", "ParameterValue": "prod"},
        {"ParameterKey": "AlarmEmail", "ParameterValue": "oncall@example.com"},
    ]
    _deploy(cfn, "prod", TemplateBody=SAM_TEMPLATE, Parameters=prod)
    ids = {
        r["LogicalResourceId"]
        for r in cfn.describe_stack_resources(StackName="prod")["StackResources"]
    }
    assert "ProdOnly" in ids


def test_an_update_adds_what_is_new_and_keeps_the_rest(s3):
    cfn = client("cloudformation")
    _deploy(cfn, "upd", TemplateBody=SAM_TEMPLATE)
    before = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.describe_stack_resources(StackName="upd")["StackResources"]
    }
    changed = SAM_TEMPLATE.replace(
        "Resources:\n", "Resources:\n  Added:\n    Type: AWS::SQS::Queue\n", 1
    )

    # what `sam deploy` sends for the parameters it does not override
    previous = [{"ParameterKey": k, "UsePreviousValue": True} for k in ("Stage", "AlarmEmail")]

    change_set = _deploy(cfn, "upd", "UPDATE", TemplateBody=changed, Parameters=previous)

    assert [
        (c["ResourceChange"]["Action"], c["ResourceChange"]["LogicalResourceId"])
        for c in change_set["Changes"]
    ] == [("Add", "Added")]
    stack = cfn.describe_stacks(StackName="upd")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    after = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.describe_stack_resources(StackName="upd")["StackResources"]
    }
    assert {k: after[k] for k in before} == before
    assert "Added" in after

    unchanged = _change_set(cfn, "upd", "UPDATE", TemplateBody=changed)
    assert unchanged["Status"] == "FAILED"
    assert "The submitted information didn't contain changes." in unchanged["StatusReason"]


def test_get_template_gives_the_submitted_and_the_processed_template(s3):
    cfn = client("cloudformation")
    _deploy(cfn, "tpl", TemplateBody=SAM_TEMPLATE)

    original = cfn.get_template(StackName="tpl", TemplateStage="Original")["TemplateBody"]
    processed = cfn.get_template(StackName="tpl", TemplateStage="Processed")["TemplateBody"]

    assert original == SAM_TEMPLATE
    processed = processed if isinstance(processed, dict) else json.loads(processed)
    assert processed["Resources"]["Handler"]["Type"] == "AWS::Lambda::Function"


def test_delete_stack_deletes_a_subscription_whose_topic_went_first(moto_in_process):
    cfn = client("cloudformation")
    template = """
Resources:
  Topic: {Type: AWS::SNS::Topic}
  Queue: {Type: AWS::SQS::Queue}
  Subscription:
    Type: AWS::SNS::Subscription
    Properties: {TopicArn: !Ref Topic, Protocol: sqs, Endpoint: !GetAtt Queue.Arn}
"""
    _deploy(cfn, "del", TemplateBody=template, Capabilities=[])

    cfn.delete_stack(StackName="del")

    with pytest.raises(ClientError, match="Stack with id del does not exist"):
        cfn.describe_stacks(StackName="del")
    assert client("sns").list_topics()["Topics"] == []
