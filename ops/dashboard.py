"""`ops dashboard`: the stack's CloudWatch dashboard (ContactsDashboard, template.yaml) drawn as a
local web page that reloads itself: the body from GetDashboard, each widget's metrics from
GetMetricData, so the page shows the same numbers against AWS and against the local stack.

Server-side: each metric widget becomes an SVG graph at its place on the dashboard's 24-column
grid, with its horizontal annotations (the alarms' thresholds) as dashed lines and a legend with
each line's figure over the dashboard's time range (Sum: the total; Maximum: the highest; other
statistics: the mean). Plain HTML, no script and nothing fetched from elsewhere: the page works
without a network. Every name and value from the stack is HTML-escaped (a resource named with a
script shows as text) and the page's Content-Security-Policy lets no script run at all. It binds
127.0.0.1 only and answers only a request addressed to 127.0.0.1 or localhost (its Host): a page
of another site whose name resolves here (DNS rebinding) cannot read it.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ops.errors import OpsError
from ops.stack import Stack

DASHBOARD = "ContactsDashboard"  # its LogicalId in template.yaml
DEFAULT_PORT = 8050
REFRESH_SECONDS = 10
DEFAULT_RANGE = timedelta(hours=3)  # CloudWatch's own default
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
# The graph's drawing area inside the SVG's viewBox.
WIDTH, HEIGHT, LEFT, TOP, BOTTOM = 400, 160, 48, 8, 20
# The names a request may address the page by (its Host header, without the port).
LOCAL_NAMES = frozenset({"127.0.0.1", "localhost"})
# No script runs on the page and nothing is fetched: its own inline style only.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'"


@dataclass
class Line:
    """One metric of a widget with its datapoints (oldest first)."""

    label: str
    stat: str
    points: list[tuple[datetime, float]]

    @property
    def figure(self) -> float | None:
        values = [value for _, value in self.points]
        if not values:
            return None
        if self.stat == "Sum":
            return sum(values)
        if self.stat == "Maximum":
            return max(values)
        return sum(values) / len(values)


def dashboard_name(stack: Stack) -> str:
    """ContactsDashboard's name (CloudFormation names it after the stack)."""
    dashboards = stack.resources("AWS::CloudWatch::Dashboard")
    if DASHBOARD not in dashboards:
        raise OpsError(f"stack {stack.name} has no {DASHBOARD}: deploy the current template")
    return dashboards[DASHBOARD]


def time_range(body: dict) -> timedelta:
    """The body's "start" (-PT3H, -PT30M, -PT1H30M), CloudWatch's 3 hours without one."""
    start = body.get("start")
    if start is None:
        return DEFAULT_RANGE
    found = re.fullmatch(r"-PT(?:(\d+)H)?(?:(\d+)M)?", start)
    if not found or not any(found.groups()):
        raise OpsError(f"dashboard start {start!r}: only -PT<n>H<n>M is drawn here")
    hours, minutes = (int(group or 0) for group in found.groups())
    return timedelta(hours=hours, minutes=minutes)


def metric_lines(cloudwatch: Any, properties: dict, start: datetime, end: datetime) -> list[Line]:
    """A metric widget's lines, one GetMetricData query each, over [start, end] with the
    widget's period (start rounded down to it, as CloudWatch aligns periods)."""
    queries, lines = [], []
    names = [metric[1] for metric in properties["metrics"]]
    for index, metric in enumerate(properties["metrics"]):
        options = metric[-1] if isinstance(metric[-1], dict) else {}
        namespace, name, *pairs = metric[:-1] if options else metric
        dimensions = [
            {"Name": key, "Value": value}
            for key, value in zip(pairs[::2], pairs[1::2], strict=True)
        ]
        stat = options.get("stat", properties.get("stat", "Average"))
        period = int(options.get("period", properties.get("period", 300)))
        # the metric's name, with its dimensions' values where the widget has it twice
        label = options.get("label") or (
            name if names.count(name) == 1 else f"{name} {' '.join(pairs[1::2])}"
        )
        queries.append(
            {
                "Id": f"m{index}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": namespace,
                        "MetricName": name,
                        "Dimensions": dimensions,
                    },
                    "Period": period,
                    "Stat": stat,
                },
            }
        )
        lines.append(Line(label, stat, []))
    aligned = min(int(q["MetricStat"]["Period"]) for q in queries)
    start = datetime.fromtimestamp(start.timestamp() // aligned * aligned, UTC)
    for page in cloudwatch.get_paginator("get_metric_data").paginate(
        MetricDataQueries=queries, StartTime=start, EndTime=end
    ):
        for result in page["MetricDataResults"]:
            line = lines[int(result["Id"][1:])]
            line.points.extend(zip(result["Timestamps"], result["Values"], strict=True))
    for line in lines:
        line.points.sort()
    return lines


def number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.4g}"


def graph(lines: list[Line], thresholds: list[dict], start: datetime, end: datetime) -> str:
    top = max([1.0, *(v for line in lines for _, v in line.points)])
    top = max([top, *(float(t["value"]) for t in thresholds)])
    span = (end - start).total_seconds()

    def x(moment: datetime) -> float:
        return LEFT + (WIDTH - LEFT) * (moment - start).total_seconds() / span

    def y(value: float) -> float:
        return TOP + (HEIGHT - BOTTOM - TOP) * (1 - float(value) / top)

    parts = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f'<line class="axis" x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH}" y2="{y(0):.1f}"/>',
        f'<text x="{LEFT - 4}" y="{y(top) + 8:.1f}" text-anchor="end">{number(top)}</text>',
        f'<text x="{LEFT - 4}" y="{y(0):.1f}" text-anchor="end">0</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 4}">{start:%H:%M}</text>',
        f'<text x="{WIDTH}" y="{HEIGHT - 4}" text-anchor="end">{end:%H:%M} UTC</text>',
    ]
    for threshold in thresholds:
        value, label = float(threshold["value"]), html.escape(threshold.get("label", ""))
        parts.append(
            f'<line class="threshold" data-value="{number(value)}" x1="{LEFT}" '
            f'y1="{y(value):.1f}" x2="{WIDTH}" y2="{y(value):.1f}"/>'
            f'<text class="threshold" x="{WIDTH - 2}" y="{y(value) - 3:.1f}" text-anchor="end">'
            f"{label} &gt; {number(value)}</text>"
        )
    for index, line in enumerate(lines):
        color = COLORS[index % len(COLORS)]
        label = html.escape(line.label)
        coordinates = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in line.points)
        parts.append(f'<polyline fill="none" stroke="{color}" points="{coordinates}"/>')
        parts.extend(
            f'<circle r="2" fill="{color}" cx="{x(t):.1f}" cy="{y(v):.1f}" data-metric="{label}" '
            f'data-time="{t.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" data-value="{number(v)}">'
            f"<title>{label} {t.astimezone(UTC):%H:%M} UTC: {number(v)}</title></circle>"
            for t, v in line.points
        )
    parts.append("</svg>")
    return "".join(parts)


def grid(widget: dict, key: str) -> int:
    """The widget's x, y, width or height: a whole number (it goes into the page's style)."""
    value = widget[key]
    if isinstance(value, bool) or not isinstance(value, int):
        title = widget.get("properties", {}).get("title", "")
        raise OpsError(f"dashboard widget {title!r}: {key} {value!r} is not a whole number")
    return value


def widget_html(cloudwatch: Any, widget: dict, start: datetime, end: datetime) -> str:
    properties = widget["properties"]
    title = html.escape(properties.get("title", ""))
    x, y, width, height = (grid(widget, key) for key in ("x", "y", "width", "height"))
    place = f"grid-column: {x + 1} / span {width}; grid-row: {y + 1} / span {height}"
    if widget["type"] != "metric":
        return (
            f'<section class="widget" style="{place}" data-title="{title}"><h2>{title}</h2>'
            f"<p>a {html.escape(widget['type'])} widget: drawn in the CloudWatch console only</p>"
            "</section>"
        )
    lines = metric_lines(cloudwatch, properties, start, end)
    thresholds = properties.get("annotations", {}).get("horizontal", [])
    legend = "".join(
        f'<li data-metric="{html.escape(line.label)}" data-stat="{html.escape(line.stat)}" '
        f'data-value="{"" if line.figure is None else number(line.figure)}">'
        f'<span class="swatch" style="background: {COLORS[i % len(COLORS)]}"></span>'
        f"{html.escape(line.label)}: "
        + (
            "no data"
            if line.figure is None
            else f"<b>{number(line.figure)}</b> ({html.escape(line.stat)})"
        )
        + "</li>"
        for i, line in enumerate(lines)
    )
    return (
        f'<section class="widget" style="{place}" data-title="{title}"><h2>{title}</h2>'
        f"{graph(lines, thresholds, start, end)}<ul>{legend}</ul></section>"
    )


STYLE = """
body { font: 13px sans-serif; margin: 12px; color: #222; }
main { display: grid; grid-template-columns: repeat(24, 1fr); grid-auto-rows: 48px; gap: 8px; }
.widget { border: 1px solid #ccc; padding: 4px 8px; overflow: hidden; }
h1 { font-size: 16px; } h2 { font-size: 13px; margin: 2px 0; }
svg { width: 100%; height: 60%; } svg text { font-size: 9px; fill: #555; }
.axis { stroke: #999; } line.threshold { stroke: #d62728; stroke-dasharray: 4 3; }
text.threshold { fill: #d62728; }
ul { list-style: none; margin: 0; padding: 0; font-size: 11px; }
.swatch { display: inline-block; width: 8px; height: 8px; margin-right: 4px; }
"""


def page(stack: Stack, now: datetime | None = None) -> str:
    """The whole page, drawn from what CloudWatch answers now."""
    cloudwatch = stack.client("cloudwatch")
    name = dashboard_name(stack)
    body = json.loads(cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"])
    end = now or datetime.now(UTC)
    start = end - time_range(body)
    widgets = "".join(widget_html(cloudwatch, w, start, end) for w in body["widgets"])
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        f"<title>{html.escape(name)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(name)} (stack {html.escape(stack.name)}, "
        f"fan-out {html.escape(stack.fan_out)})"
        f" - {start:%H:%M} to {end:%H:%M:%S} UTC, reloads every {REFRESH_SECONDS} s</h1>"
        f"<main>{widgets}</main></body></html>"
    )


def host_name(host: str) -> str:
    """The name a Host header addresses, without its port, in lower case."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8050
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def server(stack: Stack, port: int) -> ThreadingHTTPServer:
    """The page's server on 127.0.0.1:``port`` (0: a free one), not yet serving."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = host_name(self.headers.get("Host", ""))
            if name not in LOCAL_NAMES:  # DNS rebinding: another site's name, resolved here
                own = self.server.server_address[1]
                reason = f"Host {name!r} is not this dashboard's (open http://127.0.0.1:{own}/)\n"
                self.answer(HTTPStatus.FORBIDDEN, "text/plain", reason)
                return
            if self.path != "/":
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            try:
                status, text = HTTPStatus.OK, page(stack)
            except (ClientError, BotoCoreError, OpsError) as error:
                status = HTTPStatus.BAD_GATEWAY
                text = f"<!DOCTYPE html><p>the stack did not answer: {html.escape(str(error))}</p>"
            self.answer(status, "text/html", text)

        def answer(self, status: HTTPStatus, media_type: str, text: str) -> None:
            content = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", f"{media_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(content)))
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a reload every few seconds is no news."""

    try:
        return ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as error:
        raise OpsError(
            f"cannot listen on 127.0.0.1:{port} ({error.strerror}): try --port"
        ) from None


def serve(stack: Stack, port: int) -> tuple[dict[str, Any], str, bool]:
    """Serve the page on 127.0.0.1:``port`` until interrupted (Ctrl-C)."""
    listening = server(stack, port)
    url = f"http://127.0.0.1:{listening.server_address[1]}/"
    print(f"dashboard of stack {stack.name} at {url} (Ctrl-C stops)", flush=True)
    with listening, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the end, not an error
        listening.serve_forever()
    return {"url": url, "stopped": True}, "dashboard stopped", True
