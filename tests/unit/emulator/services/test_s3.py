"""S3 event notifications (emulator/services/s3.py), moto in process: each record sent
``duplicate_deliveries`` times."""

import json

import pytest

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
