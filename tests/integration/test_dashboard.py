"""The stack's dashboard as a person sees it: `python -m ops dashboard` serving the deployed
ContactsDashboard, opened in a real browser (Debian's chromium, headless; `make setup` installs
it), each widget drawing what CloudWatch holds for its metrics. Local stack only (the page is
started against its endpoint).

- Every widget: a datapoint put with PutMetricData, one distinct value per metric of the deployed
  body (so every widget of the stack's fan-out mode is checked), 47 minutes back: inside the
  dashboard's three hours, before the stack started (nothing else is there), and too old for any
  alarm's evaluation to see.
- Real traffic: a file with good and bad rows raises the files-in widgets' figures by its rows,
  from the ingest's own EMF metrics as the local stack makes them CloudWatch metrics. Earlier
  tests of the session count there too, hence the figures before and after."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import ops_process
from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from ops.dashboard import dashboard_name
from tests.dashboard_page import widgets

pytestmark = pytest.mark.integration

BROWSER_SECONDS = 120
# What the ingest's metrics take to reach the page: the function's EMF line, the local stack's
# extraction, the next page load.
METRICS_SECONDS = 60


def browser_dom(url: str, profile: Path) -> str:
    """The page's DOM after it loaded, as headless chromium dumps it."""
    browser = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",  # as root, in a container: no user namespace sandbox
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=BROWSER_SECONDS,
        check=False,
    )
    assert browser.returncode == 0, browser.stderr[-2000:]
    return browser.stdout


def metric_key(metric: list) -> tuple:
    """A widget's metric line without its options (label, stat)."""
    return tuple(metric[:-1] if isinstance(metric[-1], dict) else metric)


def put_one_value_per_metric(stack: StackClient, body: dict, at: datetime) -> dict[tuple, int]:
    values: dict[tuple, int] = {}
    for widget in body["widgets"]:
        for metric in widget["properties"]["metrics"]:
            values.setdefault(metric_key(metric), len(values) + 2)
    cloudwatch = stack.client("cloudwatch")
    for (namespace, name, *pairs), value in values.items():
        cloudwatch.put_metric_data(
            Namespace=namespace,
            MetricData=[
                {
                    "MetricName": name,
                    "Dimensions": [
                        {"Name": k, "Value": v}
                        for k, v in zip(pairs[::2], pairs[1::2], strict=True)
                    ],
                    "Timestamp": at,
                    "Value": value,
                }
            ],
        )
    return values


def test_every_widget_draws_its_metrics_and_thresholds_in_a_browser(local_stack, tmp_path):
    stack = local_stack
    cloudwatch = stack.client("cloudwatch")
    body = json.loads(
        cloudwatch.get_dashboard(DashboardName=dashboard_name(stack))["DashboardBody"]
    )
    at = datetime.fromtimestamp((time.time() - 47 * 60) // 300 * 300, UTC)
    values = put_one_value_per_metric(stack, body, at)

    with ops_process.dashboard(stack) as url:
        page = widgets(browser_dom(url, tmp_path / "profile"))

    stamp = f"{at:%Y-%m-%dT%H:%M:%SZ}"
    assert set(page) == {w["properties"]["title"] for w in body["widgets"]}
    for widget in body["widgets"]:
        properties = widget["properties"]
        shown = page[properties["title"]]
        drawn = sorted(int(points[stamp]) for points in shown.points.values() if stamp in points)
        wanted = sorted(values[metric_key(m)] for m in properties["metrics"])
        assert drawn == wanted, properties["title"]
        assert len(shown.figures) == len(wanted)  # a legend line each (its figure: other runs' too)
        thresholds = properties.get("annotations", {}).get("horizontal", [])
        assert shown.thresholds == [str(t["value"]) for t in thresholds], properties["title"]


def files_in(page: str) -> dict[str, float]:
    """The files-in widgets' figures: FilesProcessed, RowsIngested, RowsRejected (0: no data)."""
    shown = widgets(page)
    outcomes, rows = shown["Files in: outcomes"].figures, shown["Files in: rows"].figures
    return {
        name: float(figures[name] or 0)
        for figures, name in (
            (outcomes, "FilesProcessed"),
            (rows, "RowsIngested"),
            (rows, "RowsRejected"),
        )
    }


def served(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


@pytest.mark.fan_out_independent
def test_a_files_rows_raise_the_files_in_figures_in_a_browser(
    local_stack, files, contact_cleanup, tmp_path
):
    caller = new_caller()
    contact_cleanup.append(caller)
    good = [contact(caller, minutes=n, agent_id=f"agent-{n}") for n in (1, 2, 3)]
    bad = ['{"contact_id": "truncated', {**good[0], "caller": "not a number"}]
    wanted = {"FilesProcessed": 1, "RowsIngested": len(good), "RowsRejected": len(bad)}

    with ops_process.dashboard(local_stack) as url:
        before = files_in(served(url))
        key, version = files.put_jsonl("dashboard.jsonl", [*good, *bad])
        log = eventually(lambda: local_stack.file_outcome(key, version), timeout=60)
        assert log["outcome"] == {"S": "PROCESSED"}, log

        def raised() -> dict[str, float]:
            after = files_in(served(url))
            grown = {name: after[name] - before[name] for name in wanted}
            assert all(grown[name] >= wanted[name] for name in wanted), grown
            return grown

        eventually(raised, timeout=METRICS_SECONDS)
        shown = files_in(browser_dom(url, tmp_path / "profile"))

    assert all(shown[name] - before[name] >= wanted[name] for name in wanted), (before, shown)
