"""What the fan-out itself cannot deliver (modes pipe and router) is kept and recovered: with the
consumer's queue refusing the bus or the topic, a change goes to the consumer's
ChangeDeliveryDeadLetterQueue at once (EventBridge and SNS do not retry a refusal), the consumer
never sees it, and once the queue takes changes again `ops dlq redrive` delivers it."""

import json

import pytest

from harness.builders import contact, new_caller
from harness.polling import eventually, stable
from harness.stack import StackClient
from ops.cli import main

pytestmark = pytest.mark.integration

QUEUE = "LastAgentQueueUrl"
DEAD_LETTERS = "LastAgentChangeDeliveryDeadLetterQueue"


def test_a_change_the_fan_out_cannot_deliver_is_kept_and_redriven(
    stack: StackClient, files, contact_cleanup, monkeypatch, capsys
):
    if not stack.consumers_read_queues:  # lambda: the consumers read the stream themselves
        assert stack.delivery_dead_letter_queues == {}
        assert not [q for q in stack.failure_queues if "ChangeDelivery" in q]
        return
    caller = new_caller()
    contact_cleanup.append(caller)
    row = contact(caller, agent_id="agent-kept")
    policy = stack.queue_attributes(QUEUE, "Policy")["Policy"]
    refusing = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:SendMessage",
                "Resource": stack.queue_arn(QUEUE),
            }
        ],
    }
    url = stack.outputs[QUEUE]
    stack.sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(refusing)})
    try:
        files.put_jsonl("undeliverable.jsonl", [row])

        def kept() -> list[dict]:
            found = stack.peek(f"{DEAD_LETTERS}Url")
            return [m for m in found if row["contact_id"] in m["Body"]]

        eventually(kept, timeout=90, interval=1)
        # One change, kept once per delivery of it: the fan-out is at-least-once (the local
        # stack's duplicate deliveries send some batches twice), so there may be two copies.
        stable(lambda: len(kept()), polls=3, timeout=60, interval=1)
        messages = kept()
    finally:
        stack.sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})

    changes = []
    for message in messages:
        body = json.loads(message["Body"])
        if stack.fan_out == "pipe":  # the event itself, the change in its detail, and why
            changes.append(body["detail"])
            attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
            assert attributes["ERROR_CODE"] == "NO_PERMISSIONS", attributes
            assert attributes["TARGET_ARN"] == stack.queue_arn(QUEUE)
        else:  # the raw message: the change itself
            changes.append(body)
    assert len({change["eventID"] for change in changes}) == 1  # copies of one change
    assert changes[0]["dynamodb"]["NewImage"]["agent_id"] == {"S": "agent-kept"}
    assert stack.route(caller) == {"found": "false"}  # the consumer never saw it

    if stack.local:  # what an operator's shell sets for the local stack
        monkeypatch.setenv("AWS_ENDPOINT_URL", stack.local.endpoint)
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_DEFAULT_REGION", stack.local.region)
    assert main(["--stack", stack.name, "dlq", "redrive", DEAD_LETTERS]) == 0, capsys.readouterr()
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-kept", timeout=60)
    assert not kept()
