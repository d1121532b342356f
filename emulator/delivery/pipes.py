"""EventBridge Pipes that run: a DynamoDB stream source, its filters, an event bus target.

moto 5.2.5 stores pipes (CreatePipe, DescribePipe, ListPipes, UpdatePipe, Start/StopPipe,
DeletePipe; moto/pipes/models.py) as RUNNING, but nothing ever reads their source, and its
CloudFormation knows no ``AWS::Pipes::Pipe`` (the resource is skipped). This module:

- ``PipeModel``: ``AWS::Pipes::Pipe`` in CloudFormation, created through moto's pipes backend
  (``Ref`` the pipe's name, ``GetAtt`` Arn / CurrentState / CreationTime / LastModifiedTime, as
  AWS); moto_patches registers it with moto's resource types.
- ``install()``: CreatePipe / UpdatePipe validated before moto stores anything: what the local
  stack does not run is refused with ``ValidationException`` naming it (a source other than a
  DynamoDB stream, a target other than an event bus, an enrichment, an input template, target
  parameters other than ``EventBridgeEventBusParameters`` Source / DetailType / Resources, dynamic
  ``$.`` paths, DynamoDB stream settings outside AWS's ranges), so a stack fails to deploy
  instead of running a pipe that does something else.
- ``pipe_mappings``: each pipe as an event-source mapping configuration, so the engine
  (emulator/delivery/engine.py) polls its stream with the stream pollers Lambda mappings use
  (emulator/delivery/stream_poller.py: shards, StartingPosition, BatchSize, batching window,
  ``FilterCriteria`` with emulator/core/filters.py, MaximumRetryAttempts, MaximumRecordAgeInSeconds,
  ``OnPartialBatchItemFailure: AUTOMATIC_BISECT``, ParallelizationFactor, DeadLetterConfig as the
  OnFailure destination). A pipe runs while its desired state is RUNNING (StopPipe pauses it, it
  resumes from its checkpoint).
- ``EventBusTarget``: what the pollers "invoke" for a pipe: one PutEvents entry per record, to
  the target bus in process (moto's events backend, whose rules emulator/services/events.py
  delivers). ``Source`` defaults to ``Pipe <pipe name>``, ``DetailType`` to
  ``Event from aws:dynamodb``, ``Resources`` to ``[]`` (what Pipes sends without
  ``EventBridgeEventBusParameters``); ``Detail`` is the stream record as Pipes passes it on:
  ``eventID``, ``eventName``, ``eventVersion``, ``eventSource``, ``awsRegion``, ``dynamodb``
  (Keys, NewImage, OldImage, SequenceNumber, SizeBytes, StreamViewType,
  ApproximateCreationDateTime) and ``eventSourceARN``. A batch whose PutEvents fails (an error,
  or any entry with an ErrorCode) fails as a whole and is retried as a Lambda batch is; once the
  retries or the record age run out it goes to the DeadLetterConfig queue or topic (Lambda's
  OnFailure record, with the pipe's ARN as ``functionArn``), or is logged as dropped.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from moto.events.models import events_backends
from moto.pipes.exceptions import ValidationException
from moto.pipes.models import EventBridgePipesBackend, Pipe, pipes_backends

from emulator.core.arns import parse_arn, service_of
from emulator.core.filters import FilterCriteria, InvalidPatternError
from emulator.core.values import parse_int
from emulator.delivery.mappings import MappingConfig, source_kind
from emulator.lambda_.workers import InvokeResult
from emulator.services import patching

PIPE_MAPPING_PREFIX = "pipe:"  # MappingConfig.uuid of a pipe: "pipe:<name>"
PUT_EVENTS_LIMIT = 10  # entries per PutEvents call
_STREAM_SETTINGS = {
    # DynamoDBStreamParameters: (minimum, maximum) as the Pipes API reference gives them
    "BatchSize": (1, 10000),
    "MaximumBatchingWindowInSeconds": (0, 300),
    "MaximumRetryAttempts": (-1, 10000),
    "MaximumRecordAgeInSeconds": (-1, 604800),
    "ParallelizationFactor": (1, 10),
}
_BUS_PARAMETERS = ("Source", "DetailType", "Resources")


def _refuse(message: str) -> None:
    raise ValidationException(message)


def validate_pipe(
    source: str,
    source_parameters: dict[str, Any] | None,
    enrichment: str | None,
    target: str,
    target_parameters: dict[str, Any] | None,
) -> None:
    """Refuse (ValidationException) what AWS refuses or the local stack does not run."""
    if source_kind(source) != "dynamodb":
        _refuse(f"Source {source}: the local stack runs pipes from DynamoDB streams only")
    if service_of(target) != "events" or not parse_arn(target).resource.startswith("event-bus/"):
        _refuse(f"Target {target}: the local stack runs pipes to event buses only")
    if enrichment:
        _refuse("Enrichment is not emulated by the local stack")
    params = source_parameters or {}
    for name in params:
        if name not in ("FilterCriteria", "DynamoDBStreamParameters"):
            _refuse(f"SourceParameters.{name} does not apply to a DynamoDB stream source")
    try:
        FilterCriteria.from_mapping(params.get("FilterCriteria"))
    except InvalidPatternError as error:
        _refuse(f"SourceParameters.{error.path}: {error.problem}")
    _validate_stream_parameters(params.get("DynamoDBStreamParameters") or {})
    _validate_target_parameters(target_parameters or {})


def _validate_stream_parameters(stream: dict[str, Any]) -> None:
    where = "SourceParameters.DynamoDBStreamParameters"
    if stream.get("StartingPosition") not in ("TRIM_HORIZON", "LATEST"):
        _refuse(f"{where}.StartingPosition must be TRIM_HORIZON or LATEST")
    for name, (low, high) in _STREAM_SETTINGS.items():
        if name in stream and not low <= _setting(stream[name], low - 1) <= high:
            _refuse(f"{where}.{name} must be between {low} and {high}, got {stream[name]!r}")
    age = _setting(stream.get("MaximumRecordAgeInSeconds"), -1)
    if 0 <= age < 60:
        _refuse(f"{where}.MaximumRecordAgeInSeconds must be -1 or at least 60, got {age}")
    bisect = stream.get("OnPartialBatchItemFailure")
    if bisect not in (None, "AUTOMATIC_BISECT"):
        _refuse(f"{where}.OnPartialBatchItemFailure must be AUTOMATIC_BISECT, got {bisect!r}")
    dead_letter = (stream.get("DeadLetterConfig") or {}).get("Arn")
    if dead_letter and service_of(dead_letter) not in ("sqs", "sns"):
        _refuse(f"{where}.DeadLetterConfig.Arn must be an SQS queue or SNS topic")
    known = (*_STREAM_SETTINGS, "StartingPosition", "OnPartialBatchItemFailure", "DeadLetterConfig")
    for name in stream:
        if name not in known:
            _refuse(f"{where}.{name} is not emulated by the local stack")


def _setting(value: Any, invalid: int) -> int:
    """An integer setting, ``invalid`` (out of range) when it is not an integer."""
    try:
        return parse_int(value, invalid)
    except ValueError:
        return invalid


def _validate_target_parameters(params: dict[str, Any]) -> None:
    for name in params:
        if name != "EventBridgeEventBusParameters":
            _refuse(f"TargetParameters.{name} is not emulated by the local stack")
    bus = params.get("EventBridgeEventBusParameters") or {}
    for name, value in bus.items():
        where = f"TargetParameters.EventBridgeEventBusParameters.{name}"
        if name not in _BUS_PARAMETERS:
            _refuse(f"{where} is not emulated by the local stack")
        if isinstance(value, str) and value.startswith("$."):
            _refuse(f"{where}: dynamic path parameters are not emulated by the local stack")


def install() -> None:
    original_create = patching.original(EventBridgePipesBackend, "create_pipe")
    original_update = patching.original(EventBridgePipesBackend, "update_pipe")

    def create_pipe(self: EventBridgePipesBackend, **kwargs: Any) -> Pipe:
        validate_pipe(
            kwargs["source"],
            kwargs.get("source_parameters"),
            kwargs.get("enrichment"),
            kwargs["target"],
            kwargs.get("target_parameters"),
        )
        return original_create(self, **kwargs)

    def update_pipe(self: EventBridgePipesBackend, **kwargs: Any) -> Pipe:
        pipe = self.pipes.get(kwargs["name"])
        if pipe is not None:
            validate_pipe(
                pipe.source,
                _or(kwargs.get("source_parameters"), pipe.source_parameters),
                _or(kwargs.get("enrichment"), pipe.enrichment),
                _or(kwargs.get("target"), pipe.target),
                _or(kwargs.get("target_parameters"), pipe.target_parameters),
            )
        return original_update(self, **kwargs)

    patching.replace(EventBridgePipesBackend, "create_pipe", create_pipe)
    patching.replace(EventBridgePipesBackend, "update_pipe", update_pipe)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


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


class EventBusTarget:
    """The pollers' invoker for pipes: ``invoke(<pipe ARN>, {"Records": [...]})`` puts one event
    per record on the pipe's target bus (see the module docstring)."""

    def __init__(self, account_id: str, region: str):
        self.account_id = account_id
        self.region = region

    def invoke(self, function_name: str, event: Any) -> InvokeResult:
        started = time.monotonic()
        name = function_name.rsplit("/", 1)[-1]
        request_id = str(uuid.uuid4())
        pipe = pipes_backends[self.account_id][self.region].pipes.get(name)
        if pipe is None:
            return _failed(request_id, "ResourceNotFoundException", f"pipe {name} not found")
        records = json.loads(event)["Records"]
        entries = [self._entry(pipe, record) for record in records]
        bus = events_backends[self.account_id][self.region]
        try:
            for start in range(0, len(entries), PUT_EVENTS_LIMIT):
                results = bus.put_events(entries[start : start + PUT_EVENTS_LIMIT])
                errors = [r for r in results if r.get("ErrorCode")]
                if errors:
                    return _failed(
                        request_id, errors[0]["ErrorCode"], errors[0].get("ErrorMessage")
                    )
        except Exception as error:
            return _failed(request_id, type(error).__name__, str(error))
        return InvokeResult(
            ok=True,
            payload=None,
            error=None,
            request_id=request_id,
            duration_ms=(time.monotonic() - started) * 1000,
        )

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


def _failed(request_id: str, error_type: str, message: str | None) -> InvokeResult:
    return InvokeResult(
        ok=False,
        payload=None,
        error={"errorType": error_type, "errorMessage": message or error_type},
        request_id=request_id,
    )


# --- AWS::Pipes::Pipe in CloudFormation ---------------------------------------------------------
class PipeModel:
    """Duck-typed CloudFormation model of a pipe (registered by moto_patches while installed)."""

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe

    @property
    def physical_resource_id(self) -> str:
        return self.pipe.name

    def is_created(self) -> bool:
        return True

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in ("Arn", "CurrentState", "CreationTime", "LastModifiedTime", "StateReason")

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        pipe = self.pipe
        values = {
            "Arn": pipe.arn,
            "CurrentState": pipe.current_state,
            "CreationTime": pipe.creation_time.isoformat(),
            "LastModifiedTime": pipe.last_modified_time.isoformat(),
            "StateReason": pipe.state_reason or "",
        }
        return values[attribute_name]

    @staticmethod
    def cloudformation_name_type() -> str:
        return "Name"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Pipes::Pipe"

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> PipeModel:
        props = cloudformation_json.get("Properties", {})
        pipe = pipes_backends[account_id][region_name].create_pipe(
            name=props.get("Name") or resource_name[:64],
            description=props.get("Description"),
            desired_state=props.get("DesiredState"),
            source=props["Source"],
            source_parameters=props.get("SourceParameters"),
            enrichment=props.get("Enrichment"),
            enrichment_parameters=props.get("EnrichmentParameters"),
            target=props["Target"],
            target_parameters=props.get("TargetParameters"),
            role_arn=props["RoleArn"],
            tags=props.get("Tags"),
            log_configuration=props.get("LogConfiguration"),
            kms_key_identifier=props.get("KmsKeyIdentifier"),
        )
        return cls(pipe)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: PipeModel,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> PipeModel:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        return None  # the resource's delete() removes the pipe

    def delete(self, account_id: str, region_name: str) -> None:
        pipes_backends[self.pipe.account_id][self.pipe.region_name].pipes.pop(self.pipe.name, None)
