"""moto 5.2.5's S3 event notifications as S3 sends them: the record in AWS's shape (eventVersion,
key encoding, versionId, sequencer, identities), each record sent ``duplicate_deliveries`` times
(S3 delivers at least once)."""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

from moto.s3 import notifications

from emulator.services import context, patching

log = logging.getLogger("emulator.moto")


def install() -> None:
    _patch_s3_event_shape()
    _patch_s3_duplicate_notifications()


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
