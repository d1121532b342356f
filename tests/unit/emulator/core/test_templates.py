from pathlib import Path

import pytest
import yaml
from samtranslator.yaml_helper import yaml_parse

from emulator.core.templates import parse_template

ROOT = Path(__file__).resolve().parents[4]


def test_short_intrinsic_tags_read_as_their_long_forms():
    body = """
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-q"
      Tags: !If [IsProd, [{Key: a, Value: !Ref Env}], !Ref AWS::NoValue]
      RedrivePolicy:
        deadLetterTargetArn: !GetAtt DeadLetters.Arn
      Policy: !Join ["", !Split [",", !Select [0, !GetAZs ""]]]
      Other: !GetAtt [DeadLetters, Arn]
"""
    properties = parse_template(body)["Resources"]["Queue"]["Properties"]
    assert properties == {
        "QueueName": {"Fn::Sub": "${AWS::StackName}-q"},
        "Tags": {
            "Fn::If": ["IsProd", [{"Key": "a", "Value": {"Ref": "Env"}}], {"Ref": "AWS::NoValue"}]
        },
        "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["DeadLetters", "Arn"]}},
        "Policy": {"Fn::Join": ["", {"Fn::Split": [",", {"Fn::Select": [0, {"Fn::GetAZs": ""}]}]}]},
        "Other": {"Fn::GetAtt": ["DeadLetters", "Arn"]},
    }


@pytest.mark.parametrize("template", ["template.yaml", "pipeline/bootstrap.yaml"])
def test_the_project_templates_read_as_samtranslator_reads_them(template):
    body = (ROOT / template).read_text()
    assert parse_template(body) == yaml_parse(body)


def test_a_json_body_is_read_and_a_broken_one_raises_a_yaml_error():
    assert parse_template('{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}') == {
        "Resources": {"T": {"Type": "AWS::SNS::Topic"}}
    }
    with pytest.raises(yaml.YAMLError):
        parse_template("Resources: [unclosed")
