"""S3 event notifications (emulator/services/s3.py), moto in process: each record sent
``duplicate_deliveries`` times, only to a queue whose policy lets S3 send for the bucket."""

import json

import pytest
from botocore.exceptions import ClientError

from emulator.core.faults import Faults
from emulator.services import context
from tests.unit.emulator.support import (
    client,
    drained,
    new_queue,
)

pytestmark = pytest.mark.usefixtures("moto_patched")


def test_s3_event_notifications_are_delivered_duplicate_deliveries_times(moto_in_process):
    faults = Faults(duplicate_deliveries=3)
    context.set_faults(faults)
    s3 = client("s3")
    s3.create_bucket(Bucket="bucket")
    url, arn = new_queue(client("sqs"), "events")
    s3.put_bucket_notification_configuration(
        Bucket="bucket",
        NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    test_events = drained(client("sqs"), url)
    assert [json.loads(m["Body"])["Event"] for m in test_events] == ["s3:TestEvent"]  # once

    s3.put_object(Bucket="bucket", Key="incoming/a.csv", Body=b"x")
    messages = drained(client("sqs"), url)
    assert len(messages) == 3
    assert len({m["MessageId"] for m in messages}) == 3  # separate messages
    assert len({m["Body"] for m in messages}) == 1  # one event
    record = json.loads(messages[0]["Body"])["Records"][0]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["eventVersion"] == "2.5"  # the unified version S3 sends today, not moto's 2.1
    assert record["s3"]["object"]["key"] == "incoming/a.csv"

    faults.update({"duplicate_deliveries": 1})
    s3.put_object(Bucket="bucket", Key="incoming/b.csv", Body=b"x")
    assert len(drained(client("sqs"), url)) == 1


def only_from(bucket: str, queue_arn: str) -> str:
    """The template's IngestQueuePolicy for ``bucket``: S3 may send for it, in this account."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AllowContactsBucketNotifications",
                    "Effect": "Allow",
                    "Principal": {"Service": "s3.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                    "Condition": {
                        "ArnLike": {"aws:SourceArn": f"arn:aws:s3:::{bucket}"},
                        "StringEquals": {"aws:SourceAccount": "123456789012"},
                    },
                },
                {
                    "Sid": "DenyInsecureTransport",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
            ],
        }
    )


def test_s3_sends_only_to_a_queue_whose_policy_allows_the_bucket(moto_in_process):
    s3, sqs = client("s3"), client("sqs")
    for name in ("contacts", "other"):
        s3.create_bucket(Bucket=name)
    url, arn = new_queue(sqs, "ingest")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": only_from("contacts", arn)})
    configuration = {"QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]}

    with pytest.raises(ClientError) as refused:
        s3.put_bucket_notification_configuration(
            Bucket="other", NotificationConfiguration=configuration
        )
    error = refused.value.response["Error"]
    assert error["Code"] == "InvalidArgument"
    assert error["Message"] == "Unable to validate the following destination configurations"
    assert "QueueConfigurations" not in s3.get_bucket_notification_configuration(Bucket="other")
    assert drained(sqs, url) == []  # no test event either

    s3.put_bucket_notification_configuration(
        Bucket="contacts", NotificationConfiguration=configuration
    )
    assert [json.loads(m["Body"])["Event"] for m in drained(sqs, url)] == ["s3:TestEvent"]
    s3.put_object(Bucket="contacts", Key="incoming/a.csv", Body=b"x")
    assert len(drained(sqs, url)) == 1

    # the policy changed afterwards: S3's deliveries are refused and lost, as on AWS
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": only_from("other", arn)})
    s3.put_object(Bucket="contacts", Key="incoming/b.csv", Body=b"x")
    assert drained(sqs, url) == []


def deny(bucket: str, condition: dict | None = None) -> str:
    """The template's DenyInsecureTransport for ``bucket`` (without ``condition``: deny all)."""
    statement = {
        "Sid": "DenyInsecureTransport",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
    }
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def test_a_bucket_policy_refuses_only_what_its_conditions_deny(moto_in_process):
    s3 = client("s3")
    s3.create_bucket(Bucket="contacts")
    insecure = {"Bool": {"aws:SecureTransport": "false"}}
    s3.put_bucket_policy(Bucket="contacts", Policy=deny("contacts", insecure))
    s3.put_object(Bucket="contacts", Key="incoming/a.csv", Body=b"x")  # over "TLS": allowed
    assert s3.get_object(Bucket="contacts", Key="incoming/a.csv")["Body"].read() == b"x"

    s3.put_bucket_policy(Bucket="contacts", Policy=deny("contacts"))
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket="contacts", Key="incoming/b.csv", Body=b"x")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
