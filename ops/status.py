"""`ops status`: every queue's depth and oldest message, each event source mapping's state and last
result with its consumer's iterator age, the stack's pipe (fan-out mode pipe) and the stack's
alarms in ALARM. In every fan-out mode but lambda every consumer's queue and DLQ are listed too
(Stack.work_queues, .failure_queues), and the DLQ of what the bus or the topic could not
deliver to that queue (<X>ChangeDeliveryDeadLetterQueue); every DLQ flagged like the others.
Last, the contact files IN_PROGRESS for more than an hour (files.in_progress_for_long: a Scan of
the table), each a file that is stalled or continuing without end, and what became of the
notifications at the last hop over a day (the mail sender's and recorder's metrics: e-mails sent,
delivered, bounced, suppressed, complained; not sent for want of an address). The stack's
dashboard (its DashboardUrl output: the CloudWatch console) heads the report.

Ages come from CloudWatch (SQS ApproximateAgeOfOldestMessage, Lambda IteratorAge: the maximum
of the last 5 minutes; the local stack publishes them too: docs/local-stack.md, "CloudWatch").
Where CloudWatch has none (a queue idle for a while), a failure queue's oldest message is read
from the messages themselves: nothing consumes those queues, so a look (received with a zero
visibility timeout) takes nothing from anyone.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from ops import files, table
from ops.stack import Stack, lambda_function_name, parse_arn

WINDOW = timedelta(minutes=5)
# The mail sender's and recorder's metrics (namespace ContactCenter, by `service`), as ops status
# counts them over MAIL_WINDOW: what became of the notifications at the last hop.
MAIL_METRICS = (
    ("sent", "EmailsSent", "mail-sender"),
    ("delivered", "EmailsDelivered", "mail-events"),
    ("bounced", "EmailsBounced", "mail-events"),
    ("suppressed", "EmailsSuppressed", "mail-events"),
    ("complained", "EmailsComplained", "mail-events"),
    ("without an address", "EmailsWithoutAddress", "mail-sender"),
    ("to an undeliverable address", "EmailsToUndeliverableAddress", "mail-sender"),
)
MAIL_WINDOW = timedelta(hours=24)
# The same hour as IngestFileInProgressAlarm (template.yaml).
FILE_IN_PROGRESS_SECONDS = 3600


def queue_label(output: str) -> str:
    return output.removesuffix("Url")


def report(stack: Stack) -> tuple[dict[str, Any], str, bool]:
    queues = [queue_status(stack, output) for output in stack.work_queues + stack.failure_queues]
    mappings = [mapping_status(stack, logical_id, m) for logical_id, m in stack.mappings()]
    alarming = [
        {"name": a["AlarmName"], "reason": a.get("StateReason", "")}
        for a in stack.alarms()
        if a.get("StateValue") == "ALARM"
    ]
    data = {
        "stack": stack.name,
        "fan_out": stack.fan_out,
        "dashboard_url": stack.outputs.get("DashboardUrl"),  # none on a stack from before it
        "queues": queues,
        "mappings": mappings,
        "pipes": pipe_status(stack),
        "alarms": alarming,
        "files_in_progress": files.in_progress_for_long(stack, FILE_IN_PROGRESS_SECONDS),
        "e_mails": mail_counts(stack),
    }
    return data, render(data), True


def queue_status(stack: Stack, output: str) -> dict[str, Any]:
    attributes = stack.queue_attributes(
        output,
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    )
    visible = int(attributes["ApproximateNumberOfMessages"])
    in_flight = int(attributes["ApproximateNumberOfMessagesNotVisible"])
    delayed = int(attributes["ApproximateNumberOfMessagesDelayed"])
    name = stack.outputs[output].rstrip("/").rsplit("/", 1)[-1]
    is_failure_queue = output in stack.failure_queues
    # An empty queue has no oldest message; CloudWatch's maximum of the last minutes outlives
    # the messages it measured.
    oldest = (
        latest_maximum(stack, "AWS/SQS", "ApproximateAgeOfOldestMessage", {"QueueName": name})
        if visible + in_flight
        else None
    )
    if oldest is None and is_failure_queue and visible + in_flight:
        sent = [int(m["Attributes"]["SentTimestamp"]) / 1000 for m in stack.peek(output)]
        oldest = time.time() - min(sent) if sent else None
    return {
        "queue": queue_label(output),
        "name": name,
        "messages": visible,
        "in_flight": in_flight,
        "delayed": delayed,
        "oldest_age_seconds": None if oldest is None else round(oldest),
        # a failure queue holding anything is work for the operator
        "flagged": is_failure_queue and visible + in_flight + delayed > 0,
    }


def mapping_status(stack: Stack, logical_id: str, mapping: dict) -> dict[str, Any]:
    source = mapping["EventSourceArn"]
    is_stream = ":dynamodb:" in source
    iterator_age_ms = (
        latest_maximum(
            stack,
            "AWS/Lambda",
            "IteratorAge",
            {"FunctionName": lambda_function_name(mapping["FunctionArn"])},
        )
        if is_stream
        else None
    )
    return {
        "function": logical_id,
        "source": source_label(source),
        "state": mapping["State"],
        "last_result": mapping.get("LastProcessingResult"),
        "iterator_age_seconds": None if iterator_age_ms is None else round(iterator_age_ms / 1000),
    }


def pipe_status(stack: Stack) -> list[dict[str, Any]]:
    """The stack's pipe (the ChangePipeName output, fan-out mode pipe): one DescribePipe."""
    name = stack.outputs.get("ChangePipeName")
    if not name:
        return []
    pipe = stack.client("pipes").describe_pipe(Name=name)
    return [
        {
            "pipe": name,
            "source": source_label(pipe["Source"]),
            "target": pipe["Target"].rsplit("/", 1)[-1],
            "state": pipe.get("CurrentState"),
            "desired_state": pipe.get("DesiredState"),
            "reason": pipe.get("StateReason") or None,
        }
    ]


def source_label(arn: str) -> str:
    """A queue's name, or `<table> stream`."""
    resource = parse_arn(arn)["resource"]
    if resource.startswith("table/"):
        return f"{resource.split('/')[1]} stream"
    return resource


def latest_maximum(
    stack: Stack, namespace: str, metric: str, dimensions: dict[str, str]
) -> float | None:
    """The newest 1-minute Maximum of a metric within WINDOW, None without datapoints."""
    now = datetime.now(UTC)
    points = stack.client("cloudwatch").get_metric_statistics(
        Namespace=namespace,
        MetricName=metric,
        Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
        StartTime=now - WINDOW,
        EndTime=now,
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    if not points:
        return None
    return max(points, key=lambda p: p["Timestamp"])["Maximum"]


def mail_counts(stack: Stack) -> dict[str, int]:
    """Each of MAIL_METRICS summed over MAIL_WINDOW (0 without datapoints)."""
    now = datetime.now(UTC)
    cloudwatch = stack.client("cloudwatch")
    counts = {}
    for label, metric, service in MAIL_METRICS:
        points = cloudwatch.get_metric_statistics(
            Namespace="ContactCenter",
            MetricName=metric,
            Dimensions=[{"Name": "service", "Value": service}],
            StartTime=now - MAIL_WINDOW,
            EndTime=now,
            Period=3600,
            Statistics=["Sum"],
        )["Datapoints"]
        counts[label] = round(sum(p["Sum"] for p in points))
    return counts


def render(data: dict[str, Any]) -> str:
    queues = table.render(
        ("QUEUE", "MESSAGES", "IN FLIGHT", "DELAYED", "OLDEST", ""),
        [
            (
                q["queue"],
                q["messages"],
                q["in_flight"],
                q["delayed"],
                table.age(q["oldest_age_seconds"]),
                "<- needs attention" if q["flagged"] else "",
            )
            for q in data["queues"]
        ],
    )
    mappings = table.render(
        ("FUNCTION", "SOURCE", "STATE", "LAST RESULT", "ITERATOR AGE"),
        [
            (
                m["function"],
                m["source"],
                m["state"],
                m["last_result"],
                table.age(m["iterator_age_seconds"]),
            )
            for m in data["mappings"]
        ],
    )
    pipes = (
        "\n\n"
        + table.render(
            ("PIPE", "SOURCE", "TARGET", "STATE", "REASON"),
            [
                (p["pipe"], p["source"], p["target"], p["state"], p["reason"] or "")
                for p in data["pipes"]
            ],
        )
        if data["pipes"]
        else ""
    )
    alarms = (
        "\n".join(f"  {a['name']}: {a['reason']}" for a in data["alarms"])
        if data["alarms"]
        else "  none"
    )
    stuck = (
        table.render(
            ("FILE", "RUN", "STEPS", "NEXT LINE", "IN PROGRESS", ""),
            [
                (
                    f["file_id"],
                    f.get("run", "first"),
                    f.get("steps"),
                    f.get("next_line"),
                    table.age(f["in_progress_seconds"]),
                    "<- needs attention",
                )
                for f in data["files_in_progress"]
            ],
        )
        if data["files_in_progress"]
        else "  none"
    )
    dashboard = f"\ndashboard: {data['dashboard_url']}" if data["dashboard_url"] else ""
    sent = ", ".join(f"{label} {n:,}" for label, n in list(data["e_mails"].items())[:5])
    unsent = ", ".join(f"{label} {n:,}" for label, n in list(data["e_mails"].items())[5:])
    return (
        f"stack {data['stack']} (fan-out: {data['fan_out']}){dashboard}\n\n{queues}\n\n{mappings}"
        f"{pipes}"
        f"\n\nalarms in ALARM:\n{alarms}\n\nfiles IN_PROGRESS for more than an hour:\n{stuck}"
        f"\n\ne-mails in the last 24 h: {sent}\n  not sent: {unsent}"
    )
