"""`ops status` and `ops dlq redrive` on what the fan-out could not deliver (modes pipe and router):
each consumer's ChangeDeliveryDeadLetterQueue, holding what EventBridge (the event itself) or SNS
(the raw message) puts there, redriven into the consumer's queue as the rule's InputPath or the
raw subscription would have delivered it, and taken by the consumer from there. And what
NotificationsTopic could not deliver to MailQueue (every mode): MailDeliveryDeadLetterQueue; and
SES's sending events MailEventsFunction gave up on, which ops records itself."""

import json

import pytest
from shared import keys, mail, notifications
from shared.aws import mail as ses_mail

from harness.events import contact, failed_ids, sqs_event, stream_record
from harness.in_process import ACCOUNT, REGION, load_handler
from ops import redrive, status
from ops.errors import OpsError
from ops.stack import CONSUMERS, FAILURE_QUEUES, Stack

CALLER = "+14155550199"


def with_fan_out(stack: Stack, mode: str) -> Stack:
    """``stack`` as a stack of that fan-out mode: the FanOut output, every stack's DLQs and, for
    pipe and router, every consumer's queue, DLQ and delivery DLQ as its outputs name them."""
    stack.outputs["FanOut"] = mode
    for output in FAILURE_QUEUES:
        if output not in stack.outputs:
            name = output.removesuffix("Url")
            stack.outputs[output] = stack.sqs.create_queue(QueueName=name)["QueueUrl"]
    if mode != "lambda":
        for function in CONSUMERS:
            for output in (
                stack.consumer_queue(function),
                stack.consumer_dead_letter_queue(function),
                stack.consumer_delivery_dead_letter_queue(function),
            ):
                name = output.removesuffix("Url")
                stack.outputs[output] = stack.sqs.create_queue(QueueName=name)["QueueUrl"]
    return stack


def a_change() -> dict:
    """The INSERT record of a contact that reached an agent."""
    return stream_record(
        contact("c-delivery-1", CALLER, "2026-11-29T10:05:00+00:00", agent_id="agent-7")
    )


def dead_letter_of_the_bus(record: dict, consumer: str = "LastAgent") -> dict:
    """A message of a rule target's DLQ as EventBridge sends it: the event itself (what ChangePipe
    put on ChangeBus, the record as its detail) with the failure in message attributes."""
    event = {
        "version": "0",
        "id": "0d6a2b0e-7a52-4b5b-9d0b-3f1c1b2c3d4e",
        "detail-type": "Event from aws:dynamodb",
        "source": "Pipe unit-changes",
        "account": ACCOUNT,
        "time": "2026-11-29T10:05:00Z",
        "region": REGION,
        "resources": [],
        "detail": record,
    }
    attributes = {
        "RULE_ARN": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/unit-changes/unit-{consumer}",
        "TARGET_ARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{consumer}Queue",
        "ERROR_CODE": "NO_PERMISSIONS",
        "ERROR_MESSAGE": "Access to the resource is denied",
        "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttempts",
        "RETRY_ATTEMPTS": "0",
    }
    return {
        "MessageBody": json.dumps(event),
        "MessageAttributes": {
            name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
        },
    }


def store(stack: Stack, record: dict) -> None:
    """The record's item in the table, as the ingest wrote it."""
    stack.dynamodb.put_item(TableName=stack.contacts_table, Item=record["dynamodb"]["NewImage"])


def deliver_to_last_agent(stack: Stack, monkeypatch, lambda_context) -> list[dict]:
    """LastAgentFunction's poller: LastAgentQueue's messages handed to the function; the bodies."""
    url = stack.outputs["LastAgentQueueUrl"]
    messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    handler = load_handler("last_agent", monkeypatch)
    arn = stack.queue_arn("LastAgentQueueUrl")
    assert failed_ids(handler.lambda_handler(sqs_event(messages, arn), lambda_context)) == []
    return [json.loads(m["Body"]) for m in messages]


def last_agent(stack: Stack) -> str | None:
    item = stack.get_item(keys.last_agent_key(CALLER))
    return item["agent_id"]["S"] if item else None


def test_a_change_the_bus_could_not_deliver_reaches_its_consumer_after_a_redrive(
    ops_stack, monkeypatch, lambda_context
):
    stack = with_fan_out(ops_stack, "pipe")
    record = a_change()
    store(stack, record)
    dead_letters = stack.outputs["LastAgentChangeDeliveryDeadLetterQueueUrl"]
    stack.sqs.send_message(QueueUrl=dead_letters, **dead_letter_of_the_bus(record))

    data, text, ok = redrive.redrive(
        stack, "LastAgentChangeDeliveryDeadLetterQueue", None, progress=False
    )

    assert ok and (data["moved"], data["kept"], data["to"]) == (1, [], "LastAgentQueue"), text
    assert stack.queue_depth("LastAgentChangeDeliveryDeadLetterQueueUrl") == 0
    # the consumer's queue holds the record, as InputPath $.detail delivers it, not the event
    assert deliver_to_last_agent(stack, monkeypatch, lambda_context) == [record]
    assert last_agent(stack) == "agent-7"


@pytest.mark.parametrize("mode", ["router", "pipe-topic"])
def test_a_change_the_topic_could_not_deliver_is_sent_on_as_the_raw_message(
    ops_stack, monkeypatch, lambda_context, mode
):
    stack = with_fan_out(ops_stack, mode)
    record = a_change()
    store(stack, record)
    raw = json.dumps(record)
    stack.sqs.send_message(
        QueueUrl=stack.outputs["LastAgentChangeDeliveryDeadLetterQueueUrl"], MessageBody=raw
    )

    data, _, ok = redrive.redrive(
        stack, "LastAgentChangeDeliveryDeadLetterQueue", None, progress=False
    )

    assert ok and data["moved"] == 1
    url = stack.outputs["LastAgentQueueUrl"]
    [message] = stack.sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    assert message["Body"] == raw
    assert deliver_to_last_agent(stack, monkeypatch, lambda_context) == [record]
    assert last_agent(stack) == "agent-7"


def test_a_message_without_a_change_stays_in_the_dlq_and_is_reported(ops_stack):
    stack = with_fan_out(ops_stack, "pipe")
    record = a_change()
    dead_letters = stack.outputs["SurveyChangeDeliveryDeadLetterQueueUrl"]
    bad = [
        {"MessageBody": "not json"},
        {"MessageBody": json.dumps({"source": "elsewhere"})},  # an event without a detail
        dead_letter_of_the_bus({"detail": "no stream record"}, "Survey"),
    ]
    bad_ids = {stack.sqs.send_message(QueueUrl=dead_letters, **m)["MessageId"] for m in bad}
    stack.sqs.send_message(QueueUrl=dead_letters, **dead_letter_of_the_bus(record, "Survey"))

    data, text, ok = redrive.redrive(
        stack, "SurveyChangeDeliveryDeadLetterQueue", None, progress=False
    )

    assert not ok and data["status"] == "INCOMPLETE" and data["moved"] == 1
    assert {k["message_id"] for k in data["kept"]} == bad_ids
    assert "body is not JSON" in text and "no detail" in text and "eventName" in text
    assert "no stream record" not in text  # reasons, never a message's content
    # kept visible: for `ops status`, and for the next redrive once the cause is fixed
    assert {m["MessageId"] for m in stack.peek("SurveyChangeDeliveryDeadLetterQueueUrl")} == bad_ids
    assert stack.queue_depth("SurveyQueueUrl") == 1


def test_the_delivery_dead_letter_queues_exist_only_where_the_fan_out_has_queues(ops_stack):
    stack = with_fan_out(ops_stack, "lambda")
    assert stack.delivery_dead_letter_queues == {"MailDeliveryDeadLetterQueue": "MailQueueUrl"}
    with pytest.raises(OpsError, match="unknown dead-letter queue"):
        redrive.redrive(stack, "LastAgentChangeDeliveryDeadLetterQueue", None, progress=False)


@pytest.mark.parametrize("mode", ["pipe", "router"])
def test_status_lists_every_delivery_dlq_and_flags_one_holding_changes(ops_stack, mode):
    stack = with_fan_out(ops_stack, mode)
    record = a_change()
    stack.sqs.send_message(
        QueueUrl=stack.outputs["GoodwillChangeDeliveryDeadLetterQueueUrl"],
        MessageBody=json.dumps(record),
    )

    data, text, _ = status.report(stack)

    rows = {q["queue"]: q for q in data["queues"]}
    for consumer in ("LastAgent", "Survey", "Goodwill"):
        row = rows[f"{consumer}ChangeDeliveryDeadLetterQueue"]
        assert row["flagged"] is (consumer == "Goodwill"), row
    assert rows["GoodwillChangeDeliveryDeadLetterQueue"]["messages"] == 1
    flagged = [line for line in text.splitlines() if "needs attention" in line]
    assert [line.split()[0] for line in flagged] == ["GoodwillChangeDeliveryDeadLetterQueue"]


def fifo_mail_queues(stack: Stack) -> Stack:
    """MailQueue and MailDeliveryDeadLetterQueue as the template makes them: FIFO."""
    for output in ("MailQueueUrl", "MailDeliveryDeadLetterQueueUrl"):
        name = f"{output.removesuffix('Url')}.fifo"
        stack.outputs[output] = stack.sqs.create_queue(
            QueueName=name, Attributes={"FifoQueue": "true"}
        )["QueueUrl"]
    return stack


def undelivered(stack: Stack, body: str, group: str, deduplication: str) -> str:
    """A message as SNS FIFO puts what it could not deliver to MailQueue in the subscription's
    DLQ: the raw delivery, its group and deduplication id kept; its message id."""
    return stack.sqs.send_message(
        QueueUrl=stack.outputs["MailDeliveryDeadLetterQueueUrl"],
        MessageBody=body,
        MessageGroupId=group,
        MessageDeduplicationId=deduplication,
    )["MessageId"]


def test_a_notification_the_topic_could_not_deliver_goes_to_the_mail_queue_as_published(
    ops_stack,
):
    stack = fifo_mail_queues(with_fan_out(ops_stack, "lambda"))
    survey = notifications.survey(contact("c-mail-1", email="ann@example.com", survey_opt_in=True))
    body = json.dumps(survey)
    undelivered(stack, body, "c-mail-1", survey["notification_id"])
    not_one = undelivered(stack, json.dumps({"kind": "SURVEY"}), "c-mail-2", "bad")

    data, text, ok = redrive.redrive(stack, "MailDeliveryDeadLetterQueue", None, progress=False)

    assert not ok and (data["moved"], data["to"]) == (1, "MailQueue"), text
    assert [k["message_id"] for k in data["kept"]] == [not_one]
    assert "ann@example.com" not in text
    [message] = stack.sqs.receive_message(
        QueueUrl=stack.outputs["MailQueueUrl"],
        MessageSystemAttributeNames=["MessageGroupId", "MessageDeduplicationId"],
    )["Messages"]
    # the notifier's publish: the contact's group, the notification id as deduplication id
    assert message["Body"] == body
    assert message["Attributes"] == {
        "MessageGroupId": "c-mail-1",
        "MessageDeduplicationId": survey["notification_id"],
    }


def send_event(notification_id: str) -> dict:
    """SES's Send event of a notification's e-mail as MailEventsRule delivers it (EventBridge's
    envelope, SES's event in ``detail``, the notification id in the send's tag)."""
    return {
        "source": "aws.ses",
        "detail-type": "Email Sent",
        "detail": {
            "eventType": mail.SEND,
            "mail": {
                "messageId": f"ses-{notification_id}",
                "timestamp": "2026-12-07T10:00:00.000Z",
                "tags": {mail.NOTIFICATION_TAG: [mail.tag_value(notification_id)]},
            },
        },
    }


def test_a_send_event_the_recorder_gave_up_on_is_recorded_by_the_redrive_not_moved_back(
    ops_stack,
):
    """Moved back to MailEventsQueue, the event would be in neither place a sender in doubt
    looks until the recorder took it: ops records it (MAIL_SENT), then deletes it."""
    stack = with_fan_out(ops_stack, "lambda")
    dead_letters = stack.sqs.create_queue(QueueName="MailEventsDeadLetterQueue")["QueueUrl"]
    stack.outputs["MailEventsDeadLetterQueueUrl"] = dead_letters
    notification_id = keys.notification_id(keys.SURVEY, "c-mail-9")
    stack.sqs.send_message(
        QueueUrl=dead_letters, MessageBody=json.dumps(send_event(notification_id))
    )
    not_one = stack.sqs.send_message(QueueUrl=dead_letters, MessageBody="{}")["MessageId"]

    data, text, ok = redrive.redrive(stack, "MailEventsDeadLetterQueue", None, progress=False)

    assert not ok and (data["moved"], data["to"]) == (1, "ContactsTable"), text
    assert [(k["message_id"], k["reason"]) for k in data["kept"]] == [
        (not_one, "not an SES sending event")
    ]
    assert ses_mail.sent_record(stack.dynamodb, stack.contacts_table, notification_id)
    assert stack.queue_depth("MailEventsQueueUrl") == 0  # recorded, not moved back
    assert [m["MessageId"] for m in stack.peek("MailEventsDeadLetterQueueUrl")] == [not_one]
