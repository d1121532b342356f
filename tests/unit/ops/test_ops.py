"""The operator's CLI against moto in process: idempotency keys as the functions compute them,
stream failures past retention kept and reported, and bad input refused without a traceback."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from shared import keys, notifications

from harness.in_process import client, load_handler
from ops import callers, records, redrive, replay, status
from ops.cli import main
from ops.errors import OpsError
from ops.stack import Stack
from tests.unit.ops.support import args


def test_the_notifier_record_is_found_and_purged_by_its_business_key(
    ops_stack, monkeypatch, lambda_context
):
    notifier = load_handler("notifier", monkeypatch)
    notification = notifications.survey(
        {"contact_id": "c-42", "caller": "+15551234567", "email": "a@example.com"}
    )
    event = {
        "Records": [
            {
                "messageId": "m1",
                "receiptHandle": "r1",
                "body": json.dumps(notification),
                "attributes": {},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:notifications",
            }
        ]
    }
    assert notifier.lambda_handler(event, lambda_context) == {"batchItemFailures": []}

    target = args(function="NotifierFunction", kind=keys.SURVEY, contact_id="c-42")
    shown, text, ok = records.show(ops_stack, target)
    [record] = shown["records"]
    assert record["status"] == "COMPLETED" and record["result"] == {
        "notification_id": "SURVEY#c-42"
    }
    assert record["key"].startswith("NotifierFunction#") and "COMPLETED" in text and ok

    by_id = args(function="NotifierFunction", notification_id="SURVEY#c-42", resend=True)
    assert records.purge(ops_stack, by_id, None)[0]["purged"] == [record["key"]]
    assert records.show(ops_stack, by_id)[0]["records"] == []


def failure_record(stream_arn: str, arrival: datetime) -> str:
    return json.dumps(
        {
            "requestContext": {
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:unit-Goodwill"
            },
            "DDBStreamBatchInfo": {
                "shardId": "shardId-1",
                "startSequenceNumber": "100",
                "endSequenceNumber": "200",
                "approximateArrivalOfFirstRecord": arrival.isoformat(),
                "batchSize": 2,
                "streamArn": stream_arn,
            },
        }
    )


def test_a_batch_past_the_stream_retention_is_reported_and_kept(ops_stack):
    url = ops_stack.outputs["StreamFailureQueueUrl"]
    stream_arn = client("dynamodb").describe_table(TableName=ops_stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]
    old = datetime.now(UTC) - timedelta(hours=25)
    ops_stack.sqs.send_message(QueueUrl=url, MessageBody=failure_record(stream_arn, old))
    ops_stack.sqs.send_message(QueueUrl=url, MessageBody="not a failure record")

    data, text, ok = replay.replay(ops_stack, dry_run=False, function=None)

    outcomes = sorted(batch["outcome"] for batch in data["batches"])
    assert outcomes == ["past retention", "unreadable"] and not ok
    assert "past retention" in text and "unit-Goodwill" in text
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 2  # both kept, visible again


def test_a_range_the_stream_no_longer_returns_is_past_retention(ops_stack):
    stream_arn = client("dynamodb").describe_table(TableName=ops_stack.contacts_table)["Table"][
        "LatestStreamArn"
    ]
    shards = client("dynamodbstreams").describe_stream(StreamArn=stream_arn)["StreamDescription"]
    shard = shards["Shards"][0]
    info = json.loads(failure_record(stream_arn, datetime.now(UTC)))["DDBStreamBatchInfo"]
    info |= {
        "shardId": shard["ShardId"],
        "startSequenceNumber": "1".zfill(21),
        "endSequenceNumber": "2".zfill(21),
    }
    with pytest.raises(replay.PastRetention):
        replay.read_range(ops_stack, info)


def test_emails_and_numbers_are_masked():
    assert callers.mask_email("jane.doe@example.com") == "j***@example.com"
    assert callers.mask_email(None) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "redrive"],
        ["idempotency", "wipe", "NotifierFunction"],
        ["file", "reprocess"],
        ["nonsense"],
    ],
)
def test_malformed_commands_exit_2_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "usage:" in capsys.readouterr().err


def queue_stack(ops_stack: Stack, mode: str) -> Stack:
    """``ops_stack`` as a stack of fan-out mode ``mode``: with its consumers' queues and DLQs
    (of their failures and of what the fan-out could not deliver to them)."""
    sqs = client("sqs")
    outputs = dict(ops_stack.outputs, FanOut=mode)
    for queue in ops_stack.dead_letter_queues:
        outputs[f"{queue}Url"] = sqs.create_queue(QueueName=f"unit-{queue}")["QueueUrl"]
    for consumer in ("LastAgent", "Survey", "Goodwill"):
        dlq = sqs.create_queue(QueueName=f"unit-{consumer}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        queue = sqs.create_queue(
            QueueName=f"unit-{consumer}",
            Attributes={
                "VisibilityTimeout": "18",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5}),
            },
        )["QueueUrl"]
        outputs |= {f"{consumer}QueueUrl": queue, f"{consumer}DeadLetterQueueUrl": dlq}
        delivery = sqs.create_queue(QueueName=f"unit-{consumer}-delivery-dlq")["QueueUrl"]
        outputs[f"{consumer}ChangeDeliveryDeadLetterQueueUrl"] = delivery
    return Stack("unit", ops_stack.session, outputs, {})


def test_the_consumers_dead_letter_queues_are_redriven_in_queue_modes(ops_stack):
    assert ops_stack.dead_letter_queues == (
        "IngestDeadLetterQueue",
        "NotificationDeadLetterQueue",
        "MailDeadLetterQueue",
        "MailDeliveryDeadLetterQueue",
        "MailEventsDeadLetterQueue",
    )
    with pytest.raises(OpsError, match="unknown dead-letter queue 'GoodwillDeadLetterQueue'"):
        redrive.redrive(ops_stack, "GoodwillDeadLetterQueue", None, progress=False)
    piped = queue_stack(ops_stack, "pipe")
    assert "GoodwillDeadLetterQueue" in piped.dead_letter_queues
    assert "GoodwillDeadLetterQueueUrl" in piped.failure_queues
    assert "GoodwillQueueUrl" in piped.work_queues

    data, _, _ = status.report(piped)
    flagged = {q["queue"]: q["flagged"] for q in data["queues"]}
    assert flagged["GoodwillDeadLetterQueue"] is False and "GoodwillQueue" in flagged
    piped.sqs.send_message(
        QueueUrl=piped.outputs["GoodwillDeadLetterQueueUrl"], MessageBody=json.dumps({})
    )
    data, text, _ = status.report(piped)
    [dlq] = [q for q in data["queues"] if q["queue"] == "GoodwillDeadLetterQueue"]
    assert dlq["flagged"] and "fan-out: pipe" in text


def stream_records(table: str, count: int) -> tuple[str, dict, list[dict]]:
    """Writes ``count`` CONTACT items of one caller; the stream ARN, the shard that holds them
    and their records."""
    dynamodb = client("dynamodb")
    for n in range(count):
        dynamodb.put_item(
            TableName=table,
            Item={
                "pk": {"S": "CALLER#+15550000001"},
                "sk": {"S": f"CONTACT#2026-11-02T09:0{n}:00.000Z#c-{n}"},
                "type": {"S": keys.CONTACT},
            },
        )
    stream_arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = client("dynamodbstreams")
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        if records := streams.get_records(ShardIterator=iterator)["Records"]:
            assert len(records) == count
            return stream_arn, shard, records
    raise AssertionError("no shard holds the records")


def fail_the_pipes_batch(
    ops_stack: Stack, pipe_arn: str, stream_arn: str, shard: dict, batch: list[dict]
) -> None:
    """The pipe's failure record of ``batch`` (records of one shard) in StreamFailureQueue, as
    the pipe writes it: the pipe's ARN in place of a function's."""
    failure = json.loads(failure_record(stream_arn, datetime.now(UTC)))
    failure["requestContext"]["functionArn"] = pipe_arn
    failure["DDBStreamBatchInfo"] |= {
        "shardId": shard["ShardId"],
        "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
        "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
    }
    failures = ops_stack.outputs["StreamFailureQueueUrl"]
    ops_stack.sqs.send_message(QueueUrl=failures, MessageBody=json.dumps(failure))


def test_a_pipe_failure_record_is_replayed_onto_the_pipes_bus(ops_stack):
    """ChangePipe's failure record (the pipe's ARN in place of a function's) is replayed as the
    pipe would have delivered it: one event per record on its target bus, the record as detail,
    the pipe's Source and DetailType; the rules take it from there."""
    stream_arn, shard, records = stream_records(ops_stack.contacts_table, 3)
    events = client("events")
    bus_arn = events.create_event_bus(Name="unit-changes")["EventBusArn"]
    sqs = client("sqs")
    target = sqs.create_queue(QueueName="unit-bus-target")["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_rule(
        Name="unit-rule",
        EventBusName="unit-changes",
        EventPattern=json.dumps({"source": ["unit.changes"], "detail": {"eventName": ["INSERT"]}}),
    )
    events.put_targets(
        Rule="unit-rule",
        EventBusName="unit-changes",
        Targets=[{"Id": "queue", "Arn": target_arn, "InputPath": "$.detail"}],
    )
    pipe = client("pipes").create_pipe(
        Name="unit-ChangePipe",
        RoleArn="arn:aws:iam::123456789012:role/unit-pipe",
        Source=stream_arn,
        SourceParameters={"DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON"}},
        Target=bus_arn,
        TargetParameters={
            "EventBridgeEventBusParameters": {"Source": "unit.changes", "DetailType": "change"}
        },
    )
    fail_the_pipes_batch(ops_stack, pipe["Arn"], stream_arn, shard, records[1:])

    dry, _, ok = replay.replay(ops_stack, dry_run=True, function=None)
    [batch] = dry["batches"]
    assert ok and (batch["function"], batch["records"]) == ("unit-ChangePipe", 2)
    assert batch["outcome"] == "would replay"

    data, _, ok = replay.replay(ops_stack, dry_run=False, function=None)
    assert ok and [b["outcome"] for b in data["batches"]] == ["replayed"]
    delivered = [json.loads(m["Body"]) for m in stack_drain(target)]
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in delivered] == [
        r["dynamodb"]["Keys"]["sk"]["S"] for r in records[1:]
    ]
    assert all(r["eventSourceARN"] == stream_arn for r in delivered)
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 0


def test_a_pipe_failure_record_is_replayed_onto_the_pipes_topic(ops_stack):
    """FanOut=pipe-topic: the records published to the pipe's target topic as the pipe publishes
    them (the record itself as the body); each subscription's filter takes it from there."""
    stream_arn, shard, records = stream_records(ops_stack.contacts_table, 3)
    topic_arn = client("sns").create_topic(Name="unit-changes")["TopicArn"]
    sqs = client("sqs")
    target = sqs.create_queue(QueueName="unit-topic-target")["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    client("sns").subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=target_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    pipe = client("pipes").create_pipe(
        Name="unit-ChangePipe",
        RoleArn="arn:aws:iam::123456789012:role/unit-pipe",
        Source=stream_arn,
        SourceParameters={"DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON"}},
        Target=topic_arn,
    )
    fail_the_pipes_batch(ops_stack, pipe["Arn"], stream_arn, shard, records[1:])

    replays_into(ops_stack, target, stream_arn, records[1:])


def a_machine_sending_each_record_to(queue_url: str) -> str:
    """An Express machine mapping its input array to sendMessage on ``queue_url`` (ChangeMachine's
    shape, one branch), with a role allowed to send."""
    iam = client("iam")
    role = iam.create_role(RoleName="unit-machine", AssumeRolePolicyDocument="{}")["Role"]
    iam.put_role_policy(
        RoleName="unit-machine",
        PolicyName="send",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}],
            }
        ),
    )
    send = {
        "Type": "Task",
        "End": True,
        "Resource": "arn:aws:states:::sqs:sendMessage",
        "Parameters": {"QueueUrl": queue_url, "MessageBody.$": "States.JsonToString($)"},
    }
    each = {
        "Type": "Map",
        "End": True,
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "Send",
            "States": {"Send": send},
        },
    }
    definition = {"StartAt": "Each", "States": {"Each": each}}
    return client("stepfunctions").create_state_machine(
        name="unit-changes",
        type="EXPRESS",
        roleArn=role["Arn"],
        definition=json.dumps(definition),
    )["stateMachineArn"]


def pipe_to_machine(stream_arn: str, machine_arn: str) -> str:
    return client("pipes").create_pipe(
        Name="unit-ChangePipe",
        RoleArn="arn:aws:iam::123456789012:role/unit-pipe",
        Source=stream_arn,
        SourceParameters={"DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON"}},
        Target=machine_arn,
        TargetParameters={
            "StepFunctionStateMachineParameters": {"InvocationType": "REQUEST_RESPONSE"}
        },
    )["Arn"]


def test_a_pipe_failure_record_is_replayed_through_the_pipes_state_machine(ops_stack):
    """FanOut=pipe-sfn: the batch is the input of one synchronous execution of the pipe's machine,
    as the pipe starts it; the machine sends each record on (each consumer's queue filter takes
    it from there)."""
    stream_arn, shard, records = stream_records(ops_stack.contacts_table, 3)
    target = client("sqs").create_queue(QueueName="unit-machine-target")["QueueUrl"]
    pipe_arn = pipe_to_machine(stream_arn, a_machine_sending_each_record_to(target))
    fail_the_pipes_batch(ops_stack, pipe_arn, stream_arn, shard, records[1:])

    replays_into(ops_stack, target, stream_arn, records[1:])


def test_an_execution_that_fails_is_reported_and_its_failure_record_kept(ops_stack):
    """The machine cannot deliver (its queue is gone): the replay says so with the execution's
    error, and the failure record stays for the next replay."""
    stream_arn, shard, records = stream_records(ops_stack.contacts_table, 2)
    sqs = client("sqs")
    target = sqs.create_queue(QueueName="unit-machine-gone")["QueueUrl"]
    pipe_arn = pipe_to_machine(stream_arn, a_machine_sending_each_record_to(target))
    sqs.delete_queue(QueueUrl=target)
    fail_the_pipes_batch(ops_stack, pipe_arn, stream_arn, shard, records)

    data, _, ok = replay.replay(ops_stack, dry_run=False, function=None)
    [batch] = data["batches"]
    assert not ok and batch["outcome"] == "failed"
    assert batch["detail"].startswith("states: 2 of 2 record(s) not delivered (")
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 1


def replays_into(ops_stack: Stack, target: str, stream_arn: str, records: list[dict]):
    """`ops stream replay` replays the one failed batch, ``records`` reach the queue ``target``
    (in any order), and the failure record is gone."""
    data, _, ok = replay.replay(ops_stack, dry_run=False, function=None)
    assert ok and [b["outcome"] for b in data["batches"]] == ["replayed"]
    delivered = [json.loads(m["Body"]) for m in stack_drain(target)]
    assert sorted(r["dynamodb"]["Keys"]["sk"]["S"] for r in delivered) == sorted(
        r["dynamodb"]["Keys"]["sk"]["S"] for r in records
    )
    assert all(r["eventSourceARN"] == stream_arn for r in delivered)
    assert ops_stack.queue_depth("StreamFailureQueueUrl") == 0


def stack_drain(queue_url: str) -> list[dict]:
    sqs = client("sqs")
    found = []
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        found += batch
        for message in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return found


def test_a_consumers_replay_in_a_queue_mode_points_at_its_dead_letter_queue(ops_stack, monkeypatch):
    piped = queue_stack(ops_stack, "router")
    monkeypatch.setattr(
        Stack, "functions", lambda self: {"GoodwillFunction": "unit-GoodwillFunction"}
    )
    data, text, ok = replay.replay(piped, dry_run=True, function="GoodwillFunction")
    assert ok and data["batches"] == []
    assert "GoodwillDeadLetterQueue" in text and "ops dlq redrive GoodwillDeadLetterQueue" in text


def test_an_empty_queue_shows_no_age_though_cloudwatch_measured_one_minutes_ago(ops_stack):
    url = ops_stack.outputs["IngestQueueUrl"]
    name = url.rsplit("/", 1)[1]
    ops_stack.client("cloudwatch").put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": name}],
                "Timestamp": datetime.now(UTC) - timedelta(minutes=2),
                "Value": 95,
            }
        ],
    )
    assert status.queue_status(ops_stack, "IngestQueueUrl")["oldest_age_seconds"] is None

    ops_stack.sqs.send_message(QueueUrl=url, MessageBody="{}")
    assert status.queue_status(ops_stack, "IngestQueueUrl")["oldest_age_seconds"] == 95
