"""Every in-process patch of moto 5.2.5 the local stack relies on, one per moto gap.

``install(runtime)`` applies them once (idempotent) in the process that runs the moto server.
Each patch says which gap it closes and where in moto the behaviour lives. Gaps closed by the
deployer instead (bucket notifications, layers, code locations) live in stack.py.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from moto.awslambda.models import LambdaBackend
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import StreamShard
from moto.s3 import notifications
from moto.sqs.models import sqs_backends

try:
    from moto.kinesis.models import kinesis_backends
except ImportError:  # pragma: no cover - kinesis extra not installed
    kinesis_backends = None

if TYPE_CHECKING:
    from emulator.runtime import Runtime

_installed = False
_install_lock = threading.Lock()
_runtime: Runtime | None = None


def set_runtime(runtime: Runtime | None) -> None:
    """The runtime that Lambda Invoke requests run on (None: moto's own behaviour)."""
    global _runtime  # noqa: PLW0603
    _runtime = runtime


def install() -> None:
    global _installed  # noqa: PLW0603
    with _install_lock:
        if _installed:
            return
        _patch_event_source_mapping_delivery()
        _patch_unchanged_put_item_stream_record()
        _patch_s3_event_shape()
        _patch_lambda_invoke()
        _installed = True


def uninstall() -> None:
    """Restore moto as it was (tests share one process with plain moto users)."""
    global _installed  # noqa: PLW0603
    with _install_lock:
        for owner, name in (
            (LambdaBackend, "create_event_source_mapping"),
            (LambdaBackend, "invoke"),
            (StreamShard, "add"),
            (notifications, "_get_s3_event"),
        ):
            current = getattr(owner, name)
            original = getattr(current, "__wrapped__", None)
            if original is not None:
                setattr(owner, name, original)
        _installed = False
        set_runtime(None)


# --- Patch 1: moto's own event-source-mapping delivery -------------------------------------------
# Gap: moto.awslambda.models.LambdaBackend.create_event_source_mapping registers each mapping on
# the source: Queue.lambda_event_source_mappings (moto/sqs/models.py, Queue.add_message: every
# SendMessage receives a batch and invokes the function through Docker, ignoring FilterCriteria
# and ReportBatchItemFailures) and Table.lambda_event_source_mappings (moto/dynamodb/models/
# table.py, StreamShard.add: every write invokes the function and, on success, empties the shard,
# so GetRecords sees nothing). Fix: keep the mapping as data in the Lambda backend (what
# ListEventSourceMappings returns, read by emulator/esm.py) and detach it from the source.
def _patch_event_source_mapping_delivery() -> None:
    original = LambdaBackend.create_event_source_mapping

    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        esm = original(self, spec)
        _detach(esm, self.account_id, self.region_name)
        return esm

    create_event_source_mapping.__wrapped__ = original  # type: ignore[attr-defined]
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


# --- Patch 2: a stream record for an unchanged PutItem ------------------------------------------
# Gap: moto/dynamodb/models/table.py Table.put_item calls StreamShard.add(old, new) for every
# write, so a PutItem that rewrites an identical item yields a MODIFY record. DynamoDB Streams
# writes a record only when the item actually changed.
def _patch_unchanged_put_item_stream_record() -> None:
    original = StreamShard.add

    def add(self: Any, old: Any, new: Any) -> None:
        if old is not None and new is not None and old.to_json() == new.to_json():
            return
        original(self, old, new)

    add.__wrapped__ = original  # type: ignore[attr-defined]
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

    _get_s3_event.__wrapped__ = original  # type: ignore[attr-defined]
    notifications._get_s3_event = _get_s3_event


# --- Patch 4: Lambda Invoke --------------------------------------------------------------------
# Gap: moto/awslambda/models.py LambdaBackend.invoke -> LambdaFunction.invoke runs the code in a
# Docker container (none here). Functions the runtime knows run on its workers instead, with the
# Invoke API's response shape: payload, X-Amz-Function-Error: Unhandled and the error document on
# failure, 202 for InvocationType=Event (run in the background), 204 for DryRun.
def _patch_lambda_invoke() -> None:
    original = LambdaBackend.invoke

    def invoke(  # noqa: PLR0917 - moto's signature
        self: Any,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> str | bytes | None:
        runtime = _runtime
        fn = self.get_function(function_name, qualifier)
        if runtime is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        if runtime.resolve(fn.function_name) is None:
            # A function moto knows but the runtime does not (yet): never Docker.
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(
                {
                    "errorType": "Emulator.FunctionNotLocal",
                    "errorMessage": f"{fn.function_name} has no local code (or the stack is "
                    "still deploying)",
                }
            ).encode()
            response_headers["Content-Length"] = str(len(payload))
            return payload
        event = body.encode() if isinstance(body, str) else (body or b"")
        event = event or b"{}"
        try:
            json.loads(event)
        except ValueError:
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(
                {
                    "errorMessage": "Could not parse request body into json",
                    "errorType": "Runtime.UnmarshalError",
                }
            ).encode()
            response_headers["Content-Length"] = str(len(payload))
            return payload
        invocation_type = headers.get("X-Amz-Invocation-Type", "RequestResponse")
        response_headers["X-Amz-Executed-Version"] = "$LATEST"
        if invocation_type == "DryRun":
            return b""
        if invocation_type == "Event":
            threading.Thread(
                target=runtime.invoke, args=(fn.function_name, event), daemon=True
            ).start()
            return b""
        result = runtime.invoke(fn.function_name, event)
        if not result.ok:
            response_headers["x-amz-function-error"] = "Unhandled"
        payload = result.raw
        response_headers["Content-Length"] = str(len(payload))
        return payload

    invoke.__wrapped__ = original  # type: ignore[attr-defined]
    LambdaBackend.invoke = invoke
