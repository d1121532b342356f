"""Every in-process patch of moto 5.2.5 the local stack relies on is installed from here.

``install()`` applies every patch once (idempotent) in the process that runs the moto server:
the ones in this module and those of sqs.py (SQS at queue depth), sqs_move_tasks.py
(SQS message move tasks, the DLQ redrive API), dynamodbstreams.py (DynamoDB
stream records and shards), responses.py (a fast path through the response serializer),
events.py (EventBridge rules: our pattern matcher, SQS targets as AWS delivers),
sns_filter_policies.py (SNS filter policies with our matcher) and delivery/pipes.py (CreatePipe /
UpdatePipe validated; AWS::Pipes::Pipe in CloudFormation is registered by patch 7 below);
``uninstall()`` restores moto (tests share a process with plain moto users). ``set_runtime`` /
``set_faults`` give the patches the stack's runtime and fault switches.

The patches here, each with a comment saying which gap it closes and where in moto the behaviour
lives: 1 moto's own event-source-mapping delivery turned off, 2 stream records only for writes
that change an item, 3 S3 event records in AWS's shape, 4 Lambda Invoke on the stack's runtime
with Lambda's payload limits and async retries, 5 S3 event notifications sent
``duplicate_deliveries`` times (a fault switch), 6 SNS FIFO topics deduplicate, 7
AWS::SNS::Subscription (and AWS::Pipes::Pipe) in CloudFormation, 8 DynamoDB writes under one
lock and transactions checked before any write, 9 CreateEventSourceMapping /
UpdateEventSourceMapping validated as Lambda does. Gaps closed by the deployer instead (bucket
notifications, layers, code locations) live in stack.py.
"""

from __future__ import annotations

import base64
import collections
import copy
import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from moto.awslambda.exceptions import InvalidParameterValueException
from moto.awslambda.models import LambdaBackend
from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    InvalidAttributeTypeError,
    ItemSizeTooLarge,
    ItemSizeToUpdateTooLarge,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamShard
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import UpdateExpressionValidator
from moto.dynamodb.responses import DynamoHandler
from moto.s3 import notifications
from moto.sns.models import SNSBackend, Topic, sns_backends
from moto.sns.responses import SNSResponse
from moto.sqs.models import sqs_backends

from emulator.core.arns import parse_arn, service_of
from emulator.core.filters import FilterCriteria, InvalidPatternError
from emulator.core.values import parse_bool, parse_int
from emulator.delivery import pipes
from emulator.services import (
    dynamodbstreams,
    events,
    patching,
    responses,
    sns_filter_policies,
    sqs,
    sqs_move_tasks,
)

try:
    from moto.kinesis.models import kinesis_backends
except ImportError:  # pragma: no cover - kinesis extra not installed
    kinesis_backends = None

if TYPE_CHECKING:
    from emulator.core.faults import Faults
    from emulator.lambda_.workers import Runtime

log = logging.getLogger("emulator.moto")

_installed = False
_install_lock = threading.Lock()
_runtime: Runtime | None = None
_faults: Faults | None = None


def set_runtime(runtime: Runtime | None) -> None:
    """The runtime that Lambda Invoke requests run on (None: moto's own behaviour)."""
    global _runtime  # noqa: PLW0603
    _runtime = runtime


def set_faults(faults: Faults | None) -> None:
    """The fault switches the patches read (``duplicate_deliveries``); None: no faults."""
    global _faults  # noqa: PLW0603
    _faults = faults


def _duplicate_deliveries() -> int:
    faults = _faults
    return faults.duplicate_deliveries if faults is not None else 1


def install() -> None:
    global _installed  # noqa: PLW0603
    with _install_lock:
        if _installed:
            return
        sqs.install()
        sqs_move_tasks.install()
        dynamodbstreams.install()
        responses.install()
        events.install()
        sns_filter_policies.install()
        pipes.install()
        _patch_event_source_mapping_delivery()
        _patch_event_source_mapping_validation()
        _patch_unchanged_put_item_stream_record()
        _patch_s3_event_shape()
        _patch_lambda_invoke()
        _patch_s3_duplicate_notifications()
        _patch_sns_fifo_topic_attributes()
        _patch_sns_fifo_deduplication()
        _patch_cloudformation_sns_subscription()
        _patch_cloudformation_no_value_in_lists()
        _patch_dynamodb_writes()
        _installed = True


def _mark(patch: Callable[..., Any], original: Callable[..., Any]) -> None:
    """Tag a patch with what it replaced (uninstall restores only what carries the tag: some of
    moto's own methods are decorated and have a ``__wrapped__`` of their own)."""
    patch.__wrapped__ = original  # type: ignore[attr-defined]
    patch._emulator_patch = True  # type: ignore[attr-defined]


def _patched() -> list[tuple[Any, str]]:
    from moto.cloudformation import parsing  # noqa: PLC0415 - imports every CloudFormation model

    return [
        (LambdaBackend, "create_event_source_mapping"),
        (LambdaBackend, "update_event_source_mapping"),
        (LambdaBackend, "invoke"),
        (StreamShard, "add"),
        (notifications, "_get_s3_event"),
        (notifications, "_send_sqs_message"),
        (notifications, "_send_sns_message"),
        (SNSBackend, "create_topic"),
        (Topic, "publish"),
        (SNSResponse, "publish"),
        (SNSResponse, "publish_batch"),
        (SNSResponse, "get_topic_attributes"),
        (parsing, "resource_class_from_type"),
        (parsing, "clean_json"),
        *((DynamoDBBackend, name) for name in _DYNAMODB_BACKEND_WRITES),
        *((DynamoHandler, name) for name in _DYNAMODB_HANDLER_WRITES),
    ]


def uninstall() -> None:
    """Restore moto as it was (tests share one process with plain moto users)."""
    global _installed  # noqa: PLW0603
    with _install_lock:
        for owner, name in _patched():
            current = getattr(owner, name)
            while getattr(current, "_emulator_patch", False):
                setattr(owner, name, current.__wrapped__)
                current = getattr(owner, name)
        sqs.uninstall()
        sqs_move_tasks.reset()
        patching.restore_all()
        _installed = False
        set_runtime(None)
        set_faults(None)


# --- Patch 1: moto's own event-source-mapping delivery -------------------------------------------
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

    _mark(create_event_source_mapping, original)
    LambdaBackend.create_event_source_mapping = create_event_source_mapping


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


# --- Patch 9: CreateEventSourceMapping / UpdateEventSourceMapping validate as Lambda does -------
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
#   destination that is an SQS queue or SNS topic, no OnSuccess;
# - FunctionResponseTypes: only ReportBatchItemFailures;
# - settings the local stack does not implement are refused, naming the setting (ESM_NOT_LOCAL),
#   never ignored.
MAX_FILTERS = 5
ESM_NOT_LOCAL = {
    "TumblingWindowInSeconds": "tumbling windows (state carried between invocations)",
    "StartingPositionTimestamp": "StartingPosition AT_TIMESTAMP",
    "ScalingConfig": "a maximum concurrency for SQS pollers",
    "ProvisionedPollerConfig": "provisioned pollers",
    "MetricsConfig": "event source mapping metrics",
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
    if service == "sqs":
        _validate_sqs_mapping(backend, config, arn, fifo=fifo, batch_size=batch_size, window=window)
    elif is_stream:
        _validate_stream_mapping(config)


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
    if target and service_of(str(target)) not in ("sqs", "sns"):
        raise InvalidParameterValueException(
            f"OnFailure destination {target!r} must be an SQS queue or SNS topic ARN"
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

    _mark(create_event_source_mapping, original_create)
    LambdaBackend.create_event_source_mapping = create_event_source_mapping

    original_update = LambdaBackend.update_event_source_mapping

    def update_event_source_mapping(self: Any, uuid: str, spec: dict[str, Any]) -> Any:
        esm = self.get_event_source_mapping(uuid)
        if esm is not None:
            validate_event_source_mapping(self, _mapping_view(esm, spec))
        return original_update(self, uuid, spec)

    _mark(update_event_source_mapping, original_update)
    LambdaBackend.update_event_source_mapping = update_event_source_mapping


# --- Patch 2: stream records of writes that change nothing, and UpdateItem's extra INSERT -------
# Gap: moto/dynamodb/models/table.py Table.put_item calls StreamShard.add(old, new) for every
# write, so a PutItem (or UpdateItem) that rewrites an identical item yields a MODIFY record.
# DynamoDB Streams writes a record only when the item actually changed. And moto's
# DynamoDBBackend.update_item creates a missing item by a Table.put_item of its key alone (an
# INSERT record with only the key) before applying the update (a second INSERT): DynamoDB writes
# one INSERT with the new image. The UpdateItem patch (Patch 8) sets ``_stream.skip_insert`` so
# that the key-only INSERT is dropped.
_stream = threading.local()


def _patch_unchanged_put_item_stream_record() -> None:
    original = StreamShard.add

    def add(self: Any, old: Any, new: Any) -> None:
        # Item.attrs compare as DynamoDB does: numbers by value, sets in any order (and without
        # serialising both items, as comparing to_json() did).
        if old is not None and new is not None and old.attrs == new.attrs:
            return
        if old is None and getattr(_stream, "skip_insert", False):
            _stream.skip_insert = False  # the key-only item UpdateItem creates first
            return
        original(self, old, new)

    _mark(add, original)
    StreamShard.add = add


# --- Patch 3: the S3 event notification record -------------------------------------------------
# Gap: moto/s3/notifications.py _get_s3_event builds a record without versionId, sequencer,
# userIdentity, requestParameters and responseElements, and form-encodes the key with '/' as
# %2F. AWS: the key is URL-encoded with spaces as '+' but '/' left as is; versionId is present on
# a versioned bucket; sequencer is a hex string that orders events of one key.
_sequencer_lock = threading.Lock()
_last_sequencer = 0


def next_sequencer() -> str:
    """Monotonic (over every key, hence per key) upper-case hex, like AWS's 18-digit ones."""
    global _last_sequencer  # noqa: PLW0603
    with _sequencer_lock:
        _last_sequencer = max(_last_sequencer + 1, time.time_ns() // 1000)
        return f"{_last_sequencer:018X}"


def encode_s3_event_key(name: str) -> str:
    return quote_plus(name, safe="/")


def _patch_s3_event_shape() -> None:
    original = notifications._get_s3_event

    def _get_s3_event(event_name: str, bucket: Any, key: Any, notification_id: str) -> Any:
        event = original(event_name, bucket, key, notification_id)
        for record in event["Records"]:
            obj = record["s3"]["object"]
            obj["key"] = encode_s3_event_key(key.name)
            version = getattr(key, "_version_id", None)
            if getattr(bucket, "is_versioned", False) and version:
                obj["versionId"] = str(version)
            obj["sequencer"] = next_sequencer()
            record["userIdentity"] = {"principalId": "AWS:AIDAEMULATOR"}
            record["requestParameters"] = {"sourceIPAddress": "127.0.0.1"}
            record["responseElements"] = {
                "x-amz-request-id": uuid.uuid4().hex[:16].upper(),
                "x-amz-id-2": base64.b64encode(uuid.uuid4().bytes * 2).decode(),
            }
            record["s3"]["bucket"]["ownerIdentity"] = {"principalId": "AEMULATOR"}
        return event

    _mark(_get_s3_event, original)
    notifications._get_s3_event = _get_s3_event


# --- Patch 4: Lambda Invoke --------------------------------------------------------------------
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
        runtime = _runtime
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

    _mark(invoke, original)
    LambdaBackend.invoke = invoke


# --- Patch 5: S3 event notifications delivered more than once ----------------------------------
# AWS: "Amazon S3 event notifications are designed to be delivered at least once" (an event can
# arrive twice). moto/s3/notifications.py send_event calls _send_sqs_message / _send_sns_message
# once per matching notification configuration. With the duplicate_deliveries fault at N > 1,
# each event record goes out N times: separate messages (own message ids), identical bodies.
# The s3:TestEvent (no "Records") goes out once.
def _patch_s3_duplicate_notifications() -> None:
    for name in ("_send_sqs_message", "_send_sns_message"):
        original = getattr(notifications, name)

        def send(
            account_id: str,
            event_body: Any,
            target: str,
            region_name: str,
            _original: Callable[..., None] = original,
        ) -> None:
            copies = 1
            if isinstance(event_body, dict) and "Records" in event_body:
                copies = _duplicate_deliveries()
            for _ in range(copies):
                _original(account_id, event_body, target, region_name)

        _mark(send, original)
        setattr(notifications, name, send)


# --- Patch 6: SNS FIFO topics deduplicate ------------------------------------------------------
# Gap: moto/sns/models.py Topic.publish hands every message to every subscription; a FIFO topic
# never deduplicates (an SQS FIFO subscriber's own dedupe hides it, a standard queue subscriber
# gets every copy), the Publish / PublishBatch responses carry no SequenceNumber, and
# GetTopicAttributes has no FifoThroughputScope. AWS (SNS developer guide, "message
# deduplication for FIFO topics"; Publish API): a message whose deduplication id
# (MessageDeduplicationId, else the SHA-256 of the body with ContentBasedDeduplication) was
# accepted within the 5-minute deduplication interval is accepted but not delivered; the scope
# is the topic, or each message group with FifoThroughputScope=MessageGroup. The interval starts
# at the first successful publish and duplicates do not extend it (as SQS's). A duplicate's
# response here repeats the original's MessageId and SequenceNumber. Also: CreateTopic through
# CloudFormation takes FifoTopic / ContentBasedDeduplication as given, so a "false" string read
# as true; they are made booleans.
SNS_DEDUPLICATION_SECONDS = 300.0
_sns_lock = threading.Lock()
_sns_sequences = threading.local()  # message id -> sequence number, for the response in hand
clock: Callable[[], float] = time.monotonic  # tests move time forward


class _FifoState:
    """Per FIFO topic: accepted deduplication ids (oldest first) and the sequence counter."""

    def __init__(self) -> None:
        self.accepted: collections.OrderedDict[tuple[str | None, str], tuple[float, str, str]] = (
            collections.OrderedDict()
        )
        self.sequence = 10**19

    def expire(self, now: float) -> None:
        while self.accepted:
            first = next(iter(self.accepted.values()))
            if now - first[0] < SNS_DEDUPLICATION_SECONDS:
                return
            self.accepted.popitem(last=False)

    def next_sequence(self) -> str:
        self.sequence += 1 + int.from_bytes(uuid.uuid4().bytes[:2]) % 997  # large, not consecutive
        return f"{self.sequence:020d}"


def _patch_sns_fifo_topic_attributes() -> None:
    original_create = SNSBackend.create_topic

    def create_topic(
        self: Any, name: str, attributes: dict[str, Any] | None = None, tags: Any = None
    ) -> Any:
        if attributes:
            attributes = dict(attributes)
            for key in ("FifoTopic", "ContentBasedDeduplication"):
                if key in attributes:
                    attributes[key] = parse_bool(attributes[key])
        return original_create(self, name, attributes, tags)

    _mark(create_topic, original_create)
    SNSBackend.create_topic = create_topic

    original_attributes = SNSResponse.get_topic_attributes

    def get_topic_attributes(self: Any) -> Any:
        result = original_attributes(self)
        topic = self.backend.get_topic(self._get_param("TopicArn"))
        body = result.result if isinstance(result, ActionResult) else None
        if parse_bool(topic.fifo_topic) and isinstance(body, dict):
            attributes = body.setdefault("Attributes", {})
            attributes["FifoTopic"] = "true"
            attributes["ContentBasedDeduplication"] = str(
                parse_bool(topic.content_based_deduplication)
            ).lower()
            attributes["FifoThroughputScope"] = str(
                getattr(topic, "fifo_throughput_scope", "Topic")
            )
        return result

    _mark(get_topic_attributes, original_attributes)
    SNSResponse.get_topic_attributes = get_topic_attributes


def _patch_sns_fifo_deduplication() -> None:
    original_publish = Topic.publish

    def publish(  # noqa: PLR0917 - moto's signature
        self: Any,
        message: str,
        subject: str | None = None,
        message_attributes: dict[str, Any] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        message_structure: str | None = None,
    ) -> str:
        def deliver(deduplication_id: str | None) -> str:
            return original_publish(
                self,
                message,
                subject=subject,
                message_attributes=message_attributes,
                group_id=group_id,
                deduplication_id=deduplication_id,
                message_structure=message_structure,
            )

        if not parse_bool(self.fifo_topic):
            return deliver(deduplication_id)
        if deduplication_id is None and parse_bool(self.content_based_deduplication):
            deduplication_id = hashlib.sha256(message.encode()).hexdigest()
        per_group = str(getattr(self, "fifo_throughput_scope", "Topic")) == "MessageGroup"
        scope_key = (group_id if per_group else None, deduplication_id or "")
        with _sns_lock:
            state = self.__dict__.setdefault("_emulator_fifo", _FifoState())
            now = clock()
            state.expire(now)
            seen = state.accepted.get(scope_key) if deduplication_id else None
            if seen is not None:
                _, message_id, sequence = seen
            else:
                message_id = deliver(deduplication_id)
                sequence = state.next_sequence()
                if deduplication_id:
                    state.accepted[scope_key] = (now, message_id, sequence)
        sequences = getattr(_sns_sequences, "value", None)
        if sequences is not None:
            sequences[message_id] = sequence
        return message_id

    _mark(publish, original_publish)
    Topic.publish = publish

    SNSResponse.publish = _with_sequence_numbers(SNSResponse.publish, None)
    SNSResponse.publish_batch = _with_sequence_numbers(SNSResponse.publish_batch, "Successful")


def _with_sequence_numbers(original: Callable[..., Any], entries_key: str | None) -> Any:
    """Publish / PublishBatch handler that adds the FIFO SequenceNumber to the response."""

    def handler(self: Any) -> Any:
        _sns_sequences.value = {}
        try:
            result = original(self)
            sequences = _sns_sequences.value
        finally:
            _sns_sequences.value = None
        body = result.result if isinstance(result, ActionResult) else None
        if sequences and isinstance(body, dict):
            entries = body.get(entries_key, []) if entries_key else [body]
            for entry in entries:
                if isinstance(entry, dict) and entry.get("MessageId") in sequences:
                    entry["SequenceNumber"] = sequences[entry["MessageId"]]
        return result

    _mark(handler, original)
    return handler


# --- Patch 7: AWS::SNS::Subscription in CloudFormation -----------------------------------------
# Gap: moto/cloudformation/parsing.py resource_class_from_type knows no AWS::SNS::Subscription
# (it logs "No Moto CloudFormation support" and skips it), so a stack's topic -> queue
# subscriptions do not exist. The model below creates them through the SNS backend with their
# attributes (RawMessageDelivery, FilterPolicy, FilterPolicyScope, RedrivePolicy,
# DeliveryPolicy); Ref gives the subscription ARN as on AWS. Standard and FIFO queues may both
# subscribe to a FIFO topic (moto refuses only a FIFO queue on a standard topic, as AWS does).
# Lambda subscriptions are not delivered locally (moto would invoke through Docker): skipped
# with a warning. AWS::Pipes::Pipe, unknown to moto's CloudFormation as well, is registered here
# too (its model: emulator/delivery/pipes.py PipeModel).
_SUBSCRIPTION_ATTRIBUTES = (
    "FilterPolicyScope",  # first: FilterPolicy is validated against it
    "FilterPolicy",
    "RawMessageDelivery",
    "RedrivePolicy",
    "DeliveryPolicy",
)


class SnsSubscriptionModel:
    """Duck-typed CloudFormation model (not a CloudFormationModel subclass: those register
    themselves in moto for good; this one exists only while the patch is installed)."""

    def __init__(self, arn: str, account_id: str, region_name: str) -> None:
        self.arn = arn
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.arn

    def is_created(self) -> bool:
        return True

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return False

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import (  # noqa: PLC0415
            UnformattedGetAttTemplateException,
        )

        raise UnformattedGetAttTemplateException()

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SNS::Subscription"

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> SnsSubscriptionModel:
        properties = cloudformation_json.get("Properties", {})
        topic_arn = properties["TopicArn"]
        protocol = properties["Protocol"]
        endpoint = properties.get("Endpoint", "")
        region = parse_arn(topic_arn).region
        if protocol == "lambda":
            log.warning(
                "SNS subscription %s (lambda) not created: the local stack does not deliver "
                "SNS to Lambda",
                kwargs.get("LogicalId", resource_name),
            )
            return cls(f"{topic_arn}:{uuid.uuid4()}", account_id, region)
        backend = sns_backends[account_id][region]
        subscription = backend.subscribe(topic_arn, endpoint, protocol)
        for name in _SUBSCRIPTION_ATTRIBUTES:
            if name not in properties:
                continue
            value = properties[name]
            if name == "RawMessageDelivery":
                value = parse_bool(value)
            elif isinstance(value, dict | list):
                value = json.dumps(value)
            backend.set_subscription_attributes(subscription.arn, name, value)
        return cls(subscription.arn, account_id, region)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: SnsSubscriptionModel,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> SnsSubscriptionModel:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        return None  # the resource's delete() unsubscribes

    def delete(self, account_id: str, region_name: str) -> None:
        backend = sns_backends[self.account_id][self.region_name]
        backend.subscriptions.pop(self.arn, None)


def _patch_cloudformation_sns_subscription() -> None:
    from moto.cloudformation import parsing  # noqa: PLC0415 - imports every CloudFormation model

    original = parsing.resource_class_from_type

    models = {"AWS::SNS::Subscription": SnsSubscriptionModel, "AWS::Pipes::Pipe": pipes.PipeModel}

    def resource_class_from_type(resource_type: str) -> Any:
        return models.get(resource_type) or original(resource_type)

    _mark(resource_class_from_type, original)
    parsing.resource_class_from_type = resource_class_from_type


# Gap: moto/cloudformation/parsing.py clean_json resolves {"Ref": "AWS::NoValue"} to None and
# drops it from an object, but keeps it in a list, where CloudFormation removes the element. A
# list item chosen by Fn::If (`- !If [Cond, item, !Ref AWS::NoValue]`, e.g. a policy a role has
# in one mode only) then reaches the resource as None (IAM's role model fails on it). Fix: an
# item that came from an intrinsic and resolved to nothing is left out of its list.
def _patch_cloudformation_no_value_in_lists() -> None:
    from moto.cloudformation import parsing  # noqa: PLC0415 - imports every CloudFormation model

    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        if not isinstance(resource_json, list):
            return original(resource_json, resources_map)
        cleaned = [(item, original(item, resources_map)) for item in resource_json]
        return [value for item, value in cleaned if value is not None or not isinstance(item, dict)]

    _mark(clean_json, original)
    parsing.clean_json = clean_json


# --- Patch 8: DynamoDB writes: one lock, and TransactWriteItems without table copies -----------
# Gap: moto/dynamodb/models/__init__.py DynamoDBBackend.transact_write_items deep-copies every
# table it touches before the transaction (O(table size)) and, when the transaction is cancelled,
# replaces the backend's tables by those copies: shard iterators taken before keep reading the
# discarded table's stream shard (stream readers stall or see records of the cancelled writes).
# And nothing keeps another write from landing between a transaction's checks and its writes
# (the server is threaded). Fix: every DynamoDB write path (PutItem, UpdateItem, DeleteItem,
# BatchWriteItem, TransactWriteItems; the backend methods and the request handlers) runs under one
# re-entrant lock; a transaction checks every action first (the 100-action limit, one action per
# item, each condition against the current item, each Put's item and each Update's expression on
# a copy of its one item) and writes nothing when any fails (TransactionCanceledException with
# the per-action reasons, ConditionalCheckFailed with the item under
# ReturnValuesOnConditionCheckFailure=ALL_OLD), else applies every action through the ordinary
# write paths: stream records only for applied writes, the table objects never replaced.
# UpdateItem also drops the key-only INSERT record of an item it creates (Patch 2).
DYNAMODB_LOCK = threading.RLock()
_DYNAMODB_BACKEND_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_DYNAMODB_HANDLER_WRITES = (
    "put_item",
    "update_item",
    "delete_item",
    "batch_write_item",
    "transact_write_items",
)
_TRANSACTION_ACTIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_MAX_TRANSACTION_ACTIONS = 100


def _locked(original: Callable[..., Any]) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        with DYNAMODB_LOCK:
            return original(*args, **kwargs)

    method.__name__ = original.__name__
    method.__doc__ = original.__doc__
    _mark(method, original)
    return method


def _patch_dynamodb_writes() -> None:
    for name in _DYNAMODB_HANDLER_WRITES:
        setattr(DynamoHandler, name, _locked(getattr(DynamoHandler, name)))
    DynamoDBBackend.put_item = _locked(DynamoDBBackend.put_item)
    DynamoDBBackend.delete_item = _locked(DynamoDBBackend.delete_item)

    original_update = DynamoDBBackend.update_item

    def update_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        with DYNAMODB_LOCK:
            _stream.skip_insert = True
            try:
                return original_update(self, *args, **kwargs)
            finally:
                _stream.skip_insert = False

    _mark(update_item, original_update)
    DynamoDBBackend.update_item = update_item

    original_transact = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with DYNAMODB_LOCK:
            if len(transact_items) > _MAX_TRANSACTION_ACTIONS:
                raise TooManyTransactionsException()
            writes, reasons = _check_transaction(self, transact_items)
            if any(code is not None for code, _, _ in reasons):
                raise TransactionCanceledException(reasons)
            for write in writes:
                write()

    _mark(transact_write_items, original_transact)
    DynamoDBBackend.transact_write_items = transact_write_items


def _check_transaction(
    backend: Any, transact_items: list[dict[str, Any]]
) -> tuple[list[Callable[[], Any]], list[tuple[Any, Any, Any]]]:
    """Every action checked against the current items, nothing written: (the writes to apply,
    the cancellation reasons as moto's TransactionCanceledException takes them)."""
    targets: set[tuple[str, str]] = set()
    writes: list[Callable[[], Any]] = []
    reasons: list[tuple[Any, Any, Any]] = []
    for action in transact_items:
        if len(action) > 1:
            raise TransactWriteSingleOpException
        try:
            writes.append(_check_action(backend, action, targets))
            reasons.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            raise
        except ConditionalCheckFailed as error:
            reasons.append(
                ("ConditionalCheckFailed", str(error.message), getattr(error, "old_image", None))
            )
        except Exception as error:  # as moto: any other failure is that action's reason
            reasons.append((type(error).__name__, str(error), None))
    return writes, reasons


class _ConditionFailed(ConditionalCheckFailed):
    def __init__(self, old_image: dict[str, Any] | None) -> None:
        super().__init__(item=old_image)
        self.old_image = old_image


def _check_action(
    backend: Any, action: dict[str, Any], targets: set[tuple[str, str]]
) -> Callable[[], Any]:
    op_type, op = next(iter(action.items()))
    if op_type not in _TRANSACTION_ACTIONS:
        raise ValueError("Unsupported transaction operation")
    table = backend.get_table(op["TableName"])
    if op_type == "Put":
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
    else:
        key = op["Key"]
    target = (table.name, str(dict(sorted(key.items()))))
    if target in targets:
        raise MultipleTransactionsException()
    targets.add(target)
    current = backend.get_item(op["TableName"], key)
    condition = op.get("ConditionExpression")
    if condition is not None:
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        if not get_filter_expression(condition, names, values).expr(current):
            all_old = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
            raise _ConditionFailed(current.to_json()["Attributes"] if all_old and current else None)
    return _planned_write(backend, table, op_type, op, key=key, current=current)


def _planned_write(
    backend: Any, table: Any, op_type: str, op: dict[str, Any], *, key: dict[str, Any], current: Any
) -> Callable[[], Any]:
    """Validate one action without writing (raising what the write would raise) and return the
    write. Conditions are checked already: the writes go without them."""
    table_name = op["TableName"]
    if op_type == "Put":
        _validate_put(table, op["Item"])
        return lambda: backend.put_item(table_name, op["Item"])
    if op_type == "Delete":
        return lambda: backend.delete_item(table_name, key)
    if op_type == "Update":
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        expression = op["UpdateExpression"]
        _try_update(backend, table, key, current, expression=expression, names=names, values=values)
        return lambda: backend.update_item(
            table_name,
            key,
            update_expression=expression,
            expression_attribute_names=names,
            expression_attribute_values=values,
        )
    return lambda: None  # ConditionCheck


def _validate_put(table: Any, attrs: dict[str, Any]) -> None:
    """The checks of moto's Table.put_item, without the write."""
    for name in (table.hash_key_attr, table.range_key_attr):
        if name is not None and name not in attrs:
            raise MockValidationException(
                f"One or more parameter values were invalid: Missing the key {name} in the item"
            )
    hash_value = DynamoType(attrs[table.hash_key_attr])
    if hash_value.type != table.hash_key_type:
        raise InvalidAttributeTypeError(
            table.hash_key_attr, expected_type=table.hash_key_type, actual_type=hash_value.type
        )
    range_value = None
    if table.range_key_attr is not None:
        range_value = DynamoType(attrs[table.range_key_attr])
        if range_value.type != table.range_key_type:
            raise InvalidAttributeTypeError(
                table.range_key_attr,
                expected_type=table.range_key_type,
                actual_type=range_value.type,
            )
    table._validate_item_types(attrs)
    table._validate_key_sizes(attrs)
    Item(hash_value, range_value, attrs)  # the item size limit


def _try_update(
    backend: Any,
    table: Any,
    key: dict[str, Any],
    current: Any,
    *,
    expression: str,
    names: dict[str, Any] | None,
    values: dict[str, Any] | None,
) -> None:
    """moto's UpdateItem validation and execution, on a copy of the one item it touches."""
    ast = UpdateExpressionParser.make(expression)
    if current is None:
        hash_value, range_value = backend.get_keys_value(table, key)
        probe = Item(hash_value, range_value, {k: v for k, v in key.items()})
    else:
        probe = copy.deepcopy(current)
    validated = UpdateExpressionValidator(
        ast,
        expression_attribute_names=names,
        expression_attribute_values=values,
        item=probe,
        table=table,
    ).validate()
    validated.normalize()
    try:
        UpdateExpressionExecutor(validated, probe, names).execute()
    except ItemSizeTooLarge as error:
        raise ItemSizeToUpdateTooLarge() from error
