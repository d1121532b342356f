"""`ops dashboard`'s page from a stack's dashboard and CloudWatch's metrics (moto in process: a
CloudFormation stack with an AWS::CloudWatch::Dashboard, datapoints put with PutMetricData)."""

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from harness.in_process import REGION, client
from harness.stack import StackClient
from ops import dashboard, status
from ops.errors import OpsError
from tests.dashboard_page import widgets

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BODY = {
    "start": "-PT1H",
    "widgets": [
        {
            "type": "metric",
            "x": 0,
            "y": 0,
            "width": 12,
            "height": 6,
            "properties": {
                "title": "Files in",
                "region": REGION,
                "stat": "Sum",
                "period": 300,
                "metrics": [
                    ["ContactCenter", "FilesProcessed", "service", "ingest"],
                    ["ContactCenter", "FilesRejected", "service", "ingest"],
                ],
                "annotations": {"horizontal": [{"label": "FilesRejected alarm", "value": 0}]},
            },
        },
        {
            "type": "metric",
            "x": 12,
            "y": 0,
            "width": 12,
            "height": 6,
            "properties": {
                "title": "Dead letters",
                "region": REGION,
                "stat": "Maximum",
                "period": 60,
                "metrics": [
                    ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", "a-dlq"],
                    ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", "b-dlq"],
                ],
                "annotations": {"horizontal": [{"label": "DLQ alarms", "value": 0}]},
            },
        },
    ],
}


def template(body: dict) -> str:
    dashboard_resource = {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardBody": json.dumps(body)},
    }
    return json.dumps({"Resources": {"ContactsDashboard": dashboard_resource}})


@pytest.fixture
def board(ops_stack) -> StackClient:
    """A stack whose ContactsDashboard is BODY (the unit stack's outputs otherwise)."""
    client("cloudformation").create_stack(StackName="board", TemplateBody=template(BODY))
    session = boto3.session.Session(region_name=REGION)
    return StackClient("board", session, ops_stack.outputs, {})


def put(namespace: str, name: str, dimensions: dict[str, str], value: float, ago: timedelta):
    client("cloudwatch").put_metric_data(
        Namespace=namespace,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Timestamp": NOW - ago,
                "Value": value,
                "Unit": "Count",
            }
        ],
    )


def test_each_widget_shows_its_lines_figures_points_and_thresholds(board):
    ingest = {"service": "ingest"}
    put("ContactCenter", "FilesProcessed", ingest, 2, timedelta(minutes=20))
    put("ContactCenter", "FilesProcessed", ingest, 3, timedelta(minutes=10))
    put("ContactCenter", "FilesProcessed", ingest, 40, timedelta(hours=2))  # before the range
    for minutes, depth in ((7, 4), (6, 1)):
        put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "a-dlq"}, depth,
            timedelta(minutes=minutes))  # fmt: skip

    shown = widgets(dashboard.page(board, NOW))

    assert set(shown) == {"Files in", "Dead letters"}
    files = shown["Files in"]
    assert files.figures == {"FilesProcessed": "5", "FilesRejected": ""}  # Sum; no data
    assert sorted(files.points["FilesProcessed"].values()) == ["2", "3"]
    assert files.thresholds == ["0"]
    letters = shown["Dead letters"]
    # the same metric twice: told apart by the queue's name; Maximum over the hour
    assert letters.figures == {
        "ApproximateNumberOfMessagesVisible a-dlq": "4",
        "ApproximateNumberOfMessagesVisible b-dlq": "",
    }
    assert letters.points["ApproximateNumberOfMessagesVisible a-dlq"] == {
        f"{NOW - timedelta(minutes=7):%Y-%m-%dT%H:%M:%SZ}": "4",
        f"{NOW - timedelta(minutes=6):%Y-%m-%dT%H:%M:%SZ}": "1",
    }


def test_the_page_reloads_itself_and_names_the_stack(board):
    page = dashboard.page(board, NOW)
    assert f'<meta http-equiv="refresh" content="{dashboard.REFRESH_SECONDS}">' in page
    assert "stack board" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


@pytest.mark.parametrize(
    ("start", "shown"),
    [("-PT3H", timedelta(hours=3)), ("-PT30M", timedelta(minutes=30)), (None, timedelta(hours=3))],
)
def test_the_time_range_is_the_bodys_start(start, shown):
    assert dashboard.time_range({} if start is None else {"start": start}) == shown


def test_a_start_the_page_cannot_draw_is_said_so():
    with pytest.raises(OpsError, match="-P7D"):
        dashboard.time_range({"start": "-P7D"})


def test_status_names_the_dashboard_url(ops_stack):
    url = "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards:name=d"
    sqs = client("sqs")
    outputs = dict(ops_stack.outputs, DashboardUrl=url)
    for queue in ("IngestDeadLetterQueue", "NotificationDeadLetterQueue"):
        outputs[f"{queue}Url"] = sqs.create_queue(QueueName=f"unit-{queue}")["QueueUrl"]
    data, text, _ = status.report(StackClient("unit", ops_stack.session, outputs, {}))
    assert data["dashboard_url"] == url
    assert text.splitlines()[1] == f"dashboard: {url}"


def test_a_stack_without_the_dashboard_is_told_to_deploy_the_current_template(ops_stack):
    with pytest.raises(OpsError, match="stack unit has no ContactsDashboard: deploy the current"):
        dashboard.page(ops_stack, NOW)
