"""The last hop of a demo or chaos run: the e-mails the local stack's SES accepted for the run's
notifications (its inbox, GET /_emulator/inbox), against what reached NotificationsTopic.

A notification with an address must become exactly one e-mail; one without (a gift card for a
contact that left no e-mail) none, recorded by MailSenderFunction under its claim.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from shared import idempotency, mail

from harness.stack import StackClient


def e_mails(stack: StackClient, notifications: Iterable[Mapping[str, Any]]) -> collections.Counter:
    """How many e-mails each of these notifications became, by notification id."""
    wanted = {n.get("notification_id") for n in notifications}
    tags = (message["tags"].get(mail.NOTIFICATION_TAG, "") for message in stack.inbox())
    tagged = (mail.notification_id_of_tag(tag) for tag in tags)
    return collections.Counter(n for n in tagged if n in wanted)


def mailed_twice(stack: StackClient, notifications: Iterable[Mapping[str, Any]]) -> list[str]:
    """A line per notification that became more than one e-mail: its id, each e-mail's SES
    message id and time, and the Send event MailEventsFunction recorded (ids and times only)."""
    sent = e_mails(stack, notifications)
    twice = sorted(n for n, count in sent.items() if count > 1)
    if not twice:
        return []
    by_id = collections.defaultdict(list)
    for message in stack.inbox():
        notification = mail.notification_id_of_tag(message["tags"].get(mail.NOTIFICATION_TAG, ""))
        by_id[notification].append(f"{message['message_id']} at {message['sent_at']}")
    recorded = stack.mail_sent(twice)
    return [
        f"{n}: e-mails {', '.join(by_id[n])}; Send event recorded: "
        + (
            f"{recorded[n]['message_id']['S']} at {recorded[n]['recorded_at']['S']}"
            if n in recorded
            else "none"
        )
        for n in twice
    ]


def with_address(notifications: Iterable[Mapping[str, Any]]) -> set[str]:
    return {n["notification_id"] for n in notifications if n.get("email")}


def recorded(stack: StackClient, outcome: str) -> int:
    """MailSenderFunction's completed claims whose result is ``outcome`` (shared.mail.MailOutcome):
    what it recorded, exact where its metrics are not (a crash after the record loses them)."""
    pages = stack.dynamodb.get_paginator("scan").paginate(
        TableName=stack.outputs["IdempotencyTableName"],
        FilterExpression="begins_with(id, :prefix) AND #status = :completed",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={
            ":prefix": {"S": f"{idempotency.MAIL.key_prefix}#"},
            ":completed": {"S": "COMPLETED"},
        },
    )
    return sum(
        json.loads(item["data"]["S"]).get("outcome") == outcome
        for page in pages
        for item in page["Items"]
    )


def check(stack: StackClient, notifications: list[dict], report) -> None:
    """The summary's rows (``report.check(label, actual, wanted, detail)``): e-mails in the
    inbox, one per notification with an address; the rest recorded without one."""
    sent = e_mails(stack, notifications)
    addressed = with_address(notifications)
    report.check(
        "e-mails in the inbox",
        sum(sent.values()),
        len(addressed),
        f"one per notification with an address, from SES ({len(notifications):,} notifications)",
    )
    report.check(
        "notifications without one",
        recorded(stack, mail.MailOutcome.NO_ADDRESS),
        len(notifications) - len(addressed),
        "recorded by the sender, not sent (its claims' results)",
    )


def chaos_rows(stack: StackClient, notifications: list[dict]) -> dict[str, int]:
    """The chaos verdict's rows for the last hop, each expected 0."""
    sent = e_mails(stack, notifications)
    return {
        "duplicate e-mails": sum(n - 1 for n in sent.values()),
        "missing e-mails": len(with_address(notifications) - set(sent)),
    }


def send_event_window(stack: StackClient, notifications: list[dict]) -> str:
    """The measured window: from SES accepting a message to its Send event recorded (MAIL_SENT),
    the longest and the median over the run's e-mails."""
    recorded = stack.mail_sent(with_address(notifications)).values()
    lags = sorted(
        datetime.fromisoformat(item["recorded_at"]["S"]).timestamp()
        - datetime.fromisoformat(item["sent_at"]["S"]).timestamp()
        for item in recorded
    )
    if not lags:
        return "  send events: none recorded"
    return (
        f"  SES Send event recorded after the send: longest {lags[-1]:.2f} s, median "
        f"{lags[len(lags) // 2]:.2f} s over {len(lags):,} e-mails (a sender in doubt waits up to "
        f"{stack.parameters['MailSendEventWaitSeconds']} s for it)"
    )
