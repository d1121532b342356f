"""emulator/services/sqs.py: moto's SQS indexed (send and receive in O(batch)) with every semantic
kept (visibility, delays, receive counts, redrive at receive time, FIFO groups and deduplication,
retention, long polling), and a wake-up for every message added, however it arrives."""

import json
import threading
import time

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.sqs import models as sqs_models
from moto.sqs.models import Queue, sqs_backends

from emulator.core import wakeups
from emulator.process import ACCOUNT, REGION
from emulator.services import moto_patches, sqs
from emulator.services.patching import original
from tests.unit.emulator.support import fake_credentials, new_queue

pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture
def aws(monkeypatch):
    fake_credentials(monkeypatch)
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


@pytest.fixture
def clock(monkeypatch):
    """The SQS clock (epoch ms), moved by hand: emulator.services.sqs's and moto's own (sent
    timestamps, visibility, delays)."""
    now = [time.time() * 1000]
    monkeypatch.setattr(sqs, "now_ms", lambda: now[0])
    monkeypatch.setattr(sqs_models, "unix_time_millis", lambda dt=None: now[0])
    monkeypatch.setattr(sqs_models, "unix_time", lambda dt=None: now[0] / 1000)
    return now


def receive(sqs, url: str, count: int = 10, **extra) -> list[dict]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=count, MessageSystemAttributeNames=["All"], **extra
    ).get("Messages", [])


def counts(sqs, url: str) -> tuple[int, int, int]:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"]),
        int(attrs["ApproximateNumberOfMessagesNotVisible"]),
        int(attrs["ApproximateNumberOfMessagesDelayed"]),
    )


def send_policy(service: str) -> str:
    """A queue policy that lets ``service`` (e.g. sns.amazonaws.com) send to the queue."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sqs:SendMessage",
                    "Resource": "*",
                }
            ],
        }
    )


def model(name: str) -> Queue:
    return sqs_backends[ACCOUNT][REGION].queues[name]


# --- cost: O(batch), not O(queue depth)


def test_receive_and_send_do_not_scan_the_queue(aws, monkeypatch):
    """moto built Queue.attributes (three scans of the queue) for every message received and
    every message sent, and checked each message's visibility in a walk of the whole queue."""
    url, _ = new_queue(aws, "deep", VisibilityTimeout="60")
    queue = model("deep")
    backend = sqs_backends[ACCOUNT][REGION]
    for i in range(3000):
        backend.send_message("deep", f"m{i}")
    receive(aws, url)  # 10 in flight at the front of the queue
    looked_at = []  # a message's visibility or delay checked: what moto's scans do per message
    for name in ("visible", "delayed"):
        check = getattr(sqs.Message, name)
        monkeypatch.setattr(
            sqs.Message,
            name,
            property(lambda m, check=check: looked_at.append(1) or check.fget(m)),
        )
    started = time.thread_time()
    for _ in range(20):
        assert len(backend.receive_message("deep", 10, 0, 60)) == 10
        backend.send_message("deep", "more")
        aws.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    spent = time.thread_time() - started
    assert looked_at == []
    # moto: ~1 s of CPU per receive at this depth, ~20 s here; a bound far below that and far
    # above what a loaded machine's CPU time inflates to (CI: 1.13 s for ~0.3 s of work)
    assert spent < 5.0
    assert len(queue._messages) == 3020


# --- semantics kept


def test_visibility_timeout_receive_counts_and_first_receive(aws, clock):
    url, _ = new_queue(aws, "vis", VisibilityTimeout="30")
    aws.send_message(QueueUrl=url, MessageBody="a")
    first = receive(aws, url)
    assert [m["Body"] for m in first] == ["a"]
    assert first[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert receive(aws, url) == []
    assert counts(aws, url) == (0, 1, 0)
    clock[0] += 31_000
    assert counts(aws, url) == (1, 0, 0)
    again = receive(aws, url)
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    stamp = "ApproximateFirstReceiveTimestamp"
    assert again[0]["Attributes"][stamp] == first[0]["Attributes"][stamp]
    assert again[0]["ReceiptHandle"] != first[0]["ReceiptHandle"]
    aws.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])  # an old handle
    assert counts(aws, url) == (0, 0, 0)
    aws.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])  # again: fine
    with pytest.raises(ClientError, match="ReceiptHandleIsInvalid"):
        aws.delete_message(QueueUrl=url, ReceiptHandle="never-issued")


def test_messages_come_in_send_order_and_a_timed_out_one_first(aws, clock):
    url, _ = new_queue(aws, "order", VisibilityTimeout="10")
    for body in "abc":
        aws.send_message(QueueUrl=url, MessageBody=body)
    assert [m["Body"] for m in receive(aws, url, 1)] == ["a"]
    aws.send_message(QueueUrl=url, MessageBody="d")
    clock[0] += 11_000
    assert [m["Body"] for m in receive(aws, url)] == ["a", "b", "c", "d"]


def test_delay_seconds_and_a_per_message_delay(aws, clock):
    url, _ = new_queue(aws, "delays", DelaySeconds="5")
    aws.send_message(QueueUrl=url, MessageBody="queue-delay")
    aws.send_message(QueueUrl=url, MessageBody="none", DelaySeconds=0)
    aws.send_message(QueueUrl=url, MessageBody="long", DelaySeconds=20)
    assert counts(aws, url) == (1, 0, 2)
    assert [m["Body"] for m in receive(aws, url)] == ["none"]
    clock[0] += 6_000
    assert [m["Body"] for m in receive(aws, url)] == ["queue-delay"]
    clock[0] += 15_000
    assert [m["Body"] for m in receive(aws, url)] == ["long"]


def test_change_visibility_zero_and_longer(aws, clock):
    url, _ = new_queue(aws, "change", VisibilityTimeout="30")
    aws.send_message(QueueUrl=url, MessageBody="a")
    handle = receive(aws, url)[0]["ReceiptHandle"]
    aws.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    handle = receive(aws, url)[0]["ReceiptHandle"]
    aws.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=100)
    clock[0] += 50_000
    assert receive(aws, url) == []
    clock[0] += 51_000
    assert len(receive(aws, url)) == 1
    with pytest.raises(ClientError, match="ReceiptHandleIsInvalid"):
        aws.change_message_visibility(QueueUrl=url, ReceiptHandle="nope", VisibilityTimeout=1)


def test_redrive_to_the_dead_letter_queue_at_receive_time(aws, clock):
    _, dlq_arn = new_queue(aws, "dlq")
    url, _ = new_queue(
        aws,
        "source",
        VisibilityTimeout="1",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
    )
    aws.send_message(QueueUrl=url, MessageBody="poison")
    seen = wakeups.version(dlq_arn)
    for _ in range(2):
        assert len(receive(aws, url)) == 1
        clock[0] += 2_000
    assert receive(aws, url) == []  # the third receive moves it
    assert counts(aws, url) == (0, 0, 0)
    moved = receive(aws, aws.get_queue_url(QueueName="dlq")["QueueUrl"])
    assert [m["Body"] for m in moved] == ["poison"]
    assert wakeups.version(dlq_arn) == seen + 1  # the DLQ's pollers are told


def test_a_message_past_the_retention_period_is_deleted_when_reached(aws, clock):
    """AWS deletes a message older than MessageRetentionPeriod. moto marked it received (a
    receive count, in flight) and stopped the receive."""
    url, _ = new_queue(aws, "retention", MessageRetentionPeriod="60")
    aws.send_message(QueueUrl=url, MessageBody="old")
    clock[0] += 30_000
    aws.send_message(QueueUrl=url, MessageBody="young")
    clock[0] += 31_000
    assert counts(aws, url) == (2, 0, 0)  # approximate: SQS deletes the old one lazily too
    assert [m["Body"] for m in receive(aws, url)] == ["young"]
    assert counts(aws, url) == (0, 1, 0)
    assert [m.body for m in model("retention")._messages] == ["young"]


def test_message_attributes_filter_and_md5(aws):
    url, _ = new_queue(aws, "attrs")
    sent = aws.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes={
            "keep": {"DataType": "String", "StringValue": "1"},
            "drop": {"DataType": "String", "StringValue": "2"},
        },
    )
    message = receive(aws, url, MessageAttributeNames=["keep"])[0]
    assert set(message["MessageAttributes"]) == {"keep"}
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert model("attrs")._messages[0].message_attributes.keys() == {"keep", "drop"}


def test_long_polling_returns_when_a_message_arrives(aws):
    url, _ = new_queue(aws, "long")
    threading.Timer(0.3, lambda: aws.send_message(QueueUrl=url, MessageBody="late")).start()
    started = time.monotonic()
    got = receive(aws, url, WaitTimeSeconds=20)
    assert [m["Body"] for m in got] == ["late"]
    assert time.monotonic() - started < 10  # at the arrival, not at the end of the 20 s wait


def test_purge_and_moto_lists(aws):
    url, _ = new_queue(aws, "purge")
    for body in "ab":
        aws.send_message(QueueUrl=url, MessageBody=body)
    receive(aws, url, 1)
    queue = model("purge")
    assert [m.body for m in queue._messages] == ["a", "b"]
    assert [m.body for m in queue.pending_messages] == ["a"]
    assert [m.body for m in queue.messages] == ["b"]
    aws.purge_queue(QueueUrl=url)
    assert queue._messages == [] and counts(aws, url) == (0, 0, 0)
    aws.send_message(QueueUrl=url, MessageBody="after")
    assert [m["Body"] for m in receive(aws, url)] == ["after"]


# --- FIFO


def fifo(sqs, name: str, **attributes: str) -> str:
    return new_queue(sqs, f"{name}.fifo", FifoQueue="true", VisibilityTimeout="30", **attributes)[0]


def send(sqs, url: str, body: str, group: str, dedup: str | None = None) -> None:
    sqs.send_message(
        QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup or body
    )


def test_fifo_groups_block_while_in_flight_and_keep_order(aws, clock):
    url = fifo(aws, "groups")
    for body, group in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b"), ("c1", "c")]:
        send(aws, url, body, group)
    assert [m["Body"] for m in receive(aws, url, 2)] == ["a1", "b1"]
    # a and b are in flight: only c is receivable
    assert [m["Body"] for m in receive(aws, url)] == ["c1"]
    assert receive(aws, url) == []
    clock[0] += 31_000  # a1, b1 and c1 time out: their groups come back, in order
    got = receive(aws, url)
    assert [m["Body"] for m in got] == ["a1", "b1", "a2", "b2", "c1"]  # several of one group
    handles = {m["Body"]: m["ReceiptHandle"] for m in got}
    for body in ("a1", "a2"):
        aws.delete_message(QueueUrl=url, ReceiptHandle=handles[body])
    aws.change_message_visibility(QueueUrl=url, ReceiptHandle=handles["b1"], VisibilityTimeout=0)
    assert receive(aws, url) == []  # b1 is visible again, but b2 is in flight: b waits
    clock[0] += 31_000
    assert [m["Body"] for m in receive(aws, url)] == ["b1", "b2", "c1"]


def test_fifo_deduplication_outlives_the_message_for_five_minutes(aws, clock):
    """AWS keeps a deduplication id for 5 minutes from its first acceptance, even after the
    message was deleted; moto compared only with the messages still in the queue."""
    url = fifo(aws, "dedupe")
    send(aws, url, "one", "g", dedup="id-1")
    handle = receive(aws, url)[0]["ReceiptHandle"]
    aws.delete_message(QueueUrl=url, ReceiptHandle=handle)
    send(aws, url, "one again", "g", dedup="id-1")
    assert receive(aws, url) == []
    clock[0] += 301_000
    send(aws, url, "one later", "g", dedup="id-1")
    assert [m["Body"] for m in receive(aws, url)] == ["one later"]


def test_aged_deduplication_ids_past_five_minutes_are_accepted_again(aws, clock):
    url = fifo(aws, "aged")
    send(aws, url, "old", "g", dedup="old")
    clock[0] += 100_000
    send(aws, url, "young", "g", dedup="young")
    assert sqs.age_deduplication(250, REGION, ACCOUNT) == {"queues": 1, "aged": 2, "expired": 1}
    send(aws, url, "old again", "g", dedup="old")
    send(aws, url, "young again", "g", dedup="young")  # 250 s after its first: a duplicate
    assert [m["Body"] for m in receive(aws, url)] == ["old", "young", "old again"]


def test_fifo_deduplication_scope_message_group(aws):
    url = fifo(
        aws, "scoped", DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId"
    )
    send(aws, url, "x in a", "a", dedup="same")
    send(aws, url, "x in b", "b", dedup="same")
    send(aws, url, "x in a again", "a", dedup="same")
    assert sorted(m["Body"] for m in receive(aws, url)) == ["x in a", "x in b"]


def test_fifo_content_based_deduplication(aws):
    url = fifo(aws, "content", ContentBasedDeduplication="true")
    for _ in range(3):
        aws.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    aws.send_message(QueueUrl=url, MessageBody="other body", MessageGroupId="g")
    assert [m["Body"] for m in receive(aws, url)] == ["same body", "other body"]


# --- Queue.attributes, read per name


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("plain", {}),
        (
            "with-policy",
            {
                "Policy": send_policy("sns.amazonaws.com"),
                "VisibilityTimeout": "7",
                "MaximumMessageSize": "2048",
            },
        ),
        ("kms", {"KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "600"}),
        ("content.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
        ("group.fifo", {"FifoQueue": "true", "DeduplicationScope": "messageGroup"}),
    ],
)
def test_queue_attributes_are_motos_names_and_values_read_per_name(aws, name, attributes):
    fifo_queue = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    _, dlq_arn = new_queue(aws, f"dlq-{name}", **fifo_queue)  # a FIFO queue's DLQ is FIFO too
    url, _ = new_queue(
        aws,
        name,
        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
        **attributes,
    )
    group = {"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo_queue else {}
    aws.send_message(QueueUrl=url, MessageBody="counted", **group)
    motos = original(Queue, "attributes").fget
    for queue in (model(name), model(f"dlq-{name}")):
        ours = queue.attributes
        assert list(ours.items()) == list(motos(queue).items())  # names, order and values
        assert ours.get("ContentBasedDeduplication") == motos(queue).get(
            "ContentBasedDeduplication"
        )
        assert "NoSuchAttribute" not in ours and ours.get("NoSuchAttribute") is None
    everything = aws.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert everything["ApproximateNumberOfMessages"] == "1"
    assert json.loads(everything["RedrivePolicy"])["maxReceiveCount"] == 3


def test_a_send_reads_neither_the_counts_nor_the_policy(aws, monkeypatch):
    """moto's SendMessage built every attribute to read ContentBasedDeduplication: three counts
    and the policy serialised twice, for each message a topic delivers."""
    url, _ = new_queue(aws, "sent-to", Policy=send_policy("sns.amazonaws.com"))
    reads = []
    for name in ("policy", "approximate_number_of_messages"):
        attribute = getattr(Queue, name)
        monkeypatch.setattr(
            Queue,
            name,
            property(
                lambda queue, read=attribute.fget, name=name: reads.append(name) or read(queue),
                attribute.fset,
            ),
        )
    aws.send_message(QueueUrl=url, MessageBody="one")
    aws.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "two"}])
    assert reads == []
    assert counts(aws, url) == (2, 0, 0)


# --- wake-ups ---------------------------------------------------------------------------------


def test_every_way_a_message_arrives_notifies_the_queue(aws):
    url, arn = new_queue(aws, "woken")
    seen = wakeups.version(arn)
    aws.send_message(QueueUrl=url, MessageBody="send")
    aws.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "1", "MessageBody": "b1"}, {"Id": "2", "MessageBody": "b2"}],
    )
    assert wakeups.version(arn) == seen + 3
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="t")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    sns.publish(TopicArn=topic, Message="via sns")
    assert wakeups.version(arn) == seen + 4
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="woken-bucket")
    s3.put_bucket_notification_configuration(
        Bucket="woken-bucket",
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )  # S3 sends its s3:TestEvent
    s3.put_object(Bucket="woken-bucket", Key="k", Body=b"x")
    assert wakeups.version(arn) == seen + 6
    bodies = [m["Body"] for m in receive(aws, url)]
    assert bodies[:3] == ["send", "b1", "b2"] and len(bodies) == 6


def test_a_wait_on_the_queue_wakes_at_once(aws):
    url, arn = new_queue(aws, "waiter")
    seen = wakeups.version(arn)
    threading.Timer(0.2, lambda: aws.send_message(QueueUrl=url, MessageBody="x")).start()
    started = time.monotonic()
    assert wakeups.wait(arn, seen, 20)
    assert time.monotonic() - started < 10  # at the send, not at the end of the 20 s wait


def test_a_queue_with_messages_from_before_the_install_keeps_them(aws):
    moto_patches.uninstall()
    try:
        url, _ = new_queue(aws, "older")
        for body in "ab":
            aws.send_message(QueueUrl=url, MessageBody=body)
        first = receive(aws, url, 1)
    finally:
        moto_patches.install()
    assert [m["Body"] for m in receive(aws, url)] == ["b"]
    assert counts(aws, url) == (0, 2, 0)
    aws.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    assert counts(aws, url) == (0, 1, 0)


def test_setting_other_attributes_keeps_the_queues_policy(aws):
    url = aws.create_queue(QueueName="with-policy")["QueueUrl"]
    policy = send_policy("events.amazonaws.com")
    aws.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
    aws.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "1"})
    kept = aws.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy", "VisibilityTimeout"])
    assert kept["Attributes"] == {"Policy": policy, "VisibilityTimeout": "1"}
    aws.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})  # "" removes it
    gone = aws.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    assert "Policy" not in gone.get("Attributes", {})
