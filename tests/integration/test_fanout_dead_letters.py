"""What the fan-out itself cannot deliver is kept and recovered. With LastAgentQueue refusing
every sender:

- pipe, router, pipe-topic: the change goes to LastAgentChangeDeliveryDeadLetterQueue at once
  (EventBridge and SNS do not retry a refusal), and once the queue takes changes again `ops dlq
  redrive` delivers it;
- pipe-sfn: ChangeMachine's send fails, so its execution, so the pipe's batch: the pipe retries
  it, then describes it in StreamFailureQueue, and once the queue takes changes again `ops
  stream replay` runs the batch through the machine again.

Either way the consumer never sees the change until the operator's command, and then sees it."""

import json
import time

import pytest

from harness.builders import contact, new_caller
from harness.polling import eventually, stable
from harness.stack import StackClient
from tests.integration.support import pipe_failure_since

pytestmark = pytest.mark.integration

QUEUE = "LastAgentQueueUrl"
DEAD_LETTERS = "LastAgentChangeDeliveryDeadLetterQueue"


def test_a_change_the_fan_out_cannot_deliver_is_kept_and_redriven(
    stack: StackClient, files, contact_cleanup, ops
):
    # lambda: the consumers read the stream themselves; pipe-sfn: the machine's failures fail the
    # pipe's batch (the next test)
    if not stack.fan_out_dead_letters:
        assert set(stack.delivery_dead_letter_queues) == {"MailDeliveryDeadLetterQueue"}
        assert not [q for q in stack.failure_queues if "ChangeDelivery" in q]
        assert not [o for o in stack.outputs if "ChangeDelivery" in o]
        return
    caller = new_caller()
    contact_cleanup.append(caller)
    row = contact(caller, agent_id="agent-kept")

    def kept() -> list[dict]:
        found = stack.peek(f"{DEAD_LETTERS}Url")
        return [m for m in found if row["contact_id"] in m["Body"]]

    with stack.refusing_sends(QUEUE):
        files.put_jsonl("undeliverable.jsonl", [row])
        eventually(kept, timeout=90, interval=1)
        # One change, kept once per delivery of it: the fan-out is at-least-once (the local
        # stack's duplicate deliveries send some batches twice), so there may be two copies.
        stable(lambda: len(kept()), polls=3, timeout=60, interval=1)
        messages = kept()

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

    code, out, err = ops("dlq", "redrive", DEAD_LETTERS)
    assert code == 0, (out, err)
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-kept", timeout=60)
    assert not kept()


def test_a_change_the_machine_cannot_send_fails_the_pipes_batch(
    stack: StackClient, files, contact_cleanup, ops
):
    if stack.fan_out != "pipe-sfn":  # only pipe-sfn's fan-out sends inside the pipe's batch
        assert not stack.resources("AWS::StepFunctions::StateMachine")
        return
    caller = new_caller()
    contact_cleanup.append(caller)
    since = pipe_failure_since(stack, time.time())

    def failures() -> list[dict]:
        return [m for m in stack.peek("StreamFailureQueueUrl") if since(m)]

    with stack.refusing_sends(QUEUE):
        files.put_jsonl("undeliverable.jsonl", [contact(caller, agent_id="agent-kept")])
        # its batch and any other the pipe read meanwhile, each once its retries are spent
        kept = eventually(failures, timeout=180)
    for message in kept:
        assert (
            json.loads(message["Body"])["requestContext"]["condition"] == "RetryAttemptsExhausted"
        )
    assert stack.route(caller) == {"found": "false"}  # the consumer never saw it

    code, out, err = ops("stream", "replay", "--function", "ChangePipe")
    assert code == 0, (out, err)
    assert "replayed" in out
    assert eventually(lambda: stack.route(caller).get("agent_id") == "agent-kept", timeout=60)
    assert not failures()
