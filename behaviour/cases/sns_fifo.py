"""SNS FIFO topics delivering to SQS FIFO queues."""

from __future__ import annotations

import json
from typing import Any

from behaviour.case import case
from behaviour.session import Session


def _fifo_topic(session: Session, scope: str, *, fifo_queue: bool) -> tuple[str, str]:
    """A FIFO topic of FifoThroughputScope ``scope`` and a queue subscribed with raw delivery:
    a FIFO queue (which tells the message group), or a standard one, which deduplicates
    nothing, so what arrives is what the topic delivered: (topic arn, queue url)."""
    sns = session.client("sns")
    topic = sns.create_topic(
        Name=f"{session.prefix}-topic.fifo",
        Attributes={"FifoTopic": "true", "FifoThroughputScope": scope},
    )["TopicArn"]
    url, arn = session.queue("inbox", fifo=fifo_queue)
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    return topic, url


def _publish(session: Session, topic: str, group: str, dedup: str, body: str) -> dict[str, Any]:
    return session.client("sns").publish(
        TopicArn=topic, Message=body, MessageGroupId=group, MessageDeduplicationId=dedup
    )


@case("SNS FIFO")
def sns_fifo_deduplicates_across_the_topic(session: Session) -> None:
    """With FifoThroughputScope=Topic, a deduplication ID seen in any message group makes a
    later message with it, in another group too, accepted but not delivered.
    https://docs.aws.amazon.com/sns/latest/api/API_Publish.html
    "when set to Topic the message deduplication scope is across the entire topic", and such
    messages "are accepted successfully but aren't delivered". The subscriber is a standard
    queue, which FIFO topics deliver to too
    (https://docs.aws.amazon.com/sns/latest/dg/fifo-message-grouping.html: "Message group ID
    is not passed to Amazon SQS standard queues"), so no queue deduplicates in the topic's
    place."""
    topic, inbox = _fifo_topic(session, "Topic", fifo_queue=False)
    _publish(session, topic, "g1", "same", "first")
    _publish(session, topic, "g2", "same", "second")
    got = [m["Body"] for m in session.messages(inbox, 1, "the first message", settle=3)]
    assert got == ["first"], got


@case("SNS FIFO")
def sns_fifo_deduplicates_per_message_group(session: Session) -> None:
    """With FifoThroughputScope=MessageGroup, deduplication holds within a message group only:
    the same ID in another group is delivered, in the same group it is not.
    https://docs.aws.amazon.com/sns/latest/api/API_Publish.html
    "when set to MessageGroup the message deduplication scope is within each individual
    message group"."""
    topic, inbox = _fifo_topic(session, "MessageGroup", fifo_queue=False)
    _publish(session, topic, "g1", "same", "first")
    _publish(session, topic, "g2", "same", "second")
    _publish(session, topic, "g1", "same", "third")
    got = [m["Body"] for m in session.messages(inbox, 2, "a message per group", settle=3)]
    assert sorted(got) == ["first", "second"], got


@case("SNS FIFO")
def sns_fifo_keeps_order_within_each_group(session: Session) -> None:
    """Messages of one message group reach a subscribed FIFO queue in the order they were
    published, with their group ID.
    https://docs.aws.amazon.com/sns/latest/dg/fifo-message-grouping.html
    "Messages that belong to the same group are processed one by one, in a strict order
    relative to the group"."""
    topic, inbox = _fifo_topic(session, "Topic", fifo_queue=True)
    sent = [(f"g{n % 2}", json.dumps({"n": n})) for n in range(10)]
    for n, (group, body) in enumerate(sent):
        _publish(session, topic, group, f"d{n}", body)
    got = session.messages(inbox, 10, "every message", settle=1)
    for group in ("g0", "g1"):
        received = [m["Body"] for m in got if m["Attributes"]["MessageGroupId"] == group]
        assert received == [body for g, body in sent if g == group], (group, received)
