"""moto 5.2.6's Lambda as the local stack needs it: event source mappings kept as data (the
engine of emulator/delivery/ delivers them) and validated as Lambda validates them, and Invoke run
on the stack's function workers with Lambda's payload limits and asynchronous retries."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from moto.awslambda.exceptions import InvalidParameterValueException
from moto.awslambda.models import EventSourceMapping, LambdaBackend, lambda_backends
from moto.core.exceptions import JsonRESTError
from moto.dynamodb.models import dynamodb_backends
from moto.sqs.models import sqs_backends

from emulator.core.arns import parse_arn, service_of
from emulator.core.filters import FilterCriteria, InvalidPatternError
from emulator.core.values import parse_int
from emulator.services import context, patching

try:
    from moto.kinesis.models import kinesis_backends
except ImportError:  # pragma: no cover - kinesis extra not installed
    kinesis_backends = None

if TYPE_CHECKING:
    from emulator.lambda_.workers import Runtime

log = logging.getLogger("emulator.moto")


def install() -> None:
    _patch_event_source_mapping_delivery()
    _patch_event_source_mapping_validation()
    _patch_last_processing_result()
    _patch_lambda_invoke()


# --- State and LastProcessingResult -----------------------------------------------------------
# Gap: moto's EventSourceMapping.get_configuration says Enabled or Disabled as soon as a mapping is
# created or updated. Lambda says Creating, Enabling or Disabling until its pollers follow (the
# API reference's State: Creating, Enabling, Enabled, Disabling, Disabled, Updating, Deleting);
# here until the engine's pollers do (context.mapping_transition): "Disabled" means that no
# poller is left to receive a message.
# Gap: moto's EventSourceMapping.get_configuration always gives LastProcessingResult null. Lambda
# reports the result of a stream mapping's last invocation ("No records processed" before the
# first, "OK", "PROBLEM: Function call failed"); the engine records it (set_last_processing_result).
NO_RECORDS_PROCESSED = "No records processed"


def set_last_processing_result(account_id: str, region: str, uuid: str, result: str) -> None:
    esm = lambda_backends[account_id][region]._event_source_mappings.get(uuid)
    if esm is not None:
        esm.__dict__["_last_processing_result"] = result


def _patch_last_processing_result() -> None:
    original = patching.original(EventSourceMapping, "get_configuration")

    def get_configuration(self: EventSourceMapping) -> dict[str, Any]:
        config = original(self)
        config["State"] = context.mapping_transition(self.uuid, self.enabled) or config["State"]
        if service_of(self.event_source_arn) in ("dynamodb", "kinesis"):
            config["LastProcessingResult"] = self.__dict__.get(
                "_last_processing_result", NO_RECORDS_PROCESSED
            )
        return config

    patching.replace(EventSourceMapping, "get_configuration", get_configuration)


# --- moto's own event-source-mapping delivery -----------------------------------------------------
# Gap: moto.awslambda.models.LambdaBackend.create_event_source_mapping registers each mapping on
# the source: Queue.lambda_event_source_mappings (moto/sqs/models.py, Queue.add_message: every
# SendMessage receives a batch and invokes the function through Docker, ignoring FilterCriteria
# and ReportBatchItemFailures) and Table.lambda_event_source_mappings (moto/dynamodb/models/
# table.py, StreamShard.add: every write invokes the function and, on success, empties the shard,
# so GetRecords sees nothing). Fix: keep the mapping as data in the Lambda backend (what
# ListEventSourceMappings returns, read by emulator/delivery/engine.py) and detach it from the
# source.
def _patch_event_source_mapping_delivery() -> None:
    original = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        esm = original(self, spec)
        _detach(esm, self.account_id, self.region_name)
        return esm

    patching.replace(LambdaBackend, "create_event_source_mapping", create_event_source_mapping)


def _detach(esm: Any, account_id: str, region: str) -> None:
    for queue in sqs_backends[account_id][region].queues.values():
        _drop(queue.lambda_event_source_mappings, esm)
    for table in dynamodb_backends[account_id][region].tables.values():
        _drop(table.lambda_event_source_mappings, esm)
    if kinesis_backends is not None:
        for stream in kinesis_backends[account_id][region].streams.values():
            _drop(stream.lambda_event_source_mappings, esm)


def _drop(registry: dict[str, Any], esm: Any) -> None:
    for key in [k for k, v in registry.items() if v is esm]:
        del registry[key]


# --- CreateEventSourceMapping / UpdateEventSourceMapping validate as Lambda does ------------------
# Gap: moto/awslambda/models.py LambdaBackend.create_event_source_mapping and
# update_event_source_mapping store any setting (moto only caps BatchSize, with a bare
# ValueError): a mapping AWS refuses deploys locally and then stalls or silently behaves
# otherwise. Checked here before moto stores anything, raising InvalidParameterValueException as
# Lambda does (the merged result for an update), so a stack that AWS would refuse fails to deploy
# locally too:
# - BatchSize: SQS 1-10,000 (FIFO 1-10), streams 1-10,000; MaximumBatchingWindowInSeconds 0-300,
#   and >= 1 when an SQS BatchSize exceeds 10 (none on a FIFO queue);
# - FilterCriteria: every pattern valid (emulator.core.filters) and at most 5 filters;
# - SQS: the queue's VisibilityTimeout >= the function's Timeout (Lambda's own message); no
#   stream-only setting (StartingPosition, BisectBatchOnFunctionError, MaximumRetryAttempts,
#   MaximumRecordAgeInSeconds, ParallelizationFactor, DestinationConfig);
# - streams: StartingPosition TRIM_HORIZON or LATEST (required); MaximumRetryAttempts -1..10,000;
#   MaximumRecordAgeInSeconds -1 or 60..604,800; ParallelizationFactor 1..10; an OnFailure
#   destination that is an SQS queue, SNS topic or S3 bucket, no OnSuccess;
# - ScalingConfig (SQS only): MaximumConcurrency 2..1,000 (API_ScalingConfig);
# - FunctionResponseTypes: only ReportBatchItemFailures;
# - MetricsConfig: Metrics at most EventCount for SQS and streams (ErrorCount and KafkaMetrics are
#   Kafka's; API_EventSourceMappingMetricsConfig);
# - settings the local stack does not implement are refused, naming the setting (ESM_NOT_LOCAL),
#   never ignored.
MAX_FILTERS = 5
ESM_NOT_LOCAL = {
    "TumblingWindowInSeconds": "tumbling windows (state carried between invocations)",
    "StartingPositionTimestamp": "StartingPosition AT_TIMESTAMP",
    "ProvisionedPollerConfig": "provisioned pollers",
    "KMSKeyArn": "filter criteria encrypted with a KMS key",
    "AmazonManagedKafkaEventSourceConfig": "Kafka event sources",
    "SelfManagedKafkaEventSourceConfig": "Kafka event sources",
    "SelfManagedEventSource": "self-managed event sources",
    "DocumentDBEventSourceConfig": "DocumentDB event sources",
    "Queues": "Amazon MQ event sources",
    "Topics": "Kafka event sources",
    "SourceAccessConfigurations": "Kafka and Amazon MQ event sources",
}
_STREAM_ONLY = (
    "StartingPosition",
    "BisectBatchOnFunctionError",
    "MaximumRetryAttempts",
    "MaximumRecordAgeInSeconds",
    "ParallelizationFactor",
    "TumblingWindowInSeconds",
    "DestinationConfig",
)


def _int_setting(config: dict[str, Any], name: str, default: int) -> int:
    value = config.get(name)
    try:
        return parse_int(value, default)
    except ValueError:
        raise InvalidParameterValueException(f"{name} must be an integer, got {value!r}") from None


def _unset(name: str, value: Any) -> bool:
    """A setting left at its 'off' value (CloudFormation may pass numbers as strings)."""
    if value in (None, "", {}, []):
        return True
    if name == "TumblingWindowInSeconds":
        return str(value) == "0"
    if name == "ParallelizationFactor":
        return str(value) == "1"
    return False


def validate_event_source_mapping(backend: Any, config: dict[str, Any]) -> None:
    """Raise InvalidParameterValueException for a mapping Lambda (or the local stack) refuses.
    ``config``: the mapping's settings by their API names, FunctionName and EventSourceArn."""
    for name, what in ESM_NOT_LOCAL.items():
        if not _unset(name, config.get(name)):
            raise InvalidParameterValueException(
                f"{name} is not supported by the local stack (emulator): it does not implement "
                f"{what}. Remove {name} to run this mapping locally."
            )
    arn = str(config.get("EventSourceArn") or "")
    service = service_of(arn)
    is_stream = service in ("dynamodb", "kinesis")
    fifo = service == "sqs" and arn.endswith(".fifo")
    batch_size = _int_setting(config, "BatchSize", 10 if service == "sqs" else 100)
    window = _int_setting(config, "MaximumBatchingWindowInSeconds", 0)
    max_batch = 10 if fifo else 10_000
    if not 1 <= batch_size <= max_batch:
        raise InvalidParameterValueException(
            f"BatchSize {batch_size} is out of range: it must be between 1 and {max_batch}"
            + (" for a FIFO queue" if fifo else "")
        )
    if not 0 <= window <= 300:
        raise InvalidParameterValueException(
            f"MaximumBatchingWindowInSeconds {window} is out of range: it must be between 0 and 300"
        )
    _validate_filters(config.get("FilterCriteria"))
    response_types = config.get("FunctionResponseTypes") or []
    unknown = [t for t in response_types if t != REPORT_BATCH_ITEM_FAILURES]
    if unknown:
        raise InvalidParameterValueException(
            f"FunctionResponseTypes {unknown} not supported: the only value is "
            f"{REPORT_BATCH_ITEM_FAILURES}"
        )
    _validate_scaling(config.get("ScalingConfig"), sqs=service == "sqs")
    _validate_metrics(config.get("MetricsConfig"))
    if service == "sqs":
        _validate_sqs_mapping(backend, config, arn, fifo=fifo, batch_size=batch_size, window=window)
    elif is_stream:
        _validate_stream_mapping(config)


def _validate_scaling(scaling: Any, *, sqs: bool) -> None:
    if _unset("ScalingConfig", scaling):
        return
    if not sqs:
        raise InvalidParameterValueException(
            "Unsupported ScalingConfig parameter for given event source mapping type."
        )
    maximum = scaling.get("MaximumConcurrency")
    if maximum is None:
        return
    value = parse_int(maximum, 0)
    if not 2 <= value <= 1000:
        raise InvalidParameterValueException(
            f"ScalingConfig.MaximumConcurrency {maximum} is out of range: it must be between 2 "
            "and 1000"
        )


def _validate_metrics(metrics_config: Any) -> None:
    if _unset("MetricsConfig", metrics_config):
        return
    metrics = metrics_config.get("Metrics") or []
    unknown = [m for m in metrics if m not in ("EventCount", "ErrorCount", "KafkaMetrics")]
    if unknown or len(metrics) > 3:
        raise InvalidParameterValueException(
            f"MetricsConfig.Metrics {metrics} is invalid: its values are EventCount, ErrorCount "
            "and KafkaMetrics"
        )
    kafka = [m for m in metrics if m != "EventCount"]
    if kafka:
        raise InvalidParameterValueException(
            f"MetricsConfig.Metrics {kafka} apply to Kafka event sources only"
        )


REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


def _validate_filters(criteria: Any) -> None:
    if not criteria:
        return
    try:
        compiled = FilterCriteria.from_mapping(criteria)
    except InvalidPatternError as error:
        message = f"Invalid filter pattern definition: {error}"
        raise InvalidParameterValueException(message) from None
    if len(compiled) > MAX_FILTERS:
        raise InvalidParameterValueException(
            f"FilterCriteria has {len(compiled)} filters: at most {MAX_FILTERS} are allowed per "
            "event source mapping"
        )


def _validate_sqs_mapping(
    backend: Any, config: dict[str, Any], arn: str, *, fifo: bool, batch_size: int, window: int
) -> None:
    for name in _STREAM_ONLY:
        if not _unset(name, config.get(name)) and config.get(name) is not False:
            raise InvalidParameterValueException(
                f"Unsupported {name} parameter for given event source mapping type."
            )
    if fifo and window > 0:
        raise InvalidParameterValueException(
            "MaximumBatchingWindowInSeconds is not supported for FIFO queues"
        )
    if batch_size > 10 and window < 1:
        raise InvalidParameterValueException(
            "Maximum batch window in seconds must be greater than 0 if maximum batch size is "
            "greater than 10"
        )
    queues = sqs_backends[backend.account_id][backend.region_name].queues
    queue = queues.get(parse_arn(arn).resource)
    function_name = config.get("FunctionName") or config.get("FunctionArn")
    if queue is None or not function_name:
        return  # moto answers a missing queue or function itself
    fn = backend._lambdas.get_function_by_name_or_arn_with_qualifier(str(function_name))
    visibility = int(queue.visibility_timeout)
    timeout = int(getattr(fn, "timeout", 3) or 3)
    if visibility < timeout:
        raise InvalidParameterValueException(
            f"Queue visibility timeout: {visibility} seconds is less than Function timeout: "
            f"{timeout} seconds"
        )


def _validate_stream_mapping(config: dict[str, Any]) -> None:
    position = config.get("StartingPosition")
    if position not in ("TRIM_HORIZON", "LATEST"):
        raise InvalidParameterValueException(
            "StartingPosition is required for a stream event source and must be TRIM_HORIZON or "
            f"LATEST (AT_TIMESTAMP is Kinesis-only), got {position!r}"
        )
    retries = _int_setting(config, "MaximumRetryAttempts", -1)
    if not -1 <= retries <= 10_000:
        raise InvalidParameterValueException(
            f"MaximumRetryAttempts {retries} is out of range: -1 (infinite) to 10000"
        )
    age = _int_setting(config, "MaximumRecordAgeInSeconds", -1)
    if age != -1 and not 60 <= age <= 604_800:
        raise InvalidParameterValueException(
            f"MaximumRecordAgeInSeconds {age} is out of range: -1 (infinite) or 60 to 604800"
        )
    factor = _int_setting(config, "ParallelizationFactor", 1)
    if not 1 <= factor <= 10:
        raise InvalidParameterValueException(
            f"ParallelizationFactor {factor} is out of range: it must be between 1 and 10"
        )
    destination = config.get("DestinationConfig") or {}
    if (destination.get("OnSuccess") or {}).get("Destination"):
        raise InvalidParameterValueException(
            "DestinationConfig OnSuccess is not supported for stream event source mappings"
        )
    target = (destination.get("OnFailure") or {}).get("Destination")
    if target and service_of(str(target)) not in ("sqs", "sns", "s3"):
        raise InvalidParameterValueException(
            f"OnFailure destination {target!r} must be an SQS queue, SNS topic or S3 bucket ARN"
        )


def _mapping_view(esm: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """An existing mapping's settings with an update's applied (API names)."""
    view = {k: v for k, v in esm.get_configuration().items() if v is not None}
    view["StartingPositionTimestamp"] = getattr(esm, "starting_position_timestamp", None)
    view.update(spec)
    view.setdefault("FunctionName", esm.function_arn)
    view["EventSourceArn"] = esm.event_source_arn
    return view


def _patch_event_source_mapping_validation() -> None:
    original_create = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        if spec.get("EventSourceArn") and spec.get("FunctionName"):
            validate_event_source_mapping(self, spec)
        return original_create(self, spec)

    patching.replace(LambdaBackend, "create_event_source_mapping", create_event_source_mapping)

    original_update = LambdaBackend.update_event_source_mapping

    def update_event_source_mapping(self: Any, uuid: str, spec: dict[str, Any]) -> Any:
        esm = self.get_event_source_mapping(uuid)
        if esm is not None:
            validate_event_source_mapping(self, _mapping_view(esm, spec))
        return original_update(self, uuid, spec)

    patching.replace(LambdaBackend, "update_event_source_mapping", update_event_source_mapping)


# --- Lambda Invoke --------------------------------------------------------------------------------
# Gap: moto/awslambda/models.py LambdaBackend.invoke -> LambdaFunction.invoke runs the code in a
# Docker container (none here). Functions the runtime knows run on its workers instead, with the
# Invoke API's response shape: payload, X-Amz-Function-Error: Unhandled and the error document on
# failure, 202 for InvocationType=Event (run in the background), 204 for DryRun.
# Limits as AWS applies them (Invoke API reference; Lambda quotas), which moto does not (its
# handler, moto/awslambda/responses.py LambdaResponse.invoke, only swaps a response whose
# sys.getsizeof exceeds 6,000,000 bytes):
# - a request payload over 6 MB (6,291,456 bytes; 1 MB = 1,048,576 for InvocationType=Event) is
#   refused with HTTP 413 RequestEntityTooLargeException, before anything runs;
# - a synchronous response over Lambda's limit becomes a function error
#   {"errorType": "Function.ResponseSizeTooLarge", "errorMessage": "Response payload size exceeded
#   maximum allowed payload size (6291556 bytes)."} (X-Amz-Function-Error: Unhandled, HTTP 200):
#   the limit AWS enforces and names is 6,291,556 bytes;
# - InvocationType=Event: a failed invocation is retried twice (or the function's
#   EventInvokeConfig MaximumRetryAttempts), AWS waiting about 1 and then 2 minutes; locally
#   ASYNC_RETRY_DELAYS seconds.
MAX_REQUEST_PAYLOAD = 6 * 1024 * 1024  # 6,291,456
MAX_ASYNC_REQUEST_PAYLOAD = 1024 * 1024  # 1,048,576
MAX_RESPONSE_PAYLOAD = 6_291_556
ASYNC_RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0)


class RequestEntityTooLarge(JsonRESTError):
    code = 413

    def __init__(self, message: str) -> None:
        super().__init__("RequestEntityTooLargeException", message)


def _check_request_size(body: bytes, invocation_type: str) -> None:
    size = len(body)
    if invocation_type == "Event":
        if size > MAX_ASYNC_REQUEST_PAYLOAD:
            raise RequestEntityTooLarge(
                f"{size} byte payload is too large for the Event invocation type "
                f"(limit {MAX_ASYNC_REQUEST_PAYLOAD} bytes)"
            )
    elif size > MAX_REQUEST_PAYLOAD:
        raise RequestEntityTooLarge(
            f"Request must be smaller than {MAX_REQUEST_PAYLOAD} bytes for the InvokeFunction "
            "operation"
        )


class _ResponsePayload(bytes):
    """A response payload moto's Invoke handler passes on as it is: LambdaResponse.invoke turns
    any payload whose sys.getsizeof exceeds 6,000,000 bytes into Function.ResponseSizeTooLarge,
    below Lambda's limit (checked here, MAX_RESPONSE_PAYLOAD)."""

    def __sizeof__(self) -> int:
        return 0


def _error_payload(response_headers: Any, error_type: str, message: str) -> bytes:
    response_headers["x-amz-function-error"] = "Unhandled"
    payload = json.dumps({"errorMessage": message, "errorType": error_type}).encode()
    response_headers["Content-Length"] = str(len(payload))
    return payload


def _async_retries(fn: Any) -> int:
    configs = getattr(fn, "event_invoke_config", None) or []
    for config in configs:
        value = (getattr(config, "config", None) or {}).get("MaximumRetryAttempts")
        if value is not None:
            return max(0, int(value))
    return len(ASYNC_RETRY_DELAYS)


def _invoke_async(runtime: Runtime, function_name: str, event: bytes, retries: int) -> None:
    for attempt in range(retries + 1):
        result = runtime.invoke(function_name, event)
        if result.ok:
            if attempt:
                log.info("async invoke of %s succeeded on retry %d", function_name, attempt)
            return
        if attempt < retries:
            delay = ASYNC_RETRY_DELAYS[min(attempt, len(ASYNC_RETRY_DELAYS) - 1)]
            log.info(
                "async invoke of %s failed (%s): retry %d of %d in %.1f s",
                function_name,
                (result.error or {}).get("errorType"),
                attempt + 1,
                retries,
                delay,
            )
            time.sleep(delay)
    log.warning("async invoke of %s failed after %d retries", function_name, retries)


def _patch_lambda_invoke() -> None:
    original = LambdaBackend.invoke

    def invoke(  # noqa: PLR0911, PLR0917 - moto's signature; one return per outcome
        self: Any,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> str | bytes | None:
        event = body.encode() if isinstance(body, str) else (body or b"")
        invocation_type = headers.get("X-Amz-Invocation-Type", "RequestResponse")
        _check_request_size(event, invocation_type)
        runtime = context.runtime()
        fn = self.get_function(function_name, qualifier)
        if runtime is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        if runtime.resolve(fn.function_name) is None:
            # A function moto knows but the runtime does not (yet): never Docker.
            return _error_payload(
                response_headers,
                "Emulator.FunctionNotLocal",
                f"{fn.function_name} has no local code (or the stack is still deploying)",
            )
        event = event or b"{}"
        try:
            json.loads(event)
        except ValueError:
            return _error_payload(
                response_headers,
                "Runtime.UnmarshalError",
                "Could not parse request body into json",
            )
        response_headers["X-Amz-Executed-Version"] = "$LATEST"
        if invocation_type == "DryRun":
            return b""
        if invocation_type == "Event":
            threading.Thread(
                target=_invoke_async,
                args=(runtime, fn.function_name, event, _async_retries(fn)),
                daemon=True,
            ).start()
            return b""
        result = runtime.invoke(fn.function_name, event)
        payload = result.raw
        if len(payload) > MAX_RESPONSE_PAYLOAD:
            return _error_payload(
                response_headers,
                "Function.ResponseSizeTooLarge",
                "Response payload size exceeded maximum allowed payload size "
                f"({MAX_RESPONSE_PAYLOAD} bytes).",
            )
        if not result.ok:
            response_headers["x-amz-function-error"] = "Unhandled"
        response_headers["Content-Length"] = str(len(payload))
        return _ResponsePayload(payload)

    patching.replace(LambdaBackend, "invoke", invoke)
