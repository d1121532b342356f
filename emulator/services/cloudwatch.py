"""moto 5.2.6's CloudWatch as the local stack uses it: the metrics store (PutMetricData,
GetMetricData, GetMetricStatistics, ListMetrics answer from moto's backend), the stack's alarms
from CloudFormation and their history (emulator/monitoring evaluates them and writes here).

Gaps of moto closed here:

- moto's CloudFormation knows no ``AWS::CloudWatch::Alarm`` (the resource is skipped):
  ``AlarmModel`` creates the alarm through moto's backend (``Ref`` its name, ``GetAtt Arn``), in
  ``INSUFFICIENT_DATA`` as CloudWatch creates one (moto's put_metric_alarm starts it ``OK``).
- moto answers no ``DescribeAlarmHistory``: ``install()`` adds it, from the history items the
  evaluator records (``record_state_change``), newest first, filtered by name, type and dates.
- ``put_metric_data`` / ``count``: the in-process PutMetricData of the local stack's own metrics
  (moto's validation and store, without an HTTP round trip).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from moto.cloudwatch.models import Alarm, CloudWatchBackend, cloudwatch_backends
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.responses import ActionResult
from moto.core.utils import utcnow

from emulator.core.arns import parse_arn
from emulator.core.values import parse_bool, parse_int
from emulator.services import patching
from emulator.services.cloudformation import StackResource

INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


def backend(account_id: str, region_name: str) -> CloudWatchBackend:
    return cloudwatch_backends[account_id][region_name]


def put_metric_data(
    account_id: str, region_name: str, namespace: str, data: list[dict[str, Any]]
) -> None:
    """PutMetricData in process: ``data`` as the API's MetricData (Timestamp a naive UTC
    datetime, as moto keeps them)."""
    backend(account_id, region_name).put_metric_data(namespace, data)


def count(arn: str, namespace: str, name: str, dimensions: dict[str, str]) -> None:
    """One more of a service's Count metric (e.g. AWS/SNS NumberOfNotificationsFailed) in the
    account and Region of ``arn``, the resource it counts for, now."""
    where = parse_arn(arn)
    put_metric_data(
        where.account,
        where.region,
        namespace,
        [
            {
                "MetricName": name,
                "Value": 1,
                "Unit": "Count",
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Timestamp": utcnow(),
            }
        ],
    )


def record_state_change(alarm: Alarm, old_state: str, data: dict[str, Any]) -> None:
    """A StateUpdate item of DescribeAlarmHistory for the transition the alarm just made."""
    history = alarm.__dict__.setdefault("_history_items", [])
    history.append(
        {
            "AlarmName": alarm.name,
            "AlarmType": "MetricAlarm",
            "Timestamp": alarm.state_updated_timestamp,
            "HistoryItemType": "StateUpdate",
            "HistorySummary": f"Alarm updated from {old_state} to {alarm.state_value}",
            "HistoryData": json.dumps(data),
        }
    )


def history_items(alarm: Alarm) -> list[dict[str, Any]]:
    return list(alarm.__dict__.get("_history_items", ()))


def install() -> None:
    patching.replace(CloudWatchResponse, "describe_alarm_history", _describe_alarm_history)


def _describe_alarm_history(self: CloudWatchResponse) -> ActionResult:
    name = self._get_param("AlarmName")
    item_type = self._get_param("HistoryItemType")
    start: datetime | None = self._get_param("StartDate")
    end: datetime | None = self._get_param("EndDate")
    limit = parse_int(self._get_param("MaxRecords"), 100)
    alarms = self.cloudwatch_backend.alarms
    chosen = [alarms[name]] if name in alarms else [] if name else list(alarms.values())
    items = [item for alarm in chosen for item in history_items(alarm)]
    if item_type:
        items = [i for i in items if i["HistoryItemType"] == item_type]
    if start is not None:
        items = [i for i in items if i["Timestamp"] >= start.replace(tzinfo=None)]
    if end is not None:
        items = [i for i in items if i["Timestamp"] <= end.replace(tzinfo=None)]
    ascending = self._get_param("ScanBy") == "TimestampAscending"
    items.sort(key=lambda i: i["Timestamp"], reverse=not ascending)
    return ActionResult({"AlarmHistoryItems": items[:limit]})


# --- AWS::CloudWatch::Alarm in CloudFormation -----------------------------------------------------
class AlarmModel(StackResource):
    TYPE = "AWS::CloudWatch::Alarm"
    NAME_PROPERTY = "AlarmName"
    ATTRIBUTES = ("Arn",)

    def __init__(self, alarm: Alarm, account_id: str) -> None:
        self.alarm = alarm
        self.account_id = account_id

    @property
    def physical_resource_id(self) -> str:
        return self.alarm.name

    def attributes(self) -> dict[str, Any]:
        return {"Arn": self.alarm.alarm_arn}

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> AlarmModel:
        if properties.get("Metrics"):
            raise ValueError(
                f"{logical_id}: metric math alarms (Metrics) are not evaluated by the local stack"
            )
        alarm = backend(account_id, region_name).put_metric_alarm(
            name=properties.get("AlarmName") or physical_name[:255],
            namespace=properties["Namespace"],
            metric_name=properties["MetricName"],
            comparison_operator=properties["ComparisonOperator"],
            evaluation_periods=int(properties["EvaluationPeriods"]),
            period=int(properties["Period"]),
            threshold=float(properties["Threshold"]),
            statistic=properties.get("Statistic"),  # type: ignore[arg-type]
            extended_statistic=properties.get("ExtendedStatistic"),
            description=properties.get("AlarmDescription", ""),
            dimensions=properties.get("Dimensions") or [],
            alarm_actions=properties.get("AlarmActions") or [],
            ok_actions=properties.get("OKActions") or [],
            insufficient_data_actions=properties.get("InsufficientDataActions") or [],
            datapoints_to_alarm=(
                int(properties["DatapointsToAlarm"]) if "DatapointsToAlarm" in properties else None
            ),
            unit=properties.get("Unit"),
            actions_enabled=parse_bool(properties.get("ActionsEnabled", True)),
            treat_missing_data=properties.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=properties.get("EvaluateLowSampleCountPercentile"),
        )
        alarm.state_value = INSUFFICIENT_DATA
        alarm.state_updated_timestamp = utcnow()
        return cls(alarm, account_id)

    def delete(self, account_id: str, region_name: str) -> None:
        backend(account_id, self.alarm.region_name).delete_alarms([self.alarm.name])
