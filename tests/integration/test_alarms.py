"""The runbooks' first line (docs/operations.md), from the alarm on: what lands in a dead-letter
queue sets its alarm to ALARM and notifies the alarm topic; once `ops dlq redrive` has emptied
the queue the alarm returns to OK and says so on the topic. For the notifications, the ingest
and, in the modes that have them (pipe, router), the fan-out's delivery dead letters; and
ChangePipeFailuresAlarm while ChangePipe cannot deliver (pipe, pipe-topic, pipe-sfn). The
iterator-age alarms are tested at unit level (tests/unit/emulator/monitoring/test_alarms.py:
the age is real time, so a consumer would have to be 10 real minutes behind).
"""

import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
from shared import notifications

from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import pipe_failure_since, quick_redelivery

pytestmark = pytest.mark.integration


class AlarmTopic:
    """The stack's alarm topic (the alarms' actions) with a capture queue of the test's own
    subscribed, and the alarms' states as CloudWatch reports them."""

    def __init__(self, stack: StackClient):
        self.stack = stack
        self.cloudwatch = stack.client("cloudwatch")
        alarm = self.alarm("NotificationDeadLetterQueueAlarm")
        [self.topic_arn] = alarm["AlarmActions"]
        sqs = stack.sqs
        self.url = sqs.create_queue(QueueName=f"alarm-capture-{uuid.uuid4().hex[:12]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        if not stack.is_local:
            sqs.set_queue_attributes(
                QueueUrl=self.url, Attributes={"Policy": _topic_may_send(arn, self.topic_arn)}
            )
        self.subscription = stack.client("sns").subscribe(
            TopicArn=self.topic_arn, Protocol="sqs", Endpoint=arn, ReturnSubscriptionArn=True
        )["SubscriptionArn"]
        self.notes: list[dict] = []

    def alarm(self, logical_id: str) -> dict:
        """The stack's alarm of that logical id (CloudFormation names it
        <stack>-<logical id>-<suffix>, on AWS as locally)."""
        prefix = f"{self.stack.name}-{logical_id}-"
        [found] = self.cloudwatch.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]
        return found

    def name(self, logical_id: str) -> str:
        return self.alarm(logical_id)["AlarmName"]

    def state(self, logical_id: str) -> str:
        return self.alarm(logical_id)["StateValue"]

    def notified(self, logical_id: str, state: str, since: float = 0.0) -> dict | None:
        """The topic's latest notification of the alarm's move to ``state`` since the capture
        began and, if given, at or after the epoch second ``since`` (its StateChangeTime)."""
        for message in self.stack.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            self.notes.append(json.loads(json.loads(message["Body"])["Message"]))
            self.stack.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        name = self.name(logical_id)
        found = [
            n
            for n in self.notes
            if n["AlarmName"] == name
            and n["NewStateValue"] == state
            and changed_at(n) >= since - 1  # StateChangeTime is in whole milliseconds
        ]
        return found[-1] if found else None

    def fires_and_clears(self, logical_id: str, queue: str, recover) -> None:
        """``queue``'s alarm goes to ALARM (notified, naming the queue), ``recover()`` runs, and
        the alarm goes back to OK (notified, in its history)."""
        fired = eventually(lambda: self.notified(logical_id, "ALARM"), timeout=600, interval=1)
        assert self.state(logical_id) == "ALARM"
        assert fired["OldStateValue"] == "OK"
        assert fired["Trigger"]["Namespace"] == "AWS/SQS"
        assert fired["Trigger"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert fired["Trigger"]["Dimensions"] == [
            {"name": "QueueName", "value": self.stack.outputs[queue].rsplit("/", 1)[1]}
        ]
        assert fired["NewStateReason"].startswith("Threshold Crossed")
        recover()
        cleared = eventually(lambda: self.notified(logical_id, "OK"), timeout=600, interval=1)
        assert cleared["OldStateValue"] == "ALARM"
        # The suite shares the stack: another test's message may reach the same queue later and
        # fire the alarm again, so the history is checked for this pair, newest first, not for
        # being the last two entries.
        history = self.cloudwatch.describe_alarm_history(
            AlarmName=self.name(logical_id), HistoryItemType="StateUpdate"
        )["AlarmHistoryItems"]
        summaries = [item["HistorySummary"] for item in history]
        cleared_at = summaries.index("Alarm updated from ALARM to OK")
        assert summaries[cleared_at + 1] == "Alarm updated from OK to ALARM"

    def close(self) -> None:
        self.stack.client("sns").unsubscribe(SubscriptionArn=self.subscription)
        self.stack.sqs.delete_queue(QueueUrl=self.url)


def changed_at(notification: dict) -> float:
    """An alarm notification's StateChangeTime, in epoch seconds."""
    stamp = datetime.strptime(notification["StateChangeTime"], "%Y-%m-%dT%H:%M:%S.%f%z")
    return stamp.timestamp()


def _topic_may_send(queue_arn: str, topic_arn: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "sns.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                }
            ],
        }
    )


@pytest.fixture
def alarms(stack: StackClient) -> Iterator[AlarmTopic]:
    topic = AlarmTopic(stack)
    yield topic
    topic.close()


@pytest.fixture
def redrive(ops):
    """`python -m ops --stack <the stack> dlq redrive <queue> --yes`, as an operator runs it."""

    def run(queue: str) -> None:
        code, out, err = ops("dlq", "redrive", queue, "--yes")
        assert code == 0, (out, err)

    return run


def failing_until_fixed(stack: StackClient, function: str, output: str) -> dict:
    """The fault switch that fails ``function`` without running it on every delivery from its
    queue ``output`` until the test resets the faults: more failures than the receives that
    dead-letter a message, duplicate deliveries (the suite's duplicate_rate) included."""
    policy = stack.queue_attributes(output, "RedrivePolicy")["RedrivePolicy"]
    return {"fail_invocations": {function: 4 * int(json.loads(policy)["maxReceiveCount"])}}


@pytest.mark.fan_out_independent
def test_a_dead_lettered_notification_fires_its_alarm_until_redriven(
    local_stack: StackClient, alarms, redrive, topic
):
    """NotifierFunction fails on every delivery of a notification until fixed: it lands in
    NotificationDeadLetterQueue and its alarm fires; after the fix, the redrive publishes it and
    the alarm clears."""
    stack = local_stack
    eventually(lambda: alarms.state("NotificationDeadLetterQueueAlarm") == "OK", timeout=60)
    contact_id = f"it-alarm-{uuid.uuid4().hex[:10]}"
    message = notifications.survey(
        {"contact_id": contact_id, "caller": new_caller(), "email": "it@example.com"}
    )
    stack.faults(**failing_until_fixed(stack, "NotifierFunction", "NotificationQueueUrl"))
    try:
        with quick_redelivery(stack, "NotificationQueueUrl"):
            stack.sqs.send_message(
                QueueUrl=stack.outputs["NotificationQueueUrl"], MessageBody=json.dumps(message)
            )
            eventually(
                lambda: stack.queue_depth("NotificationDeadLetterQueueUrl") > 0,
                timeout=60,
                interval=0.5,
            )
    finally:
        stack.reset_faults()

    def recover() -> None:
        redrive("NotificationDeadLetterQueue")
        assert eventually(lambda: topic.for_contacts([contact_id]), timeout=60)

    alarms.fires_and_clears(
        "NotificationDeadLetterQueueAlarm", "NotificationDeadLetterQueueUrl", recover
    )


@pytest.mark.fan_out_independent
def test_a_dead_lettered_file_fires_the_ingest_alarm_until_redriven(
    local_stack: StackClient, alarms, redrive, files
):
    """IngestFunction fails on every delivery of the file's message until fixed: it lands in
    IngestDeadLetterQueue and its alarm fires; the redrive ingests the file and clears it."""
    stack = local_stack
    eventually(lambda: alarms.state("IngestDeadLetterQueueAlarm") == "OK", timeout=60)
    stack.faults(**failing_until_fixed(stack, "IngestFunction", "IngestQueueUrl"))
    try:
        with quick_redelivery(stack, "IngestQueueUrl"):
            key, version = files.put_jsonl("dead-lettered.jsonl", [contact(new_caller())])
            eventually(
                lambda: stack.queue_depth("IngestDeadLetterQueueUrl") > 0, timeout=60, interval=0.5
            )
    finally:
        stack.reset_faults()

    def recover() -> None:
        redrive("IngestDeadLetterQueue")
        assert eventually(lambda: stack.file_outcome(key, version), timeout=60)

    alarms.fires_and_clears("IngestDeadLetterQueueAlarm", "IngestDeadLetterQueueUrl", recover)


def fan_out_failure_alarm(stack: StackClient, alarms: AlarmTopic) -> str:
    """The logical id of the alarm that counts the fan-out's failed deliveries to LastAgentQueue
    in the stack's mode: the bus's rule for it (EventBridge FailedInvocations) or the change
    topic (SNS NumberOfNotificationsFailed)."""
    prefix = f"{stack.name}-"
    found = [
        a["AlarmName"][len(prefix) :].rsplit("-", 1)[0]
        for a in alarms.cloudwatch.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]
        if a["MetricName"] == "NumberOfNotificationsFailed"
        or (
            a["MetricName"] == "FailedInvocations"
            and any(d["Value"].endswith("-last-agent-changes") for d in a["Dimensions"])
        )
    ]
    assert len(found) == 1, found
    return found[0]


def test_a_change_the_fan_out_cannot_deliver_fires_its_alarm_until_redriven(
    local_stack: StackClient, alarms, redrive, files, contact_cleanup
):
    """pipe, router, pipe-topic: LastAgentQueue refuses the bus or the topic, so the change lands
    in LastAgentChangeDeliveryDeadLetterQueue and its alarm fires, and the rule's or the topic's
    delivery failures alarm too; once the queue takes changes again, the redrive delivers it and
    the DLQ's alarm clears. lambda: the mode has no such queue and the stack no such alarm.
    pipe-sfn: test_a_change_the_machine_cannot_send_fires_its_alarm_until_replayed."""
    stack = local_stack
    logical_id = "LastAgentChangeDeliveryDeadLetterQueueAlarm"
    if not stack.fan_out_dead_letters:
        assert not [q for q in stack.delivery_dead_letter_queues if "ChangeDelivery" in q]
        prefix = f"{stack.name}-{logical_id}-"
        assert not alarms.cloudwatch.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]
        return
    eventually(lambda: alarms.state(logical_id) == "OK", timeout=60)
    caller = new_caller()
    contact_cleanup.append(caller)
    with stack.refusing_sends("LastAgentQueueUrl"):
        files.put_jsonl("undeliverable.jsonl", [contact(caller, agent_id="agent-alarm")])
        eventually(
            lambda: stack.queue_depth("LastAgentChangeDeliveryDeadLetterQueueUrl") > 0,
            timeout=90,
            interval=0.5,
        )
    # the bus's rule or the topic counted the failed delivery, and its alarm fired too
    failures = fan_out_failure_alarm(stack, alarms)
    fired = eventually(lambda: alarms.notified(failures, "ALARM"), timeout=600, interval=1)
    assert fired["Trigger"]["MetricName"] in ("FailedInvocations", "NumberOfNotificationsFailed")

    def recover() -> None:
        redrive("LastAgentChangeDeliveryDeadLetterQueue")
        assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-alarm", timeout=60)

    alarms.fires_and_clears(logical_id, "LastAgentChangeDeliveryDeadLetterQueueUrl", recover)


def test_a_change_the_machine_cannot_send_fires_its_alarm_until_replayed(
    local_stack: StackClient, alarms, ops, files, contact_cleanup
):
    """pipe-sfn: LastAgentQueue refuses ChangeMachine, so each execution of the change's batch
    fails (ChangeMachineFailuresAlarm: ExecutionsFailed) until the pipe's retries are spent and
    the batch is described in StreamFailureQueue, whose alarm fires; once the queue takes changes
    again, `ops stream replay` runs the batch through the machine and that alarm clears. Other
    modes have no such machine and no such alarm."""
    stack = local_stack
    logical_id = "ChangeMachineFailuresAlarm"
    if stack.fan_out != "pipe-sfn":
        prefix = f"{stack.name}-{logical_id}-"
        assert not alarms.cloudwatch.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]
        return
    eventually(lambda: alarms.state("StreamFailureQueueAlarm") == "OK", timeout=60)
    caller = new_caller()
    contact_cleanup.append(caller)
    since = pipe_failure_since(stack, time.time())
    with stack.refusing_sends("LastAgentQueueUrl"):
        files.put_jsonl("undeliverable.jsonl", [contact(caller, agent_id="agent-alarm")])
        eventually(
            lambda: [m for m in stack.peek("StreamFailureQueueUrl") if since(m)],
            timeout=180,
            interval=1,
        )
    fired = eventually(lambda: alarms.notified(logical_id, "ALARM"), timeout=600, interval=1)
    assert fired["Trigger"]["Namespace"] == "AWS/States"
    assert fired["Trigger"]["MetricName"] == "ExecutionsFailed"

    def recover() -> None:
        code, out, err = ops("stream", "replay", "--function", "ChangePipe")
        assert code == 0, (out, err)
        assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-alarm", timeout=60)

    alarms.fires_and_clears("StreamFailureQueueAlarm", "StreamFailureQueueUrl", recover)


def test_a_change_the_pipe_may_not_deliver_fires_the_pipes_alarm_until_fixed(
    local_stack: StackClient, alarms, files, contact_cleanup
):
    """pipe, pipe-topic, pipe-sfn: ChangePipe's role loses the right to deliver to its target
    (a bad policy change), so every execution of the change's batch fails (ExecutionFailed)
    until its retries are spent and the batch is described in StreamFailureQueue, and
    ChangePipeFailuresAlarm fires; once the role is fixed and a 5-minute period passes without a
    failed execution, it clears. lambda, router: the stack has no pipe and no such alarm."""
    stack = local_stack
    logical_id = "ChangePipeFailuresAlarm"
    pipes = stack.resources("AWS::Pipes::Pipe")
    if "ChangePipe" not in pipes:
        prefix = f"{stack.name}-{logical_id}-"
        assert not alarms.cloudwatch.describe_alarms(AlarmNamePrefix=prefix)["MetricAlarms"]
        return
    eventually(lambda: alarms.state(logical_id) == "OK", timeout=60)
    role = stack.resources("AWS::IAM::Role")["ChangePipeRole"]
    iam = stack.client("iam")
    withheld = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Action": ["events:PutEvents", "sns:Publish", "states:StartSyncExecution"],
                "Resource": "*",
            }
        ],
    }
    caller = new_caller()
    contact_cleanup.append(caller)
    started = time.time()
    pipes_failure = pipe_failure_since(stack, started)
    iam.put_role_policy(RoleName=role, PolicyName="withhold", PolicyDocument=json.dumps(withheld))
    try:
        files.put_jsonl("undeliverable.jsonl", [contact(caller, agent_id="agent-pipe-alarm")])
        failed = eventually(
            lambda: [m for m in stack.peek("StreamFailureQueueUrl") if pipes_failure(m)],
            timeout=120,
            interval=1,
        )
    finally:
        iam.delete_role_policy(RoleName=role, PolicyName="withhold")
    condition = json.loads(failed[0]["Body"])["requestContext"]["condition"]
    assert condition == "RetryAttemptsExhausted"
    # (an earlier test's failed executions may have moved it before: only this test's count)
    fired = eventually(
        lambda: alarms.notified(logical_id, "ALARM", since=started), timeout=600, interval=1
    )
    assert fired["Trigger"]["Namespace"] == "AWS/EventBridge/Pipes"
    assert fired["Trigger"]["MetricName"] == "ExecutionFailed"
    assert fired["Trigger"]["Dimensions"] == [{"name": "PipeName", "value": pipes["ChangePipe"]}]
    assert fired["NewStateReason"].startswith("Threshold Crossed")
    # the failure record is the runbook's (StreamFailureQueueAlarm); the test's own is removed
    stack.delete_where("StreamFailureQueueUrl", pipes_failure)
    cleared = eventually(
        lambda: alarms.notified(logical_id, "OK", since=changed_at(fired)), timeout=600, interval=1
    )
    assert cleared["OldStateValue"] == "ALARM"
    assert alarms.state(logical_id) == "OK"
