"""ContactsDashboard as each fan-out mode deploys it: the SAM-translated template, its body's
intrinsics resolved (Ref and GetAtt to placeholders such as <IngestFunction> and
<IngestDeadLetterQueue.QueueName>, the alarms' dimensions resolved the same way), parsed as JSON.

Every dead-letter queue and every function of the mode has its widget, and every alarm of the
mode has its metric drawn with its statistic and period and its threshold as an annotation."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest

from emulator.deploy.rules import chosen, template_conditions
from emulator.deploy.translate import load_template, translate
from emulator.process import REGION
from harness import ROOT
from ops.fan_out import NAMES as FAN_OUT_MODES

TEMPLATE = load_template(ROOT / "template.yaml")
MAPPINGS = TEMPLATE["Mappings"]
STACK_NAME = "stack"


@cache
def deployed(mode: str) -> tuple[dict[str, dict], dict[str, bool]]:
    """The resources a stack of that mode creates (translated), and its conditions."""
    parameters = {
        name: str(spec.get("Default", "")) for name, spec in TEMPLATE["Parameters"].items()
    }
    parameters["FanOut"] = mode
    translated = translate(TEMPLATE, {"FanOut": mode}, REGION)
    conditions = template_conditions(translated, parameters)
    resources = {
        name: chosen(resource, conditions)
        for name, resource in translated["Resources"].items()
        if conditions.get(resource.get("Condition"), True)
    }
    return resources, conditions


def resolved(value: Any, conditions: dict[str, bool]) -> Any:
    """The value with its intrinsics evaluated; resources stand for themselves as placeholders."""
    value = chosen(value, conditions)
    if isinstance(value, list):
        return [resolved(item, conditions) for item in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return placeholder(value["Ref"])
    if "Fn::GetAtt" in value:
        return placeholder(".".join(value["Fn::GetAtt"]))
    if "Fn::FindInMap" in value:
        mapping, top, second = value["Fn::FindInMap"]
        return MAPPINGS[mapping][top][second]
    if "Fn::Join" in value:
        delimiter, items = value["Fn::Join"]
        return delimiter.join(str(resolved(item, conditions)) for item in items)
    if "Fn::Sub" in value:
        text, variables = (
            value["Fn::Sub"] if isinstance(value["Fn::Sub"], list) else (value["Fn::Sub"], {})
        )
        variables = {k: resolved(v, conditions) for k, v in variables.items()}
        return re.sub(
            r"\$\{([^}]+)\}",
            lambda m: str(variables[m[1]] if m[1] in variables else placeholder(m[1])),
            text,
        )
    return {key: resolved(item, conditions) for key, item in value.items()}


def placeholder(name: str) -> str:
    return {"AWS::Region": REGION, "AWS::StackName": STACK_NAME}.get(name, f"<{name}>")


def of_type(resources: dict[str, dict], resource_type: str) -> dict[str, dict]:
    return {k: v for k, v in resources.items() if v["Type"] == resource_type}


def dashboard(mode: str) -> dict:
    resources, conditions = deployed(mode)
    [body] = [
        resolved(r["Properties"]["DashboardBody"], conditions)
        for r in of_type(resources, "AWS::CloudWatch::Dashboard").values()
    ]
    return json.loads(body)


def drawn(mode: str) -> list[dict]:
    """Every metric line of the dashboard: namespace, name, dimensions, its statistic and period,
    and the horizontal annotations of its widget."""
    lines = []
    for widget in dashboard(mode)["widgets"]:
        properties = widget["properties"]
        for metric in properties["metrics"]:
            options = metric[-1] if isinstance(metric[-1], dict) else {}
            namespace, name, *pairs = metric[:-1] if options else metric
            lines.append(
                {
                    "metric": (namespace, name, dict(zip(pairs[::2], pairs[1::2], strict=True))),
                    "stat": options.get("stat", properties["stat"]),
                    "period": options.get("period", properties["period"]),
                    "annotations": [
                        a["value"] for a in properties.get("annotations", {}).get("horizontal", [])
                    ],
                    "title": properties["title"],
                }
            )
    return lines


def drawn_metrics(mode: str) -> set[tuple[str, str, frozenset]]:
    return {
        (ns, name, frozenset(dims.items())) for ns, name, dims in (m["metric"] for m in drawn(mode))
    }


def dead_letter_queues(mode: str) -> set[str]:
    """The mode's queues no event source mapping reads: dead letters and failure records."""
    resources, _ = deployed(mode)
    read = {
        mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]
        for mapping in of_type(resources, "AWS::Lambda::EventSourceMapping").values()
    }
    return set(of_type(resources, "AWS::SQS::Queue")) - read


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_the_body_is_a_dashboard_of_widgets_that_do_not_overlap(mode):
    body = dashboard(mode)
    cells: dict[tuple[int, int], str] = {}
    for widget in body["widgets"]:
        assert widget["type"] == "metric", widget
        assert widget["properties"]["region"] == REGION
        assert widget["x"] + widget["width"] <= 24, widget["properties"]["title"]
        for x in range(widget["x"], widget["x"] + widget["width"]):
            for y in range(widget["y"], widget["y"] + widget["height"]):
                title = widget["properties"]["title"]
                assert (x, y) not in cells, f"{title} overlaps {cells[(x, y)]}"
                cells[(x, y)] = title


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_every_dead_letter_queue_of_the_mode_has_its_depth_drawn(mode):
    queues = dead_letter_queues(mode)
    assert "IngestDeadLetterQueue" in queues and "StreamFailureQueue" in queues
    depths = {
        dims["QueueName"]
        for ns, name, dims in (m["metric"] for m in drawn(mode))
        if (ns, name) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    }
    assert depths == {f"<{queue}.QueueName>" for queue in queues}


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_every_function_of_the_mode_has_its_errors_and_throttles_drawn(mode):
    resources, _ = deployed(mode)
    functions = of_type(resources, "AWS::Lambda::Function")
    assert "IngestFunction" in functions
    assert ("RouterFunction" in functions) == (mode == "router")
    metrics = drawn_metrics(mode)
    for function in functions:
        for name in ("Errors", "Throttles"):
            dimension = frozenset({("FunctionName", f"<{function}>")})
            assert ("AWS/Lambda", name, dimension) in metrics, f"{function} {name}"


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_every_alarm_of_the_mode_is_drawn_with_its_threshold(mode):
    resources, conditions = deployed(mode)
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert len(alarms) > 10
    lines = drawn(mode)
    for name, alarm in alarms.items():
        properties = resolved(alarm["Properties"], conditions)
        metric = (
            properties["Namespace"],
            properties["MetricName"],
            {d["Name"]: d["Value"] for d in properties["Dimensions"]},
        )
        widgets = [line for line in lines if line["metric"] == metric]
        assert widgets, f"{name}: {metric} is on no widget"
        [line] = widgets
        assert (line["stat"], line["period"]) == (properties["Statistic"], properties["Period"]), (
            name
        )
        assert properties["Threshold"] in line["annotations"], f"{name} on {line['title']}"


def test_each_alarm_reads_its_threshold_from_the_mapping_the_dashboard_draws():
    for name, resource in TEMPLATE["Resources"].items():
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            threshold = resource["Properties"]["Threshold"]
            assert set(threshold) == {"Fn::FindInMap"}, name
            assert threshold["Fn::FindInMap"][0] == "AlarmThresholds", name


@pytest.mark.parametrize("mode", FAN_OUT_MODES)
def test_the_stack_outputs_the_dashboards_console_url(mode):
    resources, conditions = deployed(mode)
    [dashboard_id] = of_type(resources, "AWS::CloudWatch::Dashboard")
    url = resolved(TEMPLATE["Outputs"]["DashboardUrl"]["Value"], conditions)
    assert url == (
        f"https://{REGION}.console.aws.amazon.com/cloudwatch/home?region={REGION}"
        f"#dashboards:name=<{dashboard_id}>"
    )
