"""Step Functions on the in-process local stack: StartSyncExecution of an Express machine run by
moto's interpreter (a Parallel state, a Map per branch, SQS sendMessage), and an EventBridge pipe
from a table's stream to such a machine: each record reaches each branch's queue; a machine with
a branch that cannot deliver fails the execution, so the pipe's batch goes to the pipe's DLQ."""

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
    inline_item_processor,
)
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

from emulator.services import stepfunctions
from emulator.services.stepfunctions import _copy_json
from tests.unit.emulator.support import delivering_stack

# One branch per queue: Pipes sends the machine the batch as an array, so each branch maps it.
DEFINITION = """
  {"StartAt": "Fan", "States": {"Fan": {"Type": "Parallel", "End": true, "Branches": [
    {"StartAt": "ToA", "States": {"ToA": {"Type": "Map", "End": true, "ItemProcessor": {
      "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "SendA", "States": {"SendA": {
        "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": true,
        "Parameters": {"QueueUrl": "${A}", "MessageBody.$": "States.JsonToString($)"}}}}}}},
    {"StartAt": "ToB", "States": {"ToB": {"Type": "Map", "End": true, "ItemProcessor": {
      "ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "SendB", "States": {"SendB": {
        "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": true,
        "Parameters": {"QueueUrl": "${B}", "MessageBody.$": "States.JsonToString($)"}}}}}}}
  ]}}}
"""

TEMPLATE = f"""
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{{AttributeName: pk, AttributeType: S}}]
      KeySchema: [{{AttributeName: pk, KeyType: HASH}}]
      StreamSpecification: {{StreamViewType: NEW_AND_OLD_IMAGES}}
  QueueA:
    Type: AWS::SQS::Queue
  QueueB:
    Type: AWS::SQS::Queue
  MachineRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {{Version: "2012-10-17", Statement: []}}
      Policies:
        - PolicyName: deliver
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Effect: Allow
                Action: sqs:SendMessage
                Resource: "*"
  Machine:
    Type: AWS::StepFunctions::StateMachine
    Properties:
      StateMachineType: EXPRESS
      RoleArn: !GetAtt MachineRole.Arn
      DefinitionString: !Sub
        - '{DEFINITION.strip()}'
        - {{A: !Ref QueueA, B: !Ref QueueB}}
  # its second branch sends to a queue that does not exist
  BrokenMachine:
    Type: AWS::StepFunctions::StateMachine
    Properties:
      StateMachineType: EXPRESS
      RoleArn: !GetAtt MachineRole.Arn
      DefinitionString: !Sub
        - '{DEFINITION.strip()}'
        - {{A: !Ref QueueA, B: !Sub "${{QueueA}}-missing"}}
  StandardMachine:
    Type: AWS::StepFunctions::StateMachine
    Properties:
      RoleArn: !GetAtt MachineRole.Arn
      DefinitionString: '{{"StartAt": "P", "States": {{"P": {{"Type": "Pass", "End": true}}}}}}'
  PipeRole:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {{Version: "2012-10-17", Statement: []}}
      Policies:
        - PolicyName: deliver
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Effect: Allow
                Action: states:StartSyncExecution
                Resource: [!Ref Machine, !Ref BrokenMachine]
  PipeDeadLetterQueue:
    Type: AWS::SQS::Queue
  Pipe:
    Type: AWS::Pipes::Pipe
    Properties:
      RoleArn: !GetAtt PipeRole.Arn
      Source: !GetAtt Table.StreamArn
      SourceParameters:
        DynamoDBStreamParameters: {{StartingPosition: LATEST, BatchSize: 10}}
        FilterCriteria:
          Filters: [{{Pattern: '{{"dynamodb": {{"NewImage": {{"kind": {{"S": ["good"]}}}}}}}}'}}]
      Target: !Ref Machine
      TargetParameters:
        StepFunctionStateMachineParameters: {{InvocationType: REQUEST_RESPONSE}}
  BrokenPipe:
    Type: AWS::Pipes::Pipe
    Properties:
      RoleArn: !GetAtt PipeRole.Arn
      Source: !GetAtt Table.StreamArn
      SourceParameters:
        DynamoDBStreamParameters:
          StartingPosition: LATEST
          BatchSize: 10
          MaximumRetryAttempts: 1
          DeadLetterConfig: {{Arn: !GetAtt PipeDeadLetterQueue.Arn}}
        FilterCriteria:
          Filters: [{{Pattern: '{{"dynamodb": {{"NewImage": {{"kind": {{"S": ["broken"]}}}}}}}}'}}]
      Target: !Ref BrokenMachine
Outputs:
  TableName: {{Value: !Ref Table}}
  QueueA: {{Value: !Ref QueueA}}
  QueueB: {{Value: !Ref QueueB}}
  Machine: {{Value: !Ref Machine}}
  BrokenMachine: {{Value: !Ref BrokenMachine}}
  StandardMachine: {{Value: !Ref StandardMachine}}
  PipeRoleArn: {{Value: !GetAtt PipeRole.Arn}}
  MachineRoleName: {{Value: !Ref MachineRole}}
  QueueBArn: {{Value: !GetAtt QueueB.Arn}}
  StreamArn: {{Value: !GetAtt Table.StreamArn}}
  BrokenPipeArn: {{Value: !GetAtt BrokenPipe.Arn}}
  PipeDeadLetterQueue: {{Value: !Ref PipeDeadLetterQueue}}
"""


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    with delivering_stack(TEMPLATE, tmp_path_factory.mktemp("stepfunctions")) as stack:
        yield stack


def bodies(local, output):
    """The JSON bodies of every message in the queue now, received and deleted."""
    return [json.loads(message["Body"]) for message in local.drain(output)]


def test_start_sync_execution_runs_every_branch_over_each_item(local):
    items = [{"id": 1}, {"id": 2}]
    answer = local.client("stepfunctions").start_sync_execution(
        stateMachineArn=local.outputs["Machine"], input=json.dumps(items)
    )
    assert answer["status"] == "SUCCEEDED"
    assert ":express:" in answer["executionArn"]
    assert len(json.loads(answer["output"])) == 2  # one result per branch
    assert sorted(b["id"] for b in bodies(local, "QueueA")) == [1, 2]
    assert sorted(b["id"] for b in bodies(local, "QueueB")) == [1, 2]


def mapped_regions() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def test_executions_leave_no_thread_stacks_behind(local):
    """moto's interpreter keeps every thread it starts (a branch, a Map iteration): kept, each
    ended thread's stack stayed mapped, ~25 per execution of this machine, until the process could
    map no more (MemoryError, "can't start new thread") under P5's load in mode pipe-sfn."""
    before = mapped_regions()
    for n in range(40):
        answer = local.client("stepfunctions").start_sync_execution(
            stateMachineArn=local.outputs["Machine"],
            input=json.dumps([{"execution": n, "item": i} for i in range(10)]),
        )
        assert answer["status"] == "SUCCEEDED"
    assert mapped_regions() - before < 200  # leaked: over 2,000 (a stack and its guard page each)
    for queue in ("QueueA", "QueueB"):
        sent = [(b["execution"], b["item"]) for b in bodies(local, queue) if "execution" in b]
        assert sorted(sent) == [(n, i) for n in range(40) for i in range(10)]


def test_a_map_of_100_items_runs_on_40_workers_and_sends_each(local, monkeypatch):
    """An inline Map runs up to 40 iterations at once, as Step Functions does: moto started a
    worker (a thread) per item; now 40 take the items in turn, and every item is still sent."""
    workers: Counter[str] = Counter()  # per Map state
    processor = inline_item_processor.InlineItemProcessor
    create = processor._create_worker

    def counted(self, env, eval_input, job_pool):
        workers[eval_input.state_name] += 1
        return create(self, env, eval_input, job_pool)

    monkeypatch.setattr(processor, "_create_worker", counted)
    answer = local.client("stepfunctions").start_sync_execution(
        stateMachineArn=local.outputs["Machine"],
        input=json.dumps([{"wide": i} for i in range(100)]),
    )
    assert answer["status"] == "SUCCEEDED"
    assert workers == {"ToA": 40, "ToB": 40}
    for queue in ("QueueA", "QueueB"):
        assert sorted(b["wide"] for b in bodies(local, queue)) == list(range(100))


def create_machine(local, definition: dict) -> str:
    """A new Express machine of this definition, with the machines' role: its ARN."""
    role = local.client("iam").get_role(RoleName=local.outputs["MachineRoleName"])["Role"]["Arn"]
    return local.client("stepfunctions").create_state_machine(
        name=f"machine-{time.monotonic_ns()}",
        definition=json.dumps(definition),
        roleArn=role,
        type="EXPRESS",
    )["stateMachineArn"]


def run_for_seconds(local, definition: dict) -> tuple[dict, float]:
    """An Express machine of this definition, run once: its answer and how long it took."""
    machine = create_machine(local, definition)
    began = time.monotonic()
    answer = local.client("stepfunctions").start_sync_execution(stateMachineArn=machine, input="{}")
    return answer, time.monotonic() - began


# Work without a timeout runs in the thread that waits for it; with one, it still ends at its
# timeout, not when the work ends.
def test_a_task_past_its_timeout_seconds_fails_with_states_timeout(local, monkeypatch):
    send = stepfunctions._QueuesInProcess.send_message
    released, landed = threading.Event(), threading.Event()

    def slow_send(self, *args, **params):
        released.wait(10)  # held past the timeout, until the test has the answer
        try:
            return send(self, *args, **params)
        finally:
            landed.set()

    monkeypatch.setattr(stepfunctions._QueuesInProcess, "send_message", slow_send)
    answer, seconds = run_for_seconds(
        local,
        {"StartAt": "Send", "States": {"Send": {
            "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "TimeoutSeconds": 1,
            "End": True, "Parameters": {"QueueUrl": local.outputs["QueueA"], "MessageBody": "{}"},
        }}},
    )  # fmt: skip
    released.set()
    assert seconds < 2.5
    assert (answer["status"], answer["error"]) == ("FAILED", "States.Timeout")
    assert landed.wait(10)  # the late send, drained before the next test reads QueueA
    bodies(local, "QueueA")


def test_a_machine_past_its_timeout_seconds_times_out(local):
    answer, seconds = run_for_seconds(
        local,
        {"TimeoutSeconds": 1, "StartAt": "W",
         "States": {"W": {"Type": "Wait", "Seconds": 3, "End": True}}},
    )  # fmt: skip
    assert seconds < 2.5
    assert answer["status"] == "TIMED_OUT"


def test_executions_of_one_definition_parse_it_once_and_each_sends_its_own(local, monkeypatch):
    parses = []
    parse = AmazonStateLanguageParser.parse

    def counted(definition):
        parses.append(definition)
        return parse(definition)

    monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(counted))
    queue = local.outputs["QueueA"]
    machine = create_machine(
        local,
        {"StartAt": "Send", "States": {"Send": {
            "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": True,
            "Parameters": {"QueueUrl": queue, "MessageBody.$": "States.JsonToString($)"},
        }}},
    )  # fmt: skip
    parses.clear()  # CreateStateMachine's check parsed it too
    sfn = local.client("stepfunctions")
    for n in range(3):
        answer = sfn.start_sync_execution(stateMachineArn=machine, input=json.dumps({"run": n}))
        assert answer["status"] == "SUCCEEDED"
    assert len(parses) == 1
    assert sorted(b["run"] for b in bodies(local, "QueueA")) == [0, 1, 2]


def test_executions_at_once_each_retry_a_failing_task_as_often_as_its_retrier_says(
    local, monkeypatch
):
    """Two executions of one kept program, their first attempts at once: each counts its own
    attempts (in its own heap, under the retrier's key in the shared program)."""
    send = stepfunctions._QueuesInProcess.send_message
    attempts: Counter[str] = Counter()
    both_started = threading.Barrier(2, timeout=10)

    def counted(self, QueueUrl, MessageBody, **params):
        run = json.loads(MessageBody)["run"]
        attempts[run] += 1
        if attempts[run] == 1:
            both_started.wait()  # the two first attempts at once
        return send(self, QueueUrl, MessageBody, **params)

    monkeypatch.setattr(stepfunctions._QueuesInProcess, "send_message", counted)
    machine = create_machine(
        local,
        {"StartAt": "Send", "States": {"Send": {
            "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "End": True,
            "Parameters": {"QueueUrl": f"{local.outputs['QueueA']}-missing",
                           "MessageBody.$": "States.JsonToString($)"},
            "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 2, "IntervalSeconds": 1,
                       "BackoffRate": 1}],
        }}},
    )  # fmt: skip
    answers = {}

    def run(n):
        answers[n] = local.client("stepfunctions").start_sync_execution(
            stateMachineArn=machine, input=json.dumps({"run": n})
        )

    runs = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(30)
    assert {n: answer["status"] for n, answer in answers.items()} == {"a": "FAILED", "b": "FAILED"}
    assert attempts == {"a": 3, "b": 3}  # the first and two retries each


def test_a_branch_that_cannot_deliver_fails_the_execution_with_its_error(local):
    answer = local.client("stepfunctions").start_sync_execution(
        stateMachineArn=local.outputs["BrokenMachine"], input=json.dumps([{"id": 3}])
    )
    assert answer["status"] == "FAILED"
    assert answer["error"] == "SQS.SdkClientException"
    assert "does not exist" in answer["cause"]
    assert "output" not in answer
    bodies(local, "QueueA")  # the other branch may have sent before the failure


def test_a_failed_execution_counts_in_the_machines_executions_failed(local):
    """ChangeMachineFailuresAlarm's metric: AWS/States ExecutionsFailed per StateMachineArn."""
    machine = local.outputs["BrokenMachine"]

    def failed() -> float:
        stats = local.client("cloudwatch").get_metric_statistics(
            Namespace="AWS/States",
            MetricName="ExecutionsFailed",
            Dimensions=[{"Name": "StateMachineArn", "Value": machine}],
            StartTime=datetime.now(UTC) - timedelta(minutes=10),
            EndTime=datetime.now(UTC) + timedelta(minutes=1),
            Period=60,
            Statistics=["Sum"],
        )
        return sum(point["Sum"] for point in stats["Datapoints"])

    before = failed()
    local.client("stepfunctions").start_sync_execution(
        stateMachineArn=machine, input=json.dumps([{"id": 5}])
    )
    assert failed() == before + 1
    bodies(local, "QueueA")  # the other branch may have sent before the failure


def test_a_send_the_machines_role_may_not_make_fails_the_execution(local):
    iam = local.client("iam")
    role = local.outputs["MachineRoleName"]
    withheld = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": local.outputs["QueueBArn"]}
        ],
    }
    iam.put_role_policy(RoleName=role, PolicyName="withhold", PolicyDocument=json.dumps(withheld))
    try:
        answer = local.client("stepfunctions").start_sync_execution(
            stateMachineArn=local.outputs["Machine"], input=json.dumps([{"id": 4}])
        )
    finally:
        iam.delete_role_policy(RoleName=role, PolicyName="withhold")
    assert answer["status"] == "FAILED"
    assert "sqs:SendMessage" in answer["cause"]
    assert bodies(local, "QueueB") == []
    bodies(local, "QueueA")  # the permitted branch may have sent before the failure


def test_start_sync_execution_refuses_a_standard_machine_and_input_that_is_not_json(local):
    sfn = local.client("stepfunctions")
    with pytest.raises(ClientError) as standard:
        sfn.start_sync_execution(stateMachineArn=local.outputs["StandardMachine"], input="[]")
    assert standard.value.response["Error"]["Code"] == "StateMachineTypeNotSupported"
    with pytest.raises(ClientError) as not_json:
        sfn.start_sync_execution(stateMachineArn=local.outputs["Machine"], input="{nope")
    assert not_json.value.response["Error"]["Code"] == "InvalidExecutionInput"


def test_a_pipe_to_the_machine_puts_each_record_on_each_branchs_queue(local):
    dynamodb = local.client("dynamodb")
    for pk in ("1", "2"):
        dynamodb.put_item(
            TableName=local.outputs["TableName"], Item={"pk": {"S": pk}, "kind": {"S": "good"}}
        )
    local.settle()
    for queue in ("QueueA", "QueueB"):
        records = bodies(local, queue)
        assert sorted(r["dynamodb"]["Keys"]["pk"]["S"] for r in records) == ["1", "2"]
        assert {r["eventName"] for r in records} == {"INSERT"}
        assert {r["eventSourceARN"] for r in records} == {local.outputs["StreamArn"]}
    assert bodies(local, "PipeDeadLetterQueue") == []


def test_a_batch_whose_execution_fails_goes_to_the_pipes_dead_letter_queue(local):
    local.client("dynamodb").put_item(
        TableName=local.outputs["TableName"], Item={"pk": {"S": "9"}, "kind": {"S": "broken"}}
    )
    local.settle()
    (dead,) = bodies(local, "PipeDeadLetterQueue")
    assert dead["requestContext"]["functionArn"] == local.outputs["BrokenPipeArn"]
    assert dead["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert dead["requestContext"]["approximateInvokeCount"] == 2  # MaximumRetryAttempts 1
    assert dead["DDBStreamBatchInfo"]["batchSize"] == 1
    assert bodies(local, "QueueB") == []
    bodies(local, "QueueA")  # the working branch sent on each attempt: at-least-once


@pytest.mark.parametrize(
    ("machine", "parameters", "message"),
    [
        ("StandardMachine", None, "REQUEST_RESPONSE is not supported for STANDARD"),
        (
            "Machine",
            {"StepFunctionStateMachineParameters": {"InvocationType": "FIRE_AND_FORGET"}},
            "FIRE_AND_FORGET is not emulated",
        ),
        (
            "Machine",
            {"EventBridgeEventBusParameters": {"Source": "x"}},
            "does not apply to an states target",
        ),
    ],
)
def test_a_pipe_pipes_would_refuse_is_refused(local, machine, parameters, message):
    arguments = {
        "Name": "refused",
        "RoleArn": local.outputs["PipeRoleArn"],
        "Source": local.outputs["StreamArn"],
        "SourceParameters": {"DynamoDBStreamParameters": {"StartingPosition": "LATEST"}},
        "Target": local.outputs[machine],
    }
    if parameters:
        arguments["TargetParameters"] = parameters
    with pytest.raises(ClientError) as refused:
        local.client("pipes").create_pipe(**arguments)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert message in refused.value.response["Error"]["Message"]


def test_the_interpreters_copies_are_independent_of_their_source():
    """The JSON-walking copy the interpreter's modules get: a change to the copy or the source
    never shows in the other; a value that is not JSON is deep-copied as before."""
    when = datetime.now(UTC)
    source = {"records": [{"keys": {"pk": "1"}, "n": 1.5, "ok": True, "none": None}], "at": when}
    copied = _copy_json(source)
    assert copied == source
    copied["records"][0]["keys"]["pk"] = "2"
    source["records"].append({})
    assert source["records"][0]["keys"]["pk"] == "1"
    assert len(copied["records"]) == 1
    assert copied["at"] == when


PASS_END = {"Type": "Pass", "End": True}


@pytest.mark.parametrize(
    ("definition", "code", "where"),
    [
        ("not json", "INVALID_JSON_DESCRIPTION", ""),
        (json.dumps({"StartAt": "A", "States": {}}), "SCHEMA_VALIDATION_FAILED", " at /'"),
        (
            json.dumps({"StartAt": "B", "States": {"A": PASS_END}}),
            "MISSING_TRANSITION_TARGET",
            " at /StartAt'",
        ),
        (
            json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass"}}}),
            "SCHEMA_VALIDATION_FAILED",
            " at /States/A'",
        ),
        (
            json.dumps({"StartAt": "A", "States": {"A": {"Type": "Bogus", "End": True}}}),
            "SCHEMA_VALIDATION_FAILED",
            " at /States/A'",
        ),
        (
            json.dumps(
                {
                    "StartAt": "A",
                    "States": {
                        "A": {
                            "Type": "Parallel",
                            "End": True,
                            "Branches": [{"StartAt": "X", "States": {"Y": {"Type": "Succeed"}}}],
                        }
                    },
                }
            ),
            "MISSING_TRANSITION_TARGET",
            " at /States/A/Branches[0]/StartAt'",
        ),
        (
            json.dumps({"StartAt": "A", "States": {"A": {**PASS_END, "Unknown": 1}}}),
            "SCHEMA_VALIDATION_FAILED",
            "",
        ),
    ],
)
def test_a_definition_step_functions_refuses_is_refused_at_create_and_update(
    local, definition, code, where
):
    """moto stores any definition; Step Functions refuses these with InvalidDefinition."""
    sfn = local.client("stepfunctions")
    role = f"arn:aws:iam::123456789012:role/{local.outputs['MachineRoleName']}"
    with pytest.raises(ClientError) as created:
        sfn.create_state_machine(name="refused", definition=definition, roleArn=role)
    error = created.value.response["Error"]
    assert error["Code"] == "InvalidDefinition"
    assert error["Message"].startswith(f"Invalid State Machine Definition: '{code}: ")
    assert error["Message"].endswith(where) or not where
    with pytest.raises(ClientError) as updated:
        sfn.update_state_machine(stateMachineArn=local.outputs["Machine"], definition=definition)
    assert updated.value.response["Error"]["Code"] == "InvalidDefinition"
    names = [m["name"] for m in sfn.list_state_machines()["stateMachines"]]
    assert "refused" not in names
