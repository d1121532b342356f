"""CloudFormation (emulator/services/cloudformation.py), moto in process: an AWS::NoValue list
item left out."""

import pytest

from tests.unit.emulator.support import client

pytestmark = pytest.mark.usefixtures("moto_patched")


CONDITIONAL_POLICY_STACK = """
Parameters:
  Mode: {Type: String}
Conditions:
  Streams: !Equals [!Ref Mode, streams]
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Statement:
          - {Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: sts:AssumeRole}
      Policies:
        - PolicyName: Always
          PolicyDocument: {Statement: [{Effect: Allow, Action: sqs:SendMessage, Resource: "*"}]}
        - !If
          - Streams
          - PolicyName: StreamsOnly
            PolicyDocument:
              Statement: [{Effect: Allow, Action: dynamodb:GetRecords, Resource: "*"}]
          - !Ref AWS::NoValue
Outputs:
  RoleName: {Value: !Ref Role}
"""


@pytest.mark.parametrize(
    ("mode", "policies"), [("streams", ["Always", "StreamsOnly"]), ("queues", ["Always"])]
)
def test_cloudformation_leaves_a_no_value_list_item_out(moto_in_process, mode, policies):
    """`- !If [Cond, item, !Ref AWS::NoValue]` in a list: the item only where Cond holds, as
    CloudFormation does (moto kept a None in the list and failed the role)."""
    cfn = client("cloudformation")
    cfn.create_stack(
        StackName=f"nv-{mode}",
        TemplateBody=CONDITIONAL_POLICY_STACK,
        Parameters=[{"ParameterKey": "Mode", "ParameterValue": mode}],
    )
    stack = cfn.describe_stacks(StackName=f"nv-{mode}")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    role = stack["Outputs"][0]["OutputValue"]
    assert sorted(client("iam").list_role_policies(RoleName=role)["PolicyNames"]) == policies
