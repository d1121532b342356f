"""moto 5.2.6's S3 event notifications as S3 sends them: the record in AWS's shape (eventVersion,
key encoding, versionId, sequencer, identities), each record sent ``duplicate_deliveries`` times
(S3 delivers at least once), only to a queue whose policy lets S3 send for the bucket; and
AWS::S3::BucketPolicy in CloudFormation."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

from moto.iam.access_control import PermissionResult
from moto.s3 import notifications
from moto.s3.exceptions import InvalidArgumentError
from moto.s3.models import FakeBucket, s3_backends
from moto.utilities.utils import get_partition

from emulator.iam.resources import denies_everyone, service_may
from emulator.services import context, patching
from emulator.services.cloudformation import StackResource

log = logging.getLogger("emulator.moto")


S3 = "s3.amazonaws.com"


def install() -> None:
    _patch_s3_event_shape()
    _patch_s3_duplicate_notifications()
    _patch_s3_queue_permissions()
    _patch_bucket_policy_conditions()


# --- the S3 event notification record -------------------------------------------------
# Gap: moto/s3/notifications.py _get_s3_event builds a record without versionId, sequencer,
# userIdentity, requestParameters and responseElements, and form-encodes the key with '/' as
# %2F. AWS: the key is URL-encoded with spaces as '+' but '/' left as is; versionId is present on
# a versioned bucket; sequencer is a hex string that orders events of one key. And moto's
# eventVersion is 2.1; since 2.4 S3 sends one version for every event type, 2.5 today
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
S3_EVENT_VERSION = "2.5"
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
            record["eventVersion"] = S3_EVENT_VERSION
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

    patching.replace(notifications, "_get_s3_event", _get_s3_event)


# --- S3 event notifications delivered more than once ----------------------------------
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
                copies = context.duplicate_deliveries()
            for _ in range(copies):
                _original(account_id, event_body, target, region_name)

        patching.replace(notifications, name, send)


# --- S3 may send to a queue only as its policy allows ---------------------------------
# Gap: moto sets any notification configuration and sends to any queue. AWS (S3 user guide,
# "Granting permissions to publish event notification messages to a destination"): S3 sends as
# the service principal s3.amazonaws.com with aws:SourceArn the bucket and aws:SourceAccount its
# owner; PutBucketNotificationConfiguration is refused (InvalidArgument, "Unable to validate the
# following destination configurations") when a queue's policy does not allow that, and a
# delivery the queue's policy no longer allows is lost. A queue without a policy is let in (the
# local stack's rule for every service principal, docs/local-stack.md).
def _s3_may_send(bucket_name: str, account_id: str, queue_arn: str) -> bool:
    return service_may(
        S3,
        "sqs:SendMessage",
        queue_arn,
        source_arn=f"arn:aws:s3:::{bucket_name}",
        source_account=account_id,
    )


def _patch_s3_queue_permissions() -> None:
    original_configure = patching.original(FakeBucket, "set_notification_configuration")
    original_send = notifications._send_sqs_message

    def set_notification_configuration(self: FakeBucket, config: dict[str, Any] | None) -> None:
        queues = [q.get("Queue") for q in (config or {}).get("QueueConfiguration") or []]
        for queue_arn in queues:
            if queue_arn and not _s3_may_send(self.name, self.account_id, queue_arn):
                raise InvalidArgumentError(
                    "Unable to validate the following destination configurations",
                    queue_arn,
                    "Permissions on the destination queue do not allow S3 to publish "
                    "notifications from this bucket",
                )
        original_configure(self, config)

    def send(account_id: str, event_body: Any, queue_name: str, region_name: str) -> None:
        records = event_body.get("Records", []) if isinstance(event_body, dict) else []
        bucket = records[0]["s3"]["bucket"]["name"] if records else event_body.get("Bucket")
        queue_arn = f"arn:aws:sqs:{region_name}:{account_id}:{queue_name}"
        if bucket and not _s3_may_send(bucket, account_id, queue_arn):
            log.error("s3: %s may not send to %s (its policy): event lost", bucket, queue_name)
            return
        original_send(account_id, event_body, queue_name, region_name)

    patching.replace(FakeBucket, "set_notification_configuration", set_notification_configuration)
    patching.replace(notifications, "_send_sqs_message", send)


# --- a bucket policy's conditions ----------------------------------------------------
# Gap: moto/s3/models.py FakeBucket.get_permission (asked by the object and DeleteObjects
# handlers) applies a bucket policy's statements without their conditions, as its
# put_bucket_policy docstring says: a DenyInsecureTransport statement then refuses every
# request (403). Here the policy is decided by emulator/iam for a caller moto does not know (the
# statements naming everyone, conditions evaluated, a request over TLS): only an explicit deny
# refuses, as before. Function workers' calls are decided with their role and this policy before
# they reach moto (emulator/iam/access.py).
def _patch_bucket_policy_conditions() -> None:
    def get_permission(self: FakeBucket, action: str, resource: str) -> Any:
        if self.policy is not None and denies_everyone(action, resource):
            return PermissionResult.DENIED
        return PermissionResult.NEUTRAL

    patching.replace(FakeBucket, "get_permission", get_permission)


# --- AWS::S3::BucketPolicy in CloudFormation ------------------------------------------
# Gap: moto/cloudformation/parsing.py knows no AWS::S3::BucketPolicy (skipped), so a deployed
# bucket has no policy. Ref is the bucket's name.
class BucketPolicyModel(StackResource):
    TYPE = "AWS::S3::BucketPolicy"

    def __init__(self, bucket: str, account_id: str, region_name: str) -> None:
        self.bucket = bucket
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.bucket

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> BucketPolicyModel:
        bucket = properties["Bucket"]
        document = json.dumps(properties["PolicyDocument"]).encode()
        s3_backends[account_id][get_partition(region_name)].put_bucket_policy(bucket, document)
        return cls(bucket, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        backend = s3_backends[self.account_id][get_partition(self.region_name)]
        backend.delete_bucket_policy(self.bucket)
