"""A subscriber of NotificationsTopic: a FIFO queue of its own (raw delivery) whose messages are
collected with the time they were received. A FIFO subscriber keeps the FIFO topic's exactly-once
delivery (a standard queue would get SNS's at-least-once), so every duplicate it sees is one the
application sent."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable

from harness.stack import StackClient


class TopicCapture:
    def __init__(self, stack: StackClient, name: str = "topic-capture"):
        self.stack = stack
        # What arrived, in order: each message's body, plus "_kind_attribute" (the SNS message
        # attribute subscribers filter on) and "_received_at" (time.monotonic()).
        self.messages: list[dict] = []
        # A client of its own: the benchmark collects from a thread.
        self.sqs = stack.new_client("sqs")
        self.url = self.sqs.create_queue(
            QueueName=f"{name}-{uuid.uuid4().hex[:12]}.fifo", Attributes={"FifoQueue": "true"}
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        topic_arn = stack.outputs["NotificationsTopicArn"]
        if not stack.is_local:
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "sns.amazonaws.com"},
                        "Action": "sqs:SendMessage",
                        "Resource": arn,
                        "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
                    }
                ],
            }
            self.sqs.set_queue_attributes(
                QueueUrl=self.url, Attributes={"Policy": json.dumps(policy)}
            )
        self.subscription_arn = stack.client("sns").subscribe(
            TopicArn=topic_arn,
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]

    def collect(self, wait_seconds: int | None = None) -> list[dict]:
        """Receive (and delete) what arrived; return every message collected so far."""
        if wait_seconds is None:
            wait_seconds = 0 if self.stack.is_local else 1
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                WaitTimeSeconds=wait_seconds,
            ).get("Messages", [])
            if not batch:
                return self.messages
            now = time.monotonic()
            for message in batch:
                body = json.loads(message["Body"])
                attribute = message.get("MessageAttributes", {}).get("kind", {})
                body["_kind_attribute"] = attribute.get("StringValue")
                body["_received_at"] = now
                self.messages.append(body)
            self.sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
                ],
            )

    def counts(self, contact_ids: Iterable[str] | None = None) -> Counter[tuple[str, str]]:
        """(kind, contact_id) -> notifications received (of the given contacts, or all)."""
        self.collect()
        wanted = None if contact_ids is None else set(contact_ids)
        return Counter(
            (m.get("kind"), m.get("contact_id"))
            for m in list(self.messages)
            if wanted is None or m.get("contact_id") in wanted
        )

    def for_contacts(self, contact_ids: Iterable[str]) -> list[dict]:
        wanted = set(contact_ids)
        return [m for m in self.collect() if m.get("contact_id") in wanted]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stack.client("sns").unsubscribe(SubscriptionArn=self.subscription_arn)
        with contextlib.suppress(Exception):
            self.sqs.delete_queue(QueueUrl=self.url)
