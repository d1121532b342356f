"""The metrics AWS services publish for a stack, made on the local stack and put into moto's
CloudWatch (services/cloudwatch.py), where GetMetricData and the alarms read them:

- ``AWS/Lambda`` per ``FunctionName``, one datapoint per invocation (``invoked``, the runtime's
  observer): ``Invocations`` 1, ``Errors`` 1 or 0 (a function error, timeout or crash), and
  ``Duration`` in milliseconds. ``IteratorAge`` (milliseconds) per stream batch, from the mapping
  engine (``iterator_age``). A mapping whose MetricsConfig has ``EventCount`` publishes its event
  counts per ``EventSourceMappingUUID`` (``mapping_events``, from the pollers), as "Event source
  mapping metrics" (Lambda developer guide) names them: ``PolledEventCount``,
  ``FilteredOutEventCount``, ``InvokedEventCount``, ``FailedInvokeEventCount``,
  ``DeletedEventCount`` (SQS), ``DroppedEventCount`` and ``OnFailureDestinationDeliveredEventCount``
  (streams). No ``Throttles``: the local runtime never throttles an invocation
  (one beyond the account's concurrency waits for a slot).
- The functions' EMF lines (``logged``, the runtime's observer of their output), as CloudWatch
  Logs extracts them (emf.py); invalid EMF counts in ``AWS/Logs`` ``EMFValidationErrors`` /
  ``EMFParsingErrors`` per ``LogGroup``.
- ``AWS/SQS`` per ``QueueName``, sampled (``sample_queues``) as SQS does each minute:
  ``ApproximateNumberOfMessagesVisible`` and ``ApproximateAgeOfOldestMessage`` (seconds; the
  oldest message in the queue, 0 when it is empty).
- ``AWS/EventBridge/Pipes`` per ``PipeName``, one datapoint per execution (a batch the pipe
  delivers, each retry an execution; ``pipe_executed``, from delivery/pipes.py), as "Monitoring
  Amazon EventBridge Pipes" lists them: ``Invocations`` 1, ``EventCount`` the batch's records,
  ``Duration`` and ``TargetStageDuration`` in milliseconds, ``ExecutionFailed`` and
  ``TargetStageFailed`` 1 or 0 (the pipe has no enrichment stage, its one stage is the target).
  Not published: ``ExecutionThrottled``, ``ExecutionTimeout``, the partial failures (a local
  pipe's batch fails or succeeds as a whole) and ``Concurrency``.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from moto.core.utils import utcnow
from moto.sqs.models import sqs_backends

from emulator.monitoring import emf
from emulator.services import cloudwatch, sqs

if TYPE_CHECKING:
    from emulator.lambda_.workers import FunctionSpec, InvokeResult

log = logging.getLogger("emulator.metrics")


class ServiceMetrics:
    """Puts the services' metrics of one account and Region into moto's CloudWatch."""

    def __init__(self, account_id: str, region: str) -> None:
        self.account_id = account_id
        self.region = region

    def _put(self, namespace: str, data: list[dict[str, Any]]) -> None:
        cloudwatch.put_metric_data(self.account_id, self.region, namespace, data)

    def invoked(self, spec: FunctionSpec, result: InvokeResult) -> None:
        dims = [{"Name": "FunctionName", "Value": spec.function_name}]
        now = utcnow()
        values = (
            ("Invocations", 1, "Count"),
            ("Errors", int(not result.ok), "Count"),
            ("Duration", result.duration_ms, "Milliseconds"),
        )
        self._put(
            "AWS/Lambda",
            [
                {"MetricName": n, "Value": v, "Unit": u, "Dimensions": dims, "Timestamp": now}
                for n, v, u in values
            ],
        )

    def iterator_age(self, function_name: str, age_ms: float) -> None:
        self._put(
            "AWS/Lambda",
            [
                {
                    "MetricName": "IteratorAge",
                    "Value": max(0.0, age_ms),
                    "Unit": "Milliseconds",
                    "Dimensions": [{"Name": "FunctionName", "Value": function_name}],
                    "Timestamp": utcnow(),
                }
            ],
        )

    def mapping_events(self, uuid: str, counts: dict[str, int]) -> None:
        dims = [{"Name": "EventSourceMappingUUID", "Value": uuid}]
        now = utcnow()
        self._put(
            "AWS/Lambda",
            [
                {"MetricName": n, "Value": v, "Unit": "Count", "Dimensions": dims, "Timestamp": now}
                for n, v in counts.items()
            ],
        )

    def pipe_executed(self, pipe_name: str, events: int, ok: bool, duration_ms: float) -> None:
        dims = [{"Name": "PipeName", "Value": pipe_name}]
        now = utcnow()
        failed = int(not ok)
        values = (
            ("Invocations", 1, "None"),
            ("EventCount", events, "None"),
            ("Duration", duration_ms, "Milliseconds"),
            ("TargetStageDuration", duration_ms, "Milliseconds"),
            ("ExecutionFailed", failed, "None"),
            ("TargetStageFailed", failed, "None"),
        )
        self._put(
            "AWS/EventBridge/Pipes",
            [
                {"MetricName": n, "Value": v, "Unit": u, "Dimensions": dims, "Timestamp": now}
                for n, v, u in values
            ],
        )

    def logged(self, spec: FunctionSpec, line: bytes) -> None:
        try:
            extracted = emf.extract(line)
        except emf.InvalidEmf as invalid:
            log.warning("metrics: %s: invalid EMF, no metrics: %s", spec.logical_id, invalid)
            self._put(
                "AWS/Logs",
                [
                    {
                        "MetricName": invalid.metric,
                        "Value": 1,
                        "Unit": "Count",
                        "Dimensions": [
                            {"Name": "LogGroup", "Value": f"/aws/lambda/{spec.function_name}"}
                        ],
                        "Timestamp": utcnow(),
                    }
                ],
            )
            return
        for metrics in extracted:
            if metrics.metric_data:
                self._put(metrics.namespace, metrics.metric_data)

    def sample_queues(self, stamp: datetime) -> None:
        now_ms = time.time() * 1000
        for queue in list(sqs_backends[self.account_id][self.region].queues.values()):
            sent = sqs.oldest_sent_ms(queue)
            age = 0 if sent is None else max(0, int((now_ms - sent) / 1000))
            dims = [{"Name": "QueueName", "Value": queue.name}]
            self._put(
                "AWS/SQS",
                [
                    {
                        "MetricName": "ApproximateNumberOfMessagesVisible",
                        "Value": queue.approximate_number_of_messages,
                        "Unit": "Count",
                        "Dimensions": dims,
                        "Timestamp": stamp,
                    },
                    {
                        "MetricName": "ApproximateAgeOfOldestMessage",
                        "Value": age,
                        "Unit": "Seconds",
                        "Dimensions": dims,
                        "Timestamp": stamp,
                    },
                ],
            )
