"""`ops status` says what became of the notifications at the last hop: e-mails sent, delivered,
bounced, suppressed, complained, and those not sent, from the mail functions' metrics."""

from datetime import UTC, datetime, timedelta

from harness.in_process import client
from ops import status
from ops.stack import Stack


def test_status_counts_the_e_mails_of_the_last_day(ops_stack):
    cloudwatch = client("cloudwatch")
    for metric, service, value in (
        ("EmailsSent", "mail-sender", 3),
        ("EmailsSent", "mail-sender", 2),
        ("EmailsBounced", "mail-events", 1),
        ("EmailsSuppressed", "mail-events", 1),
        ("EmailsWithoutAddress", "mail-sender", 4),
    ):
        cloudwatch.put_metric_data(
            Namespace="ContactCenter",
            MetricData=[
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": "service", "Value": service}],
                    "Value": value,
                    "Unit": "Count",
                    "Timestamp": datetime.now(UTC) - timedelta(minutes=1),
                }
            ],
        )
    outputs = dict(ops_stack.outputs)
    for queue in ops_stack.dead_letter_queues:
        outputs[f"{queue}Url"] = client("sqs").create_queue(QueueName=queue)["QueueUrl"]

    data, text, _ = status.report(Stack("unit", ops_stack.session, outputs, {}))

    assert data["e_mails"] == {
        "sent": 5,
        "delivered": 0,
        "bounced": 1,
        "suppressed": 1,
        "complained": 0,
        "without an address": 4,
        "to an undeliverable address": 0,
    }
    assert text.splitlines()[-2:] == [
        "e-mails in the last 24 h: sent 5, delivered 0, bounced 1, suppressed 1, complained 0",
        "  not sent: without an address 4, to an undeliverable address 0",
    ]
