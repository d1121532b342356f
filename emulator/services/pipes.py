"""moto 5.2.6's EventBridge Pipes as the local stack runs them: CreatePipe / UpdatePipe validated,
and AWS::Pipes::Pipe in CloudFormation (the pipes run on the stream pollers: emulator/delivery/
pipes.py).

moto stores pipes (CreatePipe, DescribePipe, ListPipes, UpdatePipe, Start/StopPipe, DeletePipe;
moto/pipes/models.py) as RUNNING, but nothing ever reads their source, and its CloudFormation
knows no ``AWS::Pipes::Pipe`` (the resource is skipped). Here:

- ``install()``: CreatePipe / UpdatePipe validated before moto stores anything: what the local
  stack does not run is refused with ``ValidationException`` naming it (a source other than a
  DynamoDB stream, a target other than an event bus, a standard SNS topic or a state machine
  invoked REQUEST_RESPONSE, an enrichment, an input template, target parameters other than
  ``EventBridgeEventBusParameters`` Source / DetailType / Resources and
  ``StepFunctionStateMachineParameters`` InvocationType, dynamic ``$.`` paths, DynamoDB stream
  settings outside AWS's ranges), and what AWS refuses for the target: a FIFO topic ("SNS FIFO
  topics not supported"), a STANDARD state machine invoked REQUEST_RESPONSE ("REQUEST_RESPONSE
  is not supported for STANDARD state machine workflows": PipeTargetStateMachineParameters), a
  BatchSize above the target's batch (10 for a bus or a topic: "Amazon EventBridge Pipes
  batching and concurrency"), so a stack fails to deploy instead of running a pipe that does
  something else.
- ``PipeModel``: ``AWS::Pipes::Pipe`` in CloudFormation, created through moto's pipes backend
  (``Ref`` the pipe's name, ``GetAtt`` Arn / CurrentState / CreationTime / LastModifiedTime /
  StateReason, as AWS).
"""

from __future__ import annotations

from typing import Any

from moto.pipes.exceptions import ValidationException
from moto.pipes.models import EventBridgePipesBackend, Pipe, pipes_backends
from moto.stepfunctions.models import stepfunctions_backends

from emulator.core.arns import parse_arn, service_of, source_kind
from emulator.core.filters import FilterCriteria, InvalidPatternError
from emulator.core.values import parse_int
from emulator.services import patching
from emulator.services.cloudformation import StackResource

_STREAM_SETTINGS = {
    # DynamoDBStreamParameters: (minimum, maximum) as the Pipes API reference gives them
    "BatchSize": (1, 10000),
    "MaximumBatchingWindowInSeconds": (0, 300),
    "MaximumRetryAttempts": (-1, 10000),
    "MaximumRecordAgeInSeconds": (-1, 604800),
    "ParallelizationFactor": (1, 10),
}
_BUS_PARAMETERS = ("Source", "DetailType", "Resources")
# the target parameters each target service takes
_TARGET_PARAMETERS = {
    "events": "EventBridgeEventBusParameters",
    "states": "StepFunctionStateMachineParameters",
}
# the most records one PutEvents / PublishBatch call takes: a larger BatchSize is refused
_TARGET_BATCH = {"events": 10, "sns": 10}


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
    target_service = service_of(target)
    if target_service == "sns":
        if target.endswith(".fifo"):
            _refuse(f"Target {target}: Pipes does not support SNS FIFO topics")
    elif target_service == "states":
        _validate_state_machine(target, target_parameters or {})
    elif target_service != "events" or not parse_arn(target).resource.startswith("event-bus/"):
        _refuse(
            f"Target {target}: the local stack runs pipes to event buses, SNS topics and state "
            "machines only"
        )
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
    stream = params.get("DynamoDBStreamParameters") or {}
    _validate_stream_parameters(stream)
    batch = _setting(stream.get("BatchSize", 1), 0)
    limit = _TARGET_BATCH.get(target_service)
    if limit is not None and batch > limit:
        _refuse(
            f"SourceParameters.DynamoDBStreamParameters.BatchSize {batch} is above what the "
            f"target takes in one call ({limit})"
        )
    _validate_target_parameters(target_parameters or {}, target_service)


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


def _validate_state_machine(target: str, params: dict[str, Any]) -> None:
    machine_params = params.get("StepFunctionStateMachineParameters") or {}
    invocation = machine_params.get("InvocationType", "REQUEST_RESPONSE")
    where = "TargetParameters.StepFunctionStateMachineParameters.InvocationType"
    if invocation == "FIRE_AND_FORGET":
        _refuse(f"{where} FIRE_AND_FORGET is not emulated by the local stack")
    if invocation != "REQUEST_RESPONSE":
        _refuse(f"{where} must be REQUEST_RESPONSE or FIRE_AND_FORGET, got {invocation!r}")
    for name in machine_params:
        if name != "InvocationType":
            _refuse(f"TargetParameters.StepFunctionStateMachineParameters.{name} is unknown")
    arn = parse_arn(target)
    machines = stepfunctions_backends[arn.account][arn.region].state_machines
    found = next((m for m in machines if m.arn == target), None)
    if found is None:
        _refuse(f"Target {target}: no such state machine")
    if found.type != "EXPRESS":
        _refuse(
            f"Target {target}: REQUEST_RESPONSE is not supported for STANDARD state machine "
            "workflows"
        )


def _validate_target_parameters(params: dict[str, Any], target_service: str) -> None:
    for name in params:
        if name not in _TARGET_PARAMETERS.values():
            _refuse(f"TargetParameters.{name} is not emulated by the local stack")
        if _TARGET_PARAMETERS.get(target_service) != name:
            _refuse(f"TargetParameters.{name} does not apply to an {target_service} target")
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


# --- AWS::Pipes::Pipe in CloudFormation -----------------------------------------------------------
class PipeModel(StackResource):
    TYPE = "AWS::Pipes::Pipe"
    NAME_PROPERTY = "Name"
    ATTRIBUTES = ("Arn", "CurrentState", "CreationTime", "LastModifiedTime", "StateReason")

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe

    @property
    def physical_resource_id(self) -> str:
        return self.pipe.name

    def attributes(self) -> dict[str, Any]:
        pipe = self.pipe
        return {
            "Arn": pipe.arn,
            "CurrentState": pipe.current_state,
            "CreationTime": pipe.creation_time.isoformat(),
            "LastModifiedTime": pipe.last_modified_time.isoformat(),
            "StateReason": pipe.state_reason or "",
        }

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> PipeModel:
        pipe = pipes_backends[account_id][region_name].create_pipe(
            name=properties.get("Name") or physical_name[:64],
            description=properties.get("Description"),
            desired_state=properties.get("DesiredState"),
            source=properties["Source"],
            source_parameters=properties.get("SourceParameters"),
            enrichment=properties.get("Enrichment"),
            enrichment_parameters=properties.get("EnrichmentParameters"),
            target=properties["Target"],
            target_parameters=properties.get("TargetParameters"),
            role_arn=properties["RoleArn"],
            tags=properties.get("Tags"),
            log_configuration=properties.get("LogConfiguration"),
            kms_key_identifier=properties.get("KmsKeyIdentifier"),
        )
        return cls(pipe)

    def delete(self, account_id: str, region_name: str) -> None:
        pipes_backends[self.pipe.account_id][self.pipe.region_name].pipes.pop(self.pipe.name, None)
