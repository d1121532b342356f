"""`python -m emulator filter-test` (emulator.cli.filter_test.main): exit 0 match, 1 none, 2
error."""

import json
import subprocess
import sys

import pytest

from emulator.cli.filter_test import main
from tests.unit.emulator.support import ROOT

TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Queue:
    Type: AWS::SQS::Queue
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      StreamSpecification:
        StreamViewType: NEW_AND_OLD_IMAGES
  QueueFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      CodeUri: functions/queue
      Events:
        Messages:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
            FilterCriteria:
              Filters:
                - Pattern: '{"body": {"kind": ["SURVEY"]}}'
  StreamFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      CodeUri: functions/stream
      Events:
        Stream:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: LATEST
            FilterCriteria:
              Filters:
                - Pattern: >-
                    {"eventName": ["INSERT"],
                    "dynamodb": {"NewImage": {"disposition": {"S": ["ABANDONED"]}}}}
                - Pattern:
                    eventName: [INSERT]
                    dynamodb:
                      NewImage:
                        long_wait:
                          BOOL: [true]
  OpenFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      CodeUri: functions/open
      Events:
        Messages:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
  EsmFunction:
    Type: AWS::Lambda::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      Role: arn:aws:iam::123456789012:role/r
      Code: {ZipFile: "def lambda_handler(e, c): pass"}
  EsmMapping:
    Type: AWS::Lambda::EventSourceMapping
    Properties:
      FunctionName: !Ref EsmFunction
      EventSourceArn: !GetAtt Queue.Arn
      FilterCriteria:
        Filters:
          - Pattern: '{"body": {"n": [{"numeric": [">", 10]}]}}'
  ApiFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      CodeUri: functions/api
  BadFunction:
    Type: AWS::Serverless::Function
    Properties:
      Handler: app.lambda_handler
      Runtime: python3.13
      CodeUri: functions/bad
      Events:
        Messages:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
            FilterCriteria:
              Filters:
                - Pattern: '{"body": {"kind": "SURVEY"}}'
  ConsumerRule:
    Type: AWS::Events::Rule
    Properties:
      EventBusName: bus
      EventPattern:
        detail:
          dynamodb: {NewImage: {disposition: {S: [RESOLVED]}}}
      Targets: [{Id: q, Arn: !GetAtt Queue.Arn}]
  WildcardRule:
    Type: AWS::Events::Rule
    Properties:
      EventPattern: '{"source": [{"wildcard": "app*"}]}'
  KindSubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: arn:aws:sns:us-east-1:123456789012:topic
      Protocol: sqs
      Endpoint: !GetAtt Queue.Arn
      FilterPolicy: {kind: [SURVEY]}
  BodySubscription:
    Type: AWS::SNS::Subscription
    Properties:
      TopicArn: arn:aws:sns:us-east-1:123456789012:topic
      Protocol: sqs
      Endpoint: !GetAtt Queue.Arn
      FilterPolicyScope: MessageBody
      FilterPolicy: {wait_seconds: [{numeric: [">=", 600]}]}
"""


def sqs(body) -> dict:
    return {
        "messageId": "m-1",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:queue",
        "awsRegion": "us-east-1",
    }


def stream(event_name: str, disposition: str, long_wait: bool = False) -> dict:
    image = {"disposition": {"S": disposition}, "long_wait": {"BOOL": long_wait}}
    return {
        "eventID": "1",
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {"ApproximateCreationDateTime": 1764410400.0, "NewImage": image},
    }


@pytest.fixture
def files(tmp_path):
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE)

    def write(document) -> str:
        path = tmp_path / f"event{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(document))
        return str(path)

    write.template = str(template)
    return write


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --pattern


def test_pattern_match_exits_0(files, capsys):
    event = files(sqs({"kind": "SURVEY"}))
    code, out, _ = run(capsys, "--pattern", '{"body": {"kind": ["SURVEY"]}}', "--event", event)
    assert (code, out) == (0, "match\n")


def test_pattern_no_match_exits_1(files, capsys):
    event = files(sqs({"kind": "GIFT_CARD"}))
    code, out, _ = run(capsys, "--pattern", '{"body": {"kind": ["SURVEY"]}}', "--event", event)
    assert (code, out) == (1, "no match\n")


def test_full_event_reports_each_record_and_exits_0_if_any_matched(files, capsys):
    event = files({"Records": [sqs({"kind": "GIFT_CARD"}), sqs({"kind": "SURVEY"}), sqs("hi")]})
    code, out, _ = run(capsys, "--pattern", '{"body": {"kind": ["SURVEY"]}}', "--event", event)
    assert code == 0
    assert out.splitlines() == ["record 0: no match", "record 1: match", "record 2: no match"]


def test_full_event_with_no_matching_record_exits_1(files, capsys):
    event = files({"Records": [stream("MODIFY", "ABANDONED"), stream("REMOVE", "ABANDONED")]})
    code, out, _ = run(capsys, "--pattern", '{"eventName": ["INSERT"]}', "--event", event)
    assert code == 1
    assert out.splitlines() == ["record 0: no match", "record 1: no match"]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"eventName": "INSERT"}', "at $.eventName: must be an object or a list of match values"),
        ('{"a": [{"numeric": [">", "x"]}]}', "at $.a[0].numeric[1]"),
        ('{"a": [{"regex": "x"}]}', "unknown operator 'regex'"),
    ],
)
def test_invalid_pattern_exits_2_with_the_problem_on_stderr(files, capsys, pattern, message):
    code, out, err = run(capsys, "--pattern", pattern, "--event", files(sqs("x")))
    assert code == 2
    assert out == ""
    assert message in err


def test_source_flag_for_records_without_event_source(files, capsys):
    event = files({"body": json.dumps({"kind": "SURVEY"})})
    pattern = '{"body": {"kind": ["SURVEY"]}}'
    assert run(capsys, "--pattern", pattern, "--event", event)[0] == 1
    assert run(capsys, "--pattern", pattern, "--event", event, "--source", "sqs")[0] == 0


@pytest.mark.parametrize("content", ["not json", "[1, 2]", '{"Records": []}'])
def test_bad_event_file_exits_2(tmp_path, capsys, content):
    path = tmp_path / "event.json"
    path.write_text(content)
    code, _, err = run(capsys, "--pattern", '{"a": ["x"]}', "--event", str(path))
    assert code == 2
    assert "event file" in err


def test_missing_event_file_and_usage_errors_exit_2(tmp_path, capsys):
    code, _, err = run(capsys, "--pattern", '{"a": ["x"]}', "--event", str(tmp_path / "none.json"))
    assert code == 2
    assert "cannot read event file" in err
    assert (
        run(capsys, "--event", str(tmp_path / "e.json"))[0] == 2
    )  # neither --pattern nor --function
    assert run(capsys, "--pattern", "{}", "--function", "F", "--event", "e.json")[0] == 2


# --function (filters from the SAM template)


def test_function_sqs_filters(files, capsys):
    template = files.template
    event = files({"Records": [sqs({"kind": "SURVEY"}), sqs({"kind": "GIFT_CARD"}), sqs("SURVEY")]})
    code, out, _ = run(
        capsys, "--function", "QueueFunction", "--event", event, "--template", template
    )
    assert code == 0
    assert out.splitlines() == [
        "record 0: match (Messages)",
        "record 1: no match",
        "record 2: no match",  # plain-text body never matches a JSON body pattern
    ]


def test_function_stream_filters_are_ored_and_pattern_may_be_yaml(files, capsys):
    template = files.template
    event = files(
        {
            "Records": [
                stream("INSERT", "ABANDONED"),  # first filter (JSON string)
                stream("INSERT", "RESOLVED", long_wait=True),  # second filter (YAML mapping)
                stream("INSERT", "RESOLVED"),
                stream("MODIFY", "ABANDONED", long_wait=True),
            ]
        }
    )
    code, out, _ = run(
        capsys, "--function", "StreamFunction", "--event", event, "--template", template
    )
    assert code == 0
    assert out.splitlines() == [
        "record 0: match (Stream)",
        "record 1: match (Stream)",
        "record 2: no match",
        "record 3: no match",
    ]


def test_function_single_record_no_match_exits_1(files, capsys):
    event = files(stream("INSERT", "RESOLVED"))
    code, out, _ = run(
        capsys, "--function", "StreamFunction", "--event", event, "--template", files.template
    )
    assert (code, out) == (1, "no match\n")


def test_records_of_another_source_never_reach_a_mapping(files, capsys):
    event = files(stream("INSERT", "ABANDONED"))
    args = ("--event", event, "--template", files.template)
    assert run(capsys, "--function", "QueueFunction", *args)[0] == 1
    assert run(capsys, "--function", "OpenFunction", *args)[0] == 1


def test_event_source_without_filter_criteria_admits_everything(files, capsys):
    event = files(sqs("plain text"))
    code, out, _ = run(
        capsys, "--function", "OpenFunction", "--event", event, "--template", files.template
    )
    assert (code, out) == (0, "match (Messages)\n")


def test_plain_event_source_mapping_resources_are_found(files, capsys):
    args = ("--function", "EsmFunction", "--template", files.template, "--event")
    assert run(capsys, *args, files(sqs({"n": 11})))[:2] == (0, "match (EsmMapping)\n")
    assert run(capsys, *args, files(sqs({"n": "11"})))[0] == 1


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("NoSuchFunction", "unknown function 'NoSuchFunction'"),
        ("Queue", "unknown function 'Queue'"),
        ("ApiFunction", "has no SQS, DynamoDB or Kinesis event source"),
        ("BadFunction", "Events.Messages: invalid filter pattern at FilterCriteria.Filters[0]"),
    ],
)
def test_function_errors_exit_2(files, capsys, function, message):
    event = files(sqs({"kind": "SURVEY"}))
    code, out, err = run(
        capsys, "--function", function, "--event", event, "--template", files.template
    )
    assert code == 2
    assert out == ""
    assert message in err


def test_unknown_function_lists_the_functions(files, capsys):
    event = files(sqs("x"))
    _, _, err = run(capsys, "--function", "Nope", "--event", event, "--template", files.template)
    assert "QueueFunction" in err
    assert "StreamFunction" in err


def test_missing_template_exits_2(files, tmp_path, capsys):
    event = files(sqs("x"))
    missing = str(tmp_path / "nope.yaml")
    code, _, err = run(
        capsys, "--function", "QueueFunction", "--event", event, "--template", missing
    )
    assert code == 2
    assert "not found" in err


def test_runs_as_a_module(files):
    event = files(sqs({"kind": "SURVEY"}))
    pattern = '{"body": {"kind": ["SURVEY"]}}'
    done = subprocess.run(
        [sys.executable, "-m", "emulator.cli.filter_test", "--pattern", pattern, "--event", event],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "match\n")
    bad = subprocess.run(
        [sys.executable, "-m", "emulator.cli.filter_test", "--pattern", "[]", "--event", event],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "must be a JSON object" in bad.stderr


# --rule and --subscription


def bus_event(disposition: str) -> dict:
    return {
        "version": "0",
        "id": "e-1",
        "detail-type": "Event from aws:dynamodb",
        "source": "Pipe fanout",
        "account": "123456789012",
        "time": "2026-12-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": stream("INSERT", disposition),
    }


def test_rule_pattern_against_events(files, capsys):
    template = files.template
    code, out, _ = run(
        capsys, "--rule", "ConsumerRule", "--template", template, "--event",
        files([bus_event("RESOLVED"), bus_event("ABANDONED")]),
    )  # fmt: skip
    assert (code, out) == (0, "event 0: match\nevent 1: no match\n")
    event = files(bus_event("ABANDONED"))
    assert run(capsys, "--rule", "ConsumerRule", "--template", template, "--event", event)[0] == 1


def test_rule_with_an_unemulated_operator_or_unknown_rule_exits_2(files, capsys):
    event = files(bus_event("RESOLVED"))
    code, _, err = run(
        capsys, "--rule", "WildcardRule", "--template", files.template, "--event", event
    )
    assert code == 2
    assert "'wildcard' is valid on AWS but the local stack does not match it" in err
    code, _, err = run(capsys, "--rule", "Nope", "--template", files.template, "--event", event)
    assert code == 2
    assert "ConsumerRule, WildcardRule" in err


def test_subscription_policy_on_attributes_and_on_the_body(files, capsys):
    template = files.template
    survey = {
        "Message": {"kind": "SURVEY", "wait_seconds": 10},
        "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "SURVEY"}},
    }
    gift = {
        "Message": json.dumps({"kind": "GIFT_CARD", "wait_seconds": 900}),
        "MessageAttributes": {"kind": {"Type": "String", "Value": "GIFT_CARD"}},
    }
    args = ("--template", template, "--event", files([survey, gift]))
    assert run(capsys, "--subscription", "KindSubscription", *args)[1] == (
        "event 0: match\nevent 1: no match\n"
    )
    assert run(capsys, "--subscription", "BodySubscription", *args)[1] == (
        "event 0: no match\nevent 1: match\n"
    )
    plain = files({"Message": "not json"})
    code = run(
        capsys, "--subscription", "BodySubscription", "--template", template, "--event", plain
    )
    assert code[0] == 1
