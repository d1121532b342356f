"""`ops dashboard`'s page from a stack's dashboard and CloudWatch's metrics (moto in process: a
CloudFormation stack with an AWS::CloudWatch::Dashboard, datapoints put with PutMetricData)."""

import http.client
import json
import threading
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from harness.in_process import REGION, client
from ops import dashboard, status
from ops.errors import OpsError
from ops.stack import Stack
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
def board(ops_stack) -> Stack:
    """A stack whose ContactsDashboard is BODY (the unit stack's outputs otherwise)."""
    client("cloudformation").create_stack(StackName="board", TemplateBody=template(BODY))
    session = boto3.session.Session(region_name=REGION)
    return Stack("board", session, ops_stack.outputs, {})


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
    for queue in ops_stack.dead_letter_queues:
        outputs[f"{queue}Url"] = sqs.create_queue(QueueName=f"unit-{queue}")["QueueUrl"]
    data, text, _ = status.report(Stack("unit", ops_stack.session, outputs, {}))
    assert data["dashboard_url"] == url
    assert text.splitlines()[1] == f"dashboard: {url}"


def test_a_stack_without_the_dashboard_is_told_to_deploy_the_current_template(ops_stack):
    with pytest.raises(OpsError, match="stack unit has no ContactsDashboard: deploy the current"):
        dashboard.page(ops_stack, NOW)


SCRIPT = "<script>alert(1)</script>"


def test_what_the_stack_names_is_escaped_in_the_page(ops_stack):
    """Names and values come from the stack (the dashboard's body, its metrics, the alarms'
    annotations): a resource named with a script shows as text, never runs in the operator's
    browser (issue 43, item 4)."""
    quoted = '" onmouseover="alert(1)'
    body = {
        "start": "-PT1H",
        "widgets": [
            {
                "type": "metric",
                "x": 0,
                "y": 0,
                "width": 12,
                "height": 6,
                "properties": {
                    "title": f"Files {SCRIPT}",
                    "region": REGION,
                    "stat": "Sum",  # one of CloudWatch's (GetMetricData refuses another)
                    "period": 300,
                    "metrics": [
                        ["ContactCenter", f"Files{SCRIPT}", "service", quoted],
                        ["ContactCenter", f"Files{SCRIPT}", "service", "other"],
                        ["ContactCenter", "Labelled", {"label": f"{quoted}{SCRIPT}"}],
                    ],
                    "annotations": {"horizontal": [{"label": f"{SCRIPT} alarm", "value": 0}]},
                },
            },
            {
                "type": f"text{SCRIPT}",
                "x": 0,
                "y": 6,
                "width": 6,
                "height": 2,
                "properties": {"title": quoted},
            },
        ],
    }
    client("cloudformation").create_stack(StackName="board", TemplateBody=template(body))
    board = Stack("board", boto3.session.Session(region_name=REGION), ops_stack.outputs, {})
    put("ContactCenter", f"Files{SCRIPT}", {"service": quoted}, 2, timedelta(minutes=5))

    page = dashboard.page(board, NOW)

    assert "<script" not in page
    assert 'onmouseover="' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    shown = widgets(page)  # what a browser reads back is the names as they are
    assert set(shown) == {f"Files {SCRIPT}", quoted}
    assert set(shown[f"Files {SCRIPT}"].figures) == {
        f"Files{SCRIPT} {quoted}", f"Files{SCRIPT} other", f"{quoted}{SCRIPT}"
    }  # fmt: skip


@pytest.mark.parametrize("place", ["x", "y", "width", "height"])
def test_a_widget_placed_by_anything_but_numbers_is_refused(ops_stack, place):
    """x, y, width and height go into the page's style attribute: a string there could close it
    (a script in an event handler) or fetch from elsewhere (CSS), so only whole numbers are
    drawn."""
    value = '6; background: url(https://evil.example/)" onmouseover="alert(1)'
    body = {"widgets": [dict(BODY["widgets"][0], **{place: value})]}
    client("cloudformation").create_stack(StackName="board", TemplateBody=template(body))
    board = Stack("board", boto3.session.Session(region_name=REGION), ops_stack.outputs, {})
    with pytest.raises(OpsError, match=f"widget 'Files in': {place} .* is not a whole number"):
        dashboard.page(board, NOW)


@pytest.fixture
def served(board):
    """The dashboard served on a free port of 127.0.0.1, in a thread."""
    server = dashboard.server(board, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def fetch(port: int, host: str) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/", headers={"Host": host})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read().decode()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}"])
def test_the_page_is_served_to_its_own_names(served, host):
    status, headers, page = fetch(served, host.format(port=served))
    assert status == 200
    assert "stack board" in page
    # no script may run on it, whatever it shows; its own style only, nothing fetched
    assert headers["Content-Security-Policy"] == "default-src 'none'; style-src 'unsafe-inline'"


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1.nip.io", ""])
def test_a_request_for_another_name_is_refused(served, host):
    """A page of evil.example whose name now resolves to 127.0.0.1 (DNS rebinding) would be the
    same origin as the dashboard, and read it: its Host tells it apart."""
    name = host.format(port=served)
    status, _, body = fetch(served, name)
    assert status == 403
    assert body == (
        f"Host {name.rsplit(':', 1)[0] if ':' in name else name!r} is not this dashboard's "
        f"(open http://127.0.0.1:{served}/)\n"
    )
    assert "stack board" not in body
