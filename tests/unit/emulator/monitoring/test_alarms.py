"""Alarms on the local stack (emulator/monitoring/alarms.py): the state machine (M of N, each
missing-data treatment), and a stack's alarm from CloudFormation evaluated against the queue
metrics, its transitions in DescribeAlarms / DescribeAlarmHistory and its actions on the topic."""

import json
from datetime import timedelta

import pytest
from cfnlint.decode import cfn_yaml
from moto.core.utils import utcnow

from emulator.delivery.mappings import BatchOutcome, MappingConfig, report_stream_invocation
from emulator.monitoring.alarms import ALARM, INSUFFICIENT_DATA, OK, Rule, decide
from emulator.monitoring.monitor import Monitor
from emulator.process import ACCOUNT, REGION
from emulator.services import cloudwatch
from harness import ROOT
from harness.polling import eventually
from tests.unit.emulator.support import client, drained, new_queue, stream_consumer

X, N, _ = 5.0, 0.0, None  # breaching, not breaching (threshold 1, greater than), missing


def rule(m: int, n: int, missing: str = "missing") -> Rule:
    return Rule("GreaterThanThreshold", 1.0, n, m, missing)


@pytest.mark.parametrize(
    ("datapoints", "m", "expected"),
    [
        ([X], 1, ALARM),
        ([N], 1, OK),
        ([X, N, X], 2, ALARM),  # 2 of 3
        ([X, N, N], 2, OK),
        ([N, X, X, N, X], 3, ALARM),  # breaches need not be consecutive
    ],
)
def test_m_of_n_breaching_datapoints_set_alarm(datapoints, m, expected):
    assert decide(rule(m, len(datapoints)), datapoints, OK).state == expected


@pytest.mark.parametrize(
    ("datapoints", "missing", "current", "expected"),
    [
        # every period without data
        ([_, _, _], "missing", OK, INSUFFICIENT_DATA),
        ([_, _, _], "ignore", ALARM, ALARM),
        ([_, _, _], "breaching", OK, ALARM),
        ([_, _, _], "notBreaching", ALARM, OK),
        # some: what is there decides; fewer than M all breaching is ALARM (missing) or kept
        ([N, _, X], "missing", ALARM, OK),
        ([_, X, _], "missing", OK, ALARM),
        ([_, X, _], "ignore", OK, OK),
        ([_, X, _], "breaching", OK, ALARM),
        ([_, X, _], "notBreaching", ALARM, OK),
        ([X, X, _], "notBreaching", OK, OK),
        ([X, X, _], "breaching", OK, ALARM),
    ],
)
def test_missing_data_is_treated_as_configured(datapoints, missing, current, expected):
    assert decide(rule(3, 3, missing), datapoints, current).state == expected


def test_the_reason_says_what_crossed():
    reason = decide(rule(1, 1), [X], OK).reason
    assert reason.startswith("Threshold Crossed: 1 out of the last 1 datapoints [5.0] was greater")
    treated = decide(rule(1, 1, "notBreaching"), [_], ALARM).reason
    assert "1 missing datapoint was treated as [NonBreaching]" in treated


STACK = """
Resources:
  DeadLetterQueue: {Type: AWS::SQS::Queue}
  AlarmTopic: {Type: AWS::SNS::Topic}
  DeadLetterQueueAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      AlarmDescription: Messages are in DeadLetterQueue.
      Namespace: AWS/SQS
      MetricName: ApproximateNumberOfMessagesVisible
      Dimensions:
        - Name: QueueName
          Value: !GetAtt DeadLetterQueue.QueueName
      Statistic: Maximum
      Period: 60
      EvaluationPeriods: 1
      Threshold: 0
      ComparisonOperator: GreaterThanThreshold
      TreatMissingData: notBreaching
      AlarmActions: [!Ref AlarmTopic]
      OKActions: [!Ref AlarmTopic]
Outputs:
  AlarmName: {Value: !Ref DeadLetterQueueAlarm}
  AlarmArn: {Value: !GetAtt DeadLetterQueueAlarm.Arn}
  QueueUrl: {Value: !Ref DeadLetterQueue}
  TopicArn: {Value: !Ref AlarmTopic}
"""


@pytest.fixture
def deployed(moto_patched, moto_in_process):
    cfn = client("cloudformation")
    cfn.create_stack(StackName="alarms", TemplateBody=STACK)
    outputs = cfn.describe_stacks(StackName="alarms")["Stacks"][0]["Outputs"]
    return {o["OutputKey"]: o["OutputValue"] for o in outputs}


def test_a_stack_alarm_fires_on_its_queue_metric_notifies_its_topic_and_clears(deployed):
    cloudwatch, sqs = client("cloudwatch"), client("sqs")
    name = deployed["AlarmName"]
    [alarm] = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    assert alarm["StateValue"] == INSUFFICIENT_DATA  # as CloudWatch creates an alarm
    assert alarm["AlarmArn"] == deployed["AlarmArn"]
    capture_url, capture_arn = new_queue(sqs, "alarm-capture")
    client("sns").subscribe(TopicArn=deployed["TopicArn"], Protocol="sqs", Endpoint=capture_arn)
    monitor = Monitor(REGION, time_factor=60)  # ticked by hand: no thread started
    minutes = iter(utcnow() + timedelta(seconds=k) for k in range(3))  # 1 s: a minute

    def state() -> str:
        return cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["StateValue"]

    monitor.tick(next(minutes))  # the empty queue: not breaching
    assert state() == OK
    sqs.send_message(QueueUrl=deployed["QueueUrl"], MessageBody="poison")
    monitor.tick(next(minutes))
    assert state() == ALARM
    stats = cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": deployed["QueueUrl"].rsplit("/", 1)[1]}],
        StartTime=utcnow() - timedelta(minutes=5),
        EndTime=utcnow() + timedelta(minutes=1),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    assert max(p["Maximum"] for p in stats) == 1.0

    assert len(drained(sqs, deployed["QueueUrl"])) == 1  # the operator's redrive empties it
    monitor.tick(next(minutes))
    assert state() == OK

    notes = [json.loads(json.loads(m["Body"])["Message"]) for m in drained(sqs, capture_url)]
    assert [(n["OldStateValue"], n["NewStateValue"]) for n in notes] == [
        (INSUFFICIENT_DATA, OK),
        (OK, ALARM),
        (ALARM, OK),
    ]
    fired = notes[1]
    assert fired["AlarmName"] == name and fired["AlarmArn"] == deployed["AlarmArn"]
    assert fired["AlarmDescription"] == "Messages are in DeadLetterQueue."
    assert fired["Trigger"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert fired["Trigger"]["Statistic"] == "MAXIMUM"
    assert fired["Trigger"]["Threshold"] == 0.0
    assert fired["NewStateReason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints")

    history = cloudwatch.describe_alarm_history(AlarmName=name, HistoryItemType="StateUpdate")
    summaries = [item["HistorySummary"] for item in history["AlarmHistoryItems"]]
    assert summaries == [  # newest first
        "Alarm updated from ALARM to OK",
        "Alarm updated from OK to ALARM",
        "Alarm updated from INSUFFICIENT_DATA to OK",
    ]


def test_the_store_keeps_the_last_thirty_minutes_of_datapoints(moto_patched, moto_in_process):
    now = utcnow()

    def datum(age: timedelta) -> dict:
        return {"MetricName": "FilesProcessed", "Value": 1, "Timestamp": now - age}

    cloudwatch.put_metric_data(
        ACCOUNT, REGION, "ContactCenter", [datum(timedelta(minutes=31)), datum(timedelta(0))]
    )
    Monitor(REGION).tick(now)
    kept = cloudwatch.backend(ACCOUNT, REGION).metric_data
    assert [d.timestamp for d in kept] == [now]


def iterator_age_stack() -> str:
    """LastAgentFunctionIteratorAgeAlarm as template.yaml declares it (its threshold from
    AlarmThresholds, its period and evaluation periods), on a function named ``consumer``."""
    template = cfn_yaml.load(str(ROOT / "template.yaml"))
    alarm = json.loads(json.dumps(template["Resources"]["LastAgentFunctionIteratorAgeAlarm"]))
    properties = alarm["Properties"]
    [mapping, key, field] = properties["Threshold"]["Fn::FindInMap"]
    properties["Threshold"] = template["Mappings"][mapping][key][field]
    properties["Dimensions"] = [{"Name": "FunctionName", "Value": "consumer"}]
    return json.dumps(
        {
            "Resources": {
                "AlarmTopic": {"Type": "AWS::SNS::Topic"},
                "IteratorAgeAlarm": {"Type": alarm["Type"], "Properties": properties},
            },
            "Outputs": {
                "AlarmName": {"Value": {"Ref": "IteratorAgeAlarm"}},
                "TopicArn": {"Value": {"Ref": "AlarmTopic"}},
            },
        }
    )


def test_a_consumer_falling_behind_fires_the_iterator_age_alarm_until_it_catches_up(
    moto_patched, moto_in_process
):
    """A stream consumer whose every batch is more than the template's 600000 ms behind, minute
    after minute, as its mapping reports each batch (report_stream_invocation), sets the
    template's iterator-age alarm (Maximum over 60 s periods, 5 of 5) to ALARM on its topic; its
    first batch after catching up returns it to OK. In unit, not in the integration suite: the
    age is the records' real age (the metrics time factor shortens periods, not the age), so
    the local stack would have to hold a consumer 10 real minutes behind; and the template's
    MaximumRetryAttempts 5 gives a failing batch up to StreamFailureQueue within seconds."""
    cfn, lam = client("cloudformation"), client("lambda")
    cfn.create_stack(StackName="ages", TemplateBody=iterator_age_stack())
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cfn.describe_stacks(StackName="ages")["Stacks"][0]["Outputs"]
    }
    [alarm] = client("cloudwatch").describe_alarms(AlarmNames=[outputs["AlarmName"]])[
        "MetricAlarms"
    ]
    assert (alarm["Threshold"], alarm["Period"], alarm["EvaluationPeriods"]) == (600000.0, 60, 5)
    sqs = client("sqs")
    capture_url, capture_arn = new_queue(sqs, "age-capture")
    client("sns").subscribe(TopicArn=outputs["TopicArn"], Protocol="sqs", Endpoint=capture_arn)
    mapping = stream_consumer(lam, client("iam"), "consumer")
    config = MappingConfig.from_api(mapping)
    monitor = Monitor(REGION, time_factor=120)  # a minute lasts 0.5 s; ticked by hand
    behind = iter(range(11 * 60, 60 * 60, 60))  # seconds: a minute further behind each minute

    def state() -> str:
        name = outputs["AlarmName"]
        return client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"][0][
            "StateValue"
        ]

    def a_minute(outcome: BatchOutcome, age: float) -> str:
        """One CloudWatch minute of the consumer's batches, each ``age`` seconds behind (a
        failed one retried all minute), then evaluated: the alarm's state."""
        minute_ends = utcnow() + timedelta(seconds=monitor.minute)

        def reported_until_the_minute_ends() -> bool:
            report_stream_invocation(config, outcome, age)
            return utcnow() >= minute_ends

        eventually(reported_until_the_minute_ends, timeout=5, interval=0.02)
        monitor.tick()
        return state()

    monitor.tick()  # no batch yet: not breaching
    assert state() == OK
    failing = BatchOutcome("error", None, "Unhandled")
    eventually(lambda: a_minute(failing, next(behind)) == ALARM, timeout=30, interval=0)
    assert a_minute(BatchOutcome("ok"), 0.5) == OK  # fixed: it caught up

    notes = [json.loads(json.loads(m["Body"])["Message"]) for m in drained(sqs, capture_url)]
    assert [(n["OldStateValue"], n["NewStateValue"]) for n in notes] == [
        (INSUFFICIENT_DATA, OK),
        (OK, ALARM),
        (ALARM, OK),
    ]
    fired = notes[1]
    assert fired["Trigger"]["MetricName"] == "IteratorAge"
    assert fired["Trigger"]["Statistic"] == "MAXIMUM"
    assert fired["Trigger"]["Dimensions"] == [{"value": "consumer", "name": "FunctionName"}]
    assert fired["NewStateReason"].startswith("Threshold Crossed: 5 out of the last 5 datapoints")
