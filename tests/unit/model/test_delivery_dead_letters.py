"""What the fan-out could not deliver to a consumer's queue, as one run of the model's pipeline in
each mode that has delivery dead-letter queues (pipe, router, pipe-topic; the search in
test_model.py reaches it by chance): every consumer's queue refuses the bus or the topic once, so
each change waits in the consumer's <X>ChangeDeliveryDeadLetterQueue, in the shape AWS puts it
there and with none of its effects done, until `ops dlq redrive <X>ChangeDeliveryDeadLetterQueue`;
then each effect happens exactly once (tests/unit/model/design.py)."""

import json
from collections import Counter

import pytest
from shared import ingest, keys

from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import CONSUMERS, SURVEY_DUE, Pipeline
from tests.unit.support import moto_stack

# A contact each consumer acts on: its agent is the caller's last, it is due a survey and, for
# its 900 s wait, a gift card.
DUE_TO_EVERY_CONSUMER = SURVEY_DUE | {"wait_seconds": 900}
CONTACT = DUE_TO_EVERY_CONSUMER["contact_id"]
CALLER = DUE_TO_EVERY_CONSUMER["caller"]


def held_change(pipeline: Pipeline, dead: str) -> dict:
    """The one message of a delivery dead-letter queue, in the shape AWS puts it there (pipe: the
    bus event with the refusal in its attributes, EventBridge's; router, pipe-topic: SNS's raw
    message): the stream record it holds."""
    [message] = pipeline.stack.sqs.receive_message(
        QueueUrl=dead, MaxNumberOfMessages=10, VisibilityTimeout=0, MessageAttributeNames=["All"]
    )["Messages"]
    body = json.loads(message["Body"])
    if pipeline.mode != "pipe":
        return body
    assert body["detail-type"] == "Event from aws:dynamodb", body
    assert message["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "NO_PERMISSIONS"
    return body["detail"]


def effects(pipeline: Pipeline) -> tuple[dict, Counter]:
    """The caller's last agent, and the notifications the topic's subscriber received."""
    return pipeline.ops_stack.last_agents([CALLER]), pipeline.received_by_subscriber()


@pytest.mark.parametrize("mode", ["pipe", "router", "pipe-topic"])
def test_changes_the_fan_out_could_not_deliver_take_effect_once_after_their_redrive(
    aws_env, monkeypatch, capsys, mode
):
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        pipeline = Pipeline(stack, monkeypatch, mode)
        pipeline.upload("incoming/a.jsonl", [DUE_TO_EVERY_CONSUMER])
        for consumer in CONSUMERS:
            pipeline.change_queue_refuses_the_fan_out(consumer, 1)
        pipeline.settle()

        for dead in pipeline.change_delivery_dead_letters.values():
            change = held_change(pipeline, dead)
            assert change["eventName"] == "INSERT"
            assert change["dynamodb"]["NewImage"]["contact_id"]["S"] == CONTACT
        assert effects(pipeline) == ({}, Counter())

        assert pipeline.dlq_redrive()
        pipeline.settle()

        assert pipeline.operator == {
            "a change queue refused the fan-out: the change in its delivery DLQ": 3,
            "dlq redrive LastAgentChangeDeliveryDeadLetterQueue": 1,
            "dlq redrive SurveyChangeDeliveryDeadLetterQueue": 1,
            "dlq redrive GoodwillChangeDeliveryDeadLetterQueue": 1,
        }
        last_agents, received = effects(pipeline)
        assert last_agents[CALLER]["agent_id"] == DUE_TO_EVERY_CONSUMER["agent_id"]
        assert received == Counter({(keys.SURVEY, CONTACT): 1, (keys.GIFT_CARD, CONTACT): 1})
        pipeline.drain()
        check_final_state(pipeline)
        capsys.readouterr()  # the handlers' logs
