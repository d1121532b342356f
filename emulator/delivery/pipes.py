"""EventBridge Pipes that run: a DynamoDB stream source, its filters, an event bus, SNS topic or
Express state machine target (moto's pipes validated and in CloudFormation:
emulator/services/pipes.py).

- ``pipe_mappings``: each pipe as an event-source mapping configuration, so the engine
  (emulator/delivery/engine.py) polls its stream with the stream pollers Lambda mappings use
  (emulator/delivery/stream_poller.py: shards, StartingPosition, BatchSize, batching window,
  ``FilterCriteria`` with emulator/core/filters.py, MaximumRetryAttempts, MaximumRecordAgeInSeconds,
  ``OnPartialBatchItemFailure: AUTOMATIC_BISECT``, ParallelizationFactor, DeadLetterConfig as the
  OnFailure destination). A pipe runs while its desired state is RUNNING (StopPipe pauses it, it
  resumes from its checkpoint).
- ``PipeTarget``: what the pollers "invoke" for a pipe: each record of the batch, as Pipes passes
  it on (``eventID``, ``eventName``, ``eventVersion``, ``eventSource``, ``awsRegion``,
  ``dynamodb`` (Keys, NewImage, OldImage, SequenceNumber, SizeBytes, StreamViewType,
  ApproximateCreationDateTime) and ``eventSourceARN``), delivered in process to the target's moto
  backend:
  - an event bus: one PutEvents entry per record (whose rules emulator/services/events.py
    delivers), the record as ``Detail``; ``Source`` defaults to ``Pipe <pipe name>``,
    ``DetailType`` to ``Event from aws:dynamodb``, ``Resources`` to ``[]`` (what Pipes sends
    without ``EventBridgeEventBusParameters``);
  - an SNS topic: one message per record (Pipes uses PublishBatch), the record's JSON as the
    message, no attributes (Pipes has no SNS target parameters); the topic's subscriptions
    filter and deliver it (emulator/services/sns_filter_policies.py, delivery_failures.py);
  - an Express state machine (InvocationType REQUEST_RESPONSE): one StartSyncExecution per batch,
    its input the JSON array of the batch's records (an array even for one record), run to its
    end (emulator/services/stepfunctions.py); an execution that does not succeed fails the
    batch with its error and cause.
  Each delivery is decided first with the pipe's execution role and the target's policy
  (emulator/iam/resources.py ``role_may``: ``events:PutEvents`` on the bus, ``sns:Publish`` on
  the topic, ``states:StartSyncExecution`` on the machine); a refusal is an
  AccessDeniedException. A batch whose delivery fails (a refusal, an error, any entry with an
  ErrorCode, a failed execution) fails as a whole and is retried as a Lambda batch is;
  once the retries or the record age run out it goes to the DeadLetterConfig queue or topic
  (Lambda's OnFailure record, with the pipe's ARN as ``functionArn``), or is logged as dropped.
  Each execution (a batch, each retry) is counted in the pipe's metrics, ``ExecutionFailed``
  among them (monitoring/service_metrics.py ``pipe_executed``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from moto.events.models import events_backends
from moto.pipes.models import Pipe, pipes_backends
from moto.sns.models import sns_backends

from emulator.core.arns import service_of
from emulator.core.values import parse_int
from emulator.delivery.mappings import MappingConfig
from emulator.iam.policy import Request
from emulator.iam.resources import role_may
from emulator.lambda_.workers import InvokeResult
from emulator.monitoring.service_metrics import ServiceMetrics
from emulator.services.stepfunctions import start_sync_execution

PIPE_MAPPING_PREFIX = "pipe:"  # MappingConfig.uuid of a pipe: "pipe:<name>"
BATCH_LIMIT = 10  # entries per PutEvents or PublishBatch call
# what the pipe's role must be allowed on its target, by the target's service
DELIVERY_ACTIONS = {
    "events": "events:PutEvents",
    "sns": "sns:Publish",
    "states": "states:StartSyncExecution",
}


# --- pipes as event-source mappings --------------------------------------------------------------
def is_pipe(config: MappingConfig) -> bool:
    return config.uuid.startswith(PIPE_MAPPING_PREFIX)


def mapping_config(pipe: Pipe) -> MappingConfig:
    """A pipe as the stream pollers see a mapping (its ARN in place of a function's)."""
    params = pipe.source_parameters or {}
    stream = params.get("DynamoDBStreamParameters") or {}
    return MappingConfig(
        uuid=f"{PIPE_MAPPING_PREFIX}{pipe.name}",
        function_arn=pipe.arn,
        source_arn=pipe.source,
        kind="dynamodb",
        enabled=pipe.desired_state == "RUNNING",
        batch_size=max(1, parse_int(stream.get("BatchSize"), 1)),
        window=float(parse_int(stream.get("MaximumBatchingWindowInSeconds"), 0)),
        filter_criteria=params.get("FilterCriteria") or None,
        report_failures=False,
        bisect=stream.get("OnPartialBatchItemFailure") == "AUTOMATIC_BISECT",
        max_retry=parse_int(stream.get("MaximumRetryAttempts"), -1),
        max_age=parse_int(stream.get("MaximumRecordAgeInSeconds"), -1),
        on_failure=(stream.get("DeadLetterConfig") or {}).get("Arn") or None,
        starting_position=stream.get("StartingPosition") or "LATEST",
        parallelization=min(10, max(1, parse_int(stream.get("ParallelizationFactor"), 1))),
    )


def pipe_mappings(account_id: str, region: str) -> list[MappingConfig]:
    """Every pipe moto holds for the account and region, as a mapping configuration."""
    backend = pipes_backends[account_id][region]
    return [mapping_config(pipe) for pipe in list(backend.pipes.values())]


class PipeTarget:
    """The pollers' invoker for pipes: ``invoke(<pipe ARN>, {"Records": [...]})`` delivers each
    record to the pipe's target bus, topic or state machine (see the module docstring)."""

    def __init__(self, account_id: str, region: str):
        self.account_id = account_id
        self.region = region

    def runnable(self, function_name: str) -> bool:
        return True  # a pipe's target is a service resource, there once the pipe is

    def invoke(self, function_name: str, event: Any) -> InvokeResult:
        """One execution of the pipe, counted in its metrics (ExecutionFailed: the alarm's)."""
        started = time.monotonic()
        name = function_name.rsplit("/", 1)[-1]
        records = json.loads(event)["Records"]
        result = self._execute_batch(name, records, started)
        ServiceMetrics(self.account_id, self.region).pipe_executed(
            name, len(records), result.ok, (time.monotonic() - started) * 1000
        )
        return result

    def _execute_batch(
        self, name: str, records: list[dict[str, Any]], started: float
    ) -> InvokeResult:
        request_id = str(uuid.uuid4())
        pipe = pipes_backends[self.account_id][self.region].pipes.get(name)
        if pipe is None:
            return _failed(request_id, "ResourceNotFoundException", f"pipe {name} not found")
        target_service = service_of(pipe.target)
        # Pipes delivers with the pipe's role: its policies and the target's policy decide
        action = Request(DELIVERY_ACTIONS[target_service], pipe.target)
        decision = role_may(pipe.role_arn, pipe.name, action)
        if not decision.allowed:
            reason = decision.reason(action.action)
            return _failed(request_id, "AccessDeniedException", f"{pipe.role_arn} {reason}")
        try:
            error = self._deliver(pipe, target_service, records)
            if error is not None:
                return _failed(request_id, error.get("ErrorCode"), error.get("ErrorMessage"))
        except Exception as error:
            return _failed(request_id, type(error).__name__, str(error))
        return InvokeResult(
            ok=True,
            payload=None,
            error=None,
            request_id=request_id,
            duration_ms=(time.monotonic() - started) * 1000,
        )

    def _deliver(
        self, pipe: Pipe, target_service: str, records: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The first error the target answers with, None when it took every record."""
        if target_service == "states":
            return self._execute(pipe, records)
        deliver = self._publish if target_service == "sns" else self._put_events
        for start in range(0, len(records), BATCH_LIMIT):
            error = deliver(pipe, records[start : start + BATCH_LIMIT])
            if error is not None:
                return error
        return None

    def _put_events(self, pipe: Pipe, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The first entry's error PutEvents answers with, None when all were put."""
        bus = events_backends[self.account_id][self.region]
        results = bus.put_events([self._entry(pipe, record) for record in records])
        return next((r for r in results if r.get("ErrorCode")), None)

    def _publish(self, pipe: Pipe, records: list[dict[str, Any]]) -> None:
        """Each record published to the topic; an entry that fails raises (moto's PublishBatch
        would drop it unreported), failing the batch."""
        backend = sns_backends[self.account_id][self.region]
        for record in records:
            backend.publish(message=json.dumps(record), arn=pipe.target)

    @staticmethod
    def _execute(pipe: Pipe, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The batch as one synchronous execution; its error and cause unless it succeeded."""
        output = start_sync_execution(pipe.target, json.dumps(records))
        if output["status"] == "SUCCEEDED":
            return None
        return {
            "ErrorCode": output.get("error") or output["status"],
            "ErrorMessage": output.get("cause"),
        }

    @staticmethod
    def _entry(pipe: Pipe, record: dict[str, Any]) -> dict[str, Any]:
        params = (pipe.target_parameters or {}).get("EventBridgeEventBusParameters") or {}
        return {
            "Source": params.get("Source") or f"Pipe {pipe.name}",
            "DetailType": params.get("DetailType") or "Event from aws:dynamodb",
            "Resources": params.get("Resources") or [],
            "Detail": json.dumps(record),
            "EventBusName": pipe.target,
        }


def _failed(request_id: str, error_type: str | None, message: str | None) -> InvokeResult:
    error_type = error_type or "InternalException"
    return InvokeResult(
        ok=False,
        payload=None,
        error={"errorType": error_type, "errorMessage": message or error_type},
        request_id=request_id,
    )
