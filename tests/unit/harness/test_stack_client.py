"""The stack client's view of the fan-out modes (moto in process): where a consumer's failed
changes end up, how they are told apart from others', and how they are recovered."""

import json
import time

import boto3
import pytest

from harness.in_process import REGION, client
from harness.stack import StackClient, fan_out_args
from ops import fan_out
from ops.stack import CONSUMERS, takes_host_prefix


def stack_of(mode: str | None) -> StackClient:
    """A stack client of fan-out mode ``mode`` (None: a stack from before the modes)."""
    sqs = client("sqs")
    outputs = {
        "StreamFailureQueueUrl": sqs.create_queue(QueueName="failures")["QueueUrl"],
        **({"FanOut": mode} if mode else {}),
    }
    for consumer in ("LastAgent", "Survey", "Goodwill"):
        dlq = sqs.create_queue(QueueName=f"{consumer}-dlq")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        redrive = {"deadLetterTargetArn": arn, "maxReceiveCount": 5}
        queue = sqs.create_queue(
            QueueName=consumer,
            Attributes={"VisibilityTimeout": "18", "RedrivePolicy": json.dumps(redrive)},
        )["QueueUrl"]
        outputs |= {f"{consumer}QueueUrl": queue, f"{consumer}DeadLetterQueueUrl": dlq}
    return StackClient("unit", boto3.session.Session(region_name=REGION), outputs, {})


@pytest.mark.parametrize("mode", [None, "lambda"])
def test_stream_mode_failures_are_batch_records_in_the_stream_failure_queue(stack, mode):
    fan_out = stack_of(mode)
    assert fan_out.fan_out == "lambda" and not fan_out.consumers_read_queues
    route = fan_out.failure_route("GoodwillFunction")
    assert (route.output, route.queue, route.holds_records) == (
        "StreamFailureQueueUrl",
        "StreamFailureQueue",
        False,
    )
    assert route.recover == ("stream", "replay", "--function", "GoodwillFunction")
    assert route.dry_run and "--dry-run" in route.dry_run

    started = time.time()
    url = fan_out.outputs["StreamFailureQueueUrl"]
    for function in ("GoodwillFunction", "SurveyFunction"):
        record = {
            "requestContext": {"functionArn": f"arn:aws:lambda:{REGION}:1:function:u-{function}"},
            "DDBStreamBatchInfo": {"shardId": "s", "batchSize": 1},
        }
        fan_out.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
    fan_out.sqs.send_message(QueueUrl=url, MessageBody="GoodwillFunction, not a record")
    [mine] = fan_out.failed_changes(route, "marker unused here", started)
    assert "u-GoodwillFunction" in mine["Body"]
    assert not fan_out.failed_changes(route, "", started + 60)  # sent before `since`
    fan_out.delete_failed_changes(route, "", started)
    assert fan_out.queue_depth("StreamFailureQueueUrl") == 2


@pytest.mark.parametrize("mode", [m.name for m in fan_out.MODES.values() if m.consumer_queues])
def test_queue_mode_failures_are_the_records_in_the_consumers_dead_letter_queue(stack, mode):
    fan_out = stack_of(mode)
    assert fan_out.consumers_read_queues
    for consumer in CONSUMERS:
        route = fan_out.failure_route(consumer)
        name = consumer.removesuffix("Function")
        assert (route.queue, route.holds_records) == (f"{name}DeadLetterQueue", True)
        assert route.recover == ("dlq", "redrive", f"{name}DeadLetterQueue")
        assert route.dry_run is None
        assert route.bound_seconds == 18 * 5 + 60  # maxReceiveCount x visibility, a margin
    assert fan_out.work_queues[-3:] == ("LastAgentQueueUrl", "SurveyQueueUrl", "GoodwillQueueUrl")

    route = fan_out.failure_route("LastAgentFunction")
    url = fan_out.outputs[route.output]
    for key in ("CONTACT#poison-1", "CONTACT#other"):
        record = {"eventName": "INSERT", "dynamodb": {"Keys": {"sk": {"S": key}}}}
        fan_out.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(record))
    [mine] = fan_out.failed_changes(route, "poison-1", time.time())
    assert "poison-1" in mine["Body"]
    fan_out.delete_failed_changes(route, "poison-1", time.time())
    assert fan_out.queue_depth(route.output) == 1


def test_a_failing_consumer_keeps_its_queue_settings_on_aws(stack):
    """Only the local stack's queue is hastened; a deployed stack's is left as it is."""
    fan_out = stack_of("pipe")
    with fan_out.failing_consumer("SurveyFunction") as route:
        assert route.bound_seconds == 18 * 5 + 60
        assert fan_out.queue_attributes("SurveyQueueUrl", "VisibilityTimeout") == {
            "VisibilityTimeout": "18"
        }


@pytest.mark.parametrize(
    ("endpoint", "prefixed"),
    [
        ("http://127.0.0.1:4566", False),
        ("http://localhost:4566", False),
        ("http://[::1]:4566", False),
        ("https://states.eu-west-1.amazonaws.com", True),
        ("https://vpce-1a2b.states.eu-west-1.vpce.amazonaws.com", True),
    ],
)
def test_an_ip_address_endpoint_takes_no_host_prefix(endpoint, prefixed):
    """StartSyncExecution goes to sync-<host>: a name takes it, the local stack's address not."""
    assert takes_host_prefix(endpoint) is prefixed


class FakeFirehose:
    """PutRecordBatch that fails the entries ``fail`` names on their first call."""

    def __init__(self, fail: set[bytes] = frozenset()):
        self.calls: list[list[bytes]] = []
        self.fail = set(fail)

    def put_record_batch(self, DeliveryStreamName, Records):
        assert DeliveryStreamName == "contact-records"
        data = [record["Data"] for record in Records]
        self.calls.append(data)
        failed = [d in self.fail for d in data]
        self.fail -= set(data)
        return {
            "FailedPutCount": sum(failed),
            "RequestResponses": [
                {"ErrorCode": "ServiceUnavailableException"} if f else {"RecordId": "r"}
                for f in failed
            ],
        }


def firehose_stack(firehose: FakeFirehose) -> StackClient:
    outputs = {"ContactRecordsDeliveryStreamName": "contact-records"}
    stack = StackClient("unit", boto3.session.Session(region_name=REGION), outputs, {})
    stack._clients["firehose"] = firehose
    return stack


def test_contact_records_go_in_batches_of_500_records_or_4_mib_as_connect_sends_them():
    firehose = FakeFirehose()
    records = [{"ContactId": f"c-{n}", "Attributes": {"note": "ü"}} for n in range(1203)]
    assert firehose_stack(firehose).put_contact_records(records) == 3
    assert [len(call) for call in firehose.calls] == [500, 500, 203]
    assert firehose.calls[0][0] == '{"ContactId":"c-0","Attributes":{"note":"ü"}}'.encode()

    firehose = FakeFirehose()
    big = [{"ContactId": f"c-{n}", "blob": "x" * (1024 * 1024)} for n in range(9)]
    assert firehose_stack(firehose).put_contact_records(big) == 3
    assert [len(call) for call in firehose.calls] == [3, 3, 3]
    assert all(sum(map(len, call)) <= 4 * 1024 * 1024 for call in firehose.calls)


def test_the_entries_firehose_reports_failed_are_put_again_alone():
    records = [{"ContactId": f"c-{n}"} for n in range(5)]
    failing = {b'{"ContactId":"c-1"}', b'{"ContactId":"c-3"}'}
    firehose = FakeFirehose(failing)
    assert firehose_stack(firehose).put_contact_records(records) == 2
    assert firehose.calls[1] == sorted(failing)


def test_fan_out_modes_become_up_arguments():
    assert fan_out_args(None) == fan_out_args("") == []
    assert fan_out_args("router") == ["--parameter-overrides", "FanOut=router"]
    with pytest.raises(ValueError, match=r"lambda \| pipe \| router"):
        fan_out_args("kinesis")
