"""CloudWatch metric alarms evaluated on the local stack (CloudWatch user guide, "Using Amazon
CloudWatch alarms": evaluating an alarm, configuring how alarms treat missing data).

``decide`` is the state machine, pure: the alarm's last ``EvaluationPeriods`` datapoints (one
statistic per period, None for a period without data), its ``DatapointsToAlarm`` (M of N),
``ComparisonOperator``, ``Threshold`` and ``TreatMissingData`` give the next state:

- ``breaching`` / ``notBreaching``: a missing period counts as breaching / not breaching;
- ``missing`` (the default) / ``ignore``: missing periods are left out; with none at all the
  alarm goes to INSUFFICIENT_DATA (``missing``) or keeps its state (``ignore``); with fewer
  datapoints than M, all of them breaching, it goes to ALARM (``missing``) or keeps its state
  (``ignore``), as the guide's table of M-of-N outcomes shows.
- ALARM when at least M of the N are breaching, otherwise OK.

The evaluation range is exactly N periods (CloudWatch may look a few periods further back when
data is missing; the local stack does not).

``AlarmEvaluator`` runs it over every alarm moto holds (services/cloudwatch.py), with the
statistic of each period computed from the metrics store, records each transition (StateValue,
StateReason, StateReasonData, DescribeAlarmHistory) and publishes the alarm's actions for the
new state (AlarmActions, OKActions, InsufficientDataActions: SNS topics) with CloudWatch's alarm
notification JSON.
"""

from __future__ import annotations

import json
import logging
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from moto.cloudwatch.models import Alarm, MetricAggregatedDatum, MetricDatum
from moto.core.utils import utcnow

from emulator.services import cloudwatch

log = logging.getLogger("emulator.alarms")

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", cloudwatch.INSUFFICIENT_DATA
COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (operator.gt, "greater than"),
    "GreaterThanOrEqualToThreshold": (operator.ge, "greater than or equal to"),
    "LessThanThreshold": (operator.lt, "less than"),
    "LessThanOrEqualToThreshold": (operator.le, "less than or equal to"),
}
STATISTICS = ("Sum", "Average", "Minimum", "Maximum", "SampleCount")
REGION_NAMES = {"us-east-1": "US East (N. Virginia)"}  # the alarm message's Region (samconfig's)
# Datapoints kept, in real time: the longest range of the template's alarms at time factor 1 is
# 25 minutes (5 periods of 300 s).
RETENTION = timedelta(minutes=30)


@dataclass(frozen=True)
class Rule:
    """What decides an alarm's state, from its configuration."""

    comparison: str
    threshold: float
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: str = "missing"

    @classmethod
    def of(cls, alarm: Alarm) -> Rule:
        if alarm.comparison_operator not in COMPARISONS:
            raise ValueError(f"{alarm.name}: {alarm.comparison_operator} is not evaluated locally")
        periods = int(alarm.evaluation_periods)
        return cls(
            alarm.comparison_operator,
            float(alarm.threshold),
            periods,
            int(alarm.datapoints_to_alarm or periods),
            alarm.treat_missing_data or "missing",
        )

    def breaches(self, value: float) -> bool:
        return COMPARISONS[self.comparison][0](value, self.threshold)


@dataclass(frozen=True)
class Decision:
    state: str
    reason: str


def decide(rule: Rule, datapoints: list[float | None], current: str) -> Decision:
    """The next state from the last N periods' datapoints (oldest first, None: no data)."""
    words = COMPARISONS[rule.comparison][1]
    m, n = rule.datapoints_to_alarm, len(datapoints)
    present = [v for v in datapoints if v is not None]
    missing = n - len(present)
    substitute = {"breaching": True, "notBreaching": False}.get(rule.treat_missing_data)
    if substitute is None and not present:
        if rule.treat_missing_data == "ignore":
            return Decision(current, "no datapoints: the state is kept (ignore)")
        return Decision(
            INSUFFICIENT_DATA,
            f"Insufficient Data: {n} datapoint{_s(n)} were unknown.",
        )
    breaching = sum(rule.breaches(v) for v in present)
    if substitute:
        breaching += missing
    shown = _shown(present)
    if breaching >= m:
        return Decision(
            ALARM,
            f"Threshold Crossed: {breaching} out of the last {n} datapoints {shown} "
            f"{'was' if breaching == 1 else 'were'} {words} the threshold "
            f"({rule.threshold}) (minimum {m} datapoint{_s(m)} for OK -> ALARM transition)."
            + _treated(missing, substitute),
        )
    if substitute is None and len(present) < m and breaching == len(present):
        if rule.treat_missing_data == "ignore":
            return Decision(current, "too few datapoints, all breaching: the state is kept")
        return Decision(
            ALARM,
            f"Threshold Crossed: {breaching} of {len(present)} datapoints {shown} "
            f"{'was' if breaching == 1 else 'were'} {words} the threshold ({rule.threshold}) "
            f"and {missing} period{_s(missing)} had no data.",
        )
    not_breaching = n - breaching
    return Decision(
        OK,
        f"Threshold Crossed: {not_breaching} datapoint{_s(not_breaching)} {shown} "
        f"{'was' if not_breaching == 1 else 'were'} not {words} the threshold "
        f"({rule.threshold})." + _treated(missing, substitute),
    )


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _shown(values: list[float]) -> str:
    return "[" + ", ".join(str(float(v)) for v in reversed(values)) + "]"


def _treated(missing: int, substitute: bool | None) -> str:
    if substitute is None or not missing:
        return ""
    kind = "Breaching" if substitute else "NonBreaching"
    verb = "was" if missing == 1 else "were"
    return f" {missing} missing datapoint{_s(missing)} {verb} treated as [{kind}]."


def statistic(name: str, data: list[Any]) -> float | None:
    """``name`` (Sum, Average, Minimum, Maximum, SampleCount) of moto's datums of one period."""
    if not data:
        return None
    singles = [d.value for d in data if isinstance(d, MetricDatum)]
    sets = [d for d in data if isinstance(d, MetricAggregatedDatum)]
    count = len(singles) + sum(s.sample_count for s in sets)
    total = sum(singles) + sum(s.sum for s in sets)
    if name == "Sum":
        return total
    if name == "SampleCount":
        return count
    if name == "Average":
        return total / count if count else None
    if name == "Maximum":
        return max([*singles, *(s.max for s in sets)])
    if name == "Minimum":
        return min([*singles, *(s.min for s in sets)])
    raise ValueError(f"statistic {name} is not evaluated locally")


class AlarmEvaluator:
    """Evaluates every metric alarm of one account and Region against moto's metrics store.

    ``time_factor``: CloudWatch seconds per real second (a 60 s period lasts 60 / time_factor
    real seconds); ``publish(topic_arn, subject, message)`` sends an alarm action."""

    def __init__(
        self,
        account_id: str,
        region: str,
        time_factor: float,
        publish: Callable[[str, str, str], None],
    ) -> None:
        self.account_id = account_id
        self.region = region
        self.time_factor = time_factor
        self.publish = publish
        # (evaluation time, how many datums the store held then): what arrived since a time
        self._marks: deque[tuple[datetime, int]] = deque()

    def evaluate_all(self, now: datetime | None = None) -> None:
        now = now or utcnow()
        store = cloudwatch.backend(self.account_id, self.region)
        data = store.metric_data
        self._expire(data, now - RETENTION)
        self._marks.append((now, len(data)))
        alarms = [a for a in list(store.alarms.values()) if a.rule is None]
        if not alarms:
            return
        lookback = max(self._length(a) * int(a.evaluation_periods) for a in alarms)
        recent: dict[tuple, list[Any]] = {}
        for datum in data[self._arrived_since(now - lookback) :]:
            recent.setdefault(_metric_key(datum), []).append(datum)
        for alarm in alarms:
            try:
                self.evaluate(alarm, recent.get(_metric_key(alarm), []), now)
            except ValueError as exc:  # a setting the local stack does not evaluate: said once
                if not alarm.__dict__.get("_refused"):
                    alarm.__dict__["_refused"] = True
                    log.warning("alarms: %s", exc)

    def _arrived_since(self, since: datetime) -> int:
        """The index in the store from which every datum arrived after ``since`` (the store
        appends in arrival order; a datum that arrived earlier but is stamped later, an EMF
        line's own timestamp, is in no period evaluated now, as CloudWatch evaluates no
        period twice)."""
        while len(self._marks) > 1 and self._marks[1][0] <= since:
            self._marks.popleft()
        first_time, first_count = self._marks[0]
        return first_count if first_time <= since else 0

    def _expire(self, data: list[Any], before: datetime) -> None:
        """The local store keeps RETENTION of datapoints (CloudWatch: 15 days): the oldest
        arrivals, stamped before ``before``, are dropped."""
        gone = 0
        while gone < len(data) and data[gone].timestamp < before:
            gone += 1
        if gone:
            del data[:gone]
            self._marks = deque((t, max(0, count - gone)) for t, count in self._marks)

    def _length(self, alarm: Alarm) -> timedelta:
        return timedelta(seconds=int(alarm.period) / self.time_factor)

    def evaluate(self, alarm: Alarm, recent: list[Any], now: datetime) -> None:
        """``recent``: the datums of the alarm's metric (namespace, name, dimensions)."""
        rule = Rule.of(alarm)
        name = alarm.statistic
        if name not in STATISTICS:
            shown = name or alarm.extended_statistic
            raise ValueError(f"{alarm.name}: statistic {shown} is not evaluated locally")
        length = self._length(alarm)
        mine = [d for d in recent if not alarm.unit or d.unit == alarm.unit]
        # The N periods ending now, each (start, start + length]: the sample taken this minute
        # is in the last one.
        starts = [now - length * (k + 1) for k in reversed(range(rule.evaluation_periods))]
        values = [
            statistic(name, [d for d in mine if start < d.timestamp <= start + length])
            for start in starts
        ]
        decision = decide(rule, values, alarm.state_value)
        if decision.state == alarm.state_value:
            return
        old = alarm.state_value
        reason_data = {
            "version": "1.0",
            "queryDate": _iso(now),
            "startDate": _iso(starts[0]),
            "statistic": name,
            "period": int(alarm.period),
            "recentDatapoints": [v for v in values if v is not None],
            "threshold": rule.threshold,
        }
        alarm.update_state(decision.reason, json.dumps(reason_data), decision.state)
        cloudwatch.record_state_change(
            alarm,
            old,
            {
                "version": "1.0",
                "oldState": {"stateValue": old},
                "newState": {
                    "stateValue": decision.state,
                    "stateReason": decision.reason,
                    "stateReasonData": reason_data,
                },
            },
        )
        log.info("alarms: %s %s -> %s", alarm.name, old, decision.state)
        actions = {
            ALARM: alarm.alarm_actions,
            OK: alarm.ok_actions,
            INSUFFICIENT_DATA: alarm.insufficient_data_actions,
        }[decision.state]
        if alarm.actions_enabled:
            for arn in actions:
                self._notify(arn, alarm, old, rule)

    def _notify(self, topic_arn: str, alarm: Alarm, old: str, rule: Rule) -> None:
        region = REGION_NAMES.get(self.region, self.region)
        message = {
            "AlarmName": alarm.name,
            "AlarmDescription": alarm.description or None,
            "AWSAccountId": self.account_id,
            "AlarmConfigurationUpdatedTimestamp": _iso(alarm.configuration_updated_timestamp),
            "NewStateValue": alarm.state_value,
            "NewStateReason": alarm.state_reason,
            "StateChangeTime": _iso(alarm.state_updated_timestamp),
            "Region": region,
            "AlarmArn": alarm.alarm_arn,
            "OldStateValue": old,
            "OKActions": list(alarm.ok_actions),
            "AlarmActions": list(alarm.alarm_actions),
            "InsufficientDataActions": list(alarm.insufficient_data_actions),
            "Trigger": {
                "MetricName": alarm.metric_name,
                "Namespace": alarm.namespace,
                "StatisticType": "Statistic",
                "Statistic": str(alarm.statistic).upper(),
                "Unit": alarm.unit,
                "Dimensions": [{"value": d.value, "name": d.name} for d in alarm.dimensions],
                "Period": int(alarm.period),
                "EvaluationPeriods": rule.evaluation_periods,
                "DatapointsToAlarm": rule.datapoints_to_alarm,
                "ComparisonOperator": rule.comparison,
                "Threshold": rule.threshold,
                "TreatMissingData": alarm.treat_missing_data or "",
                "EvaluateLowSampleCountPercentile": "",
            },
        }
        subject = f'{alarm.state_value}: "{alarm.name}" in {region}'
        try:
            self.publish(topic_arn, subject[:100], json.dumps(message))
        except Exception as exc:  # an action that fails is CloudWatch's to log, not to raise
            log.warning("alarms: %s could not notify %s: %s", alarm.name, topic_arn, exc)


def _metric_key(item: Any) -> tuple:
    """What identifies a metric, of a datum or an alarm: namespace, name, dimensions."""
    name = getattr(item, "metric_name", None) or item.name
    dimensions = frozenset((d.name, d.value) for d in item.dimensions)
    return (item.namespace, name, dimensions)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"
