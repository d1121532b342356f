"""The ops tests' fixture: the unit stack (tests/unit/conftest.py) seen through the stack client
(what else they share: support.py)."""

import json

import boto3
import pytest
from shared import rules

from harness.in_process import REGION, client
from ops.stack import Stack

TEMPLATE = {
    "Resources": {"StreamFailureQueue": {"Type": "AWS::SQS::Queue"}},
}


@pytest.fixture
def ops_stack(stack, lambda_context) -> Stack:
    """The unit resources seen through the stack client, with a StreamFailureQueue and the mail
    sender's queues."""
    cloudformation = client("cloudformation")
    cloudformation.create_stack(StackName="unit", TemplateBody=json.dumps(TEMPLATE))
    [queue] = cloudformation.describe_stack_resources(StackName="unit")["StackResources"]
    failure_url = queue["PhysicalResourceId"]  # a queue's physical id is its URL
    outputs = {
        "ContactsBucketName": stack.bucket,
        "ContactsTableName": stack.contacts_table,
        "IdempotencyTableName": stack.idempotency_table,
        "IngestQueueUrl": stack.ingest_queue_url,
        "NotificationQueueUrl": stack.notification_queue_url,
        "StreamFailureQueueUrl": failure_url,
    }
    for output in ("MailQueueUrl", "MailEventsQueueUrl"):  # every stack's mail sender reads them
        outputs[output] = client("sqs").create_queue(QueueName=output.removesuffix("Url"))[
            "QueueUrl"
        ]
    parameters = {"GoodwillWaitSeconds": str(rules.DEFAULT_GOODWILL_WAIT_SECONDS)}
    return Stack("unit", boto3.session.Session(region_name=REGION), outputs, parameters)
