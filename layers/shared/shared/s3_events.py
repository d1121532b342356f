"""S3 event notifications as IngestQueue delivers them (the SQS message body), parsed into the
objects to ingest. Pure: no AWS calls.

A file is identified by bucket, URL-decoded key and version (the versionId, or the sequencer when
the bucket is unversioned), never by the SQS message id: S3 itself may deliver one event twice
under two message ids.
"""

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

TEST_EVENT = "s3:TestEvent"
OBJECT_CREATED = "ObjectCreated:"


class NotAnS3Event(ValueError):
    """The message body is not an S3 event notification: retrying cannot change that."""


@dataclass(frozen=True)
class S3Object:
    bucket: str
    key: str  # URL-decoded
    version_id: str | None  # None when the bucket is unversioned
    sequencer: str | None
    size: int
    etag: str | None
    # The file's idempotency key: "<bucket>/<key>#<versionId or sequencer>".
    file_id: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(
            self, "file_id", f"{self.bucket}/{self.key}#{self.version_id or self.sequencer}"
        )


def parse_notification(body: str) -> list[S3Object]:
    """The created objects a notification names; none for `s3:TestEvent` (sent once when the
    notification is configured) or for events other than ObjectCreated.

    Raises NotAnS3Event for anything else (the reason names the missing part, never the content).
    """
    try:
        message = json.loads(body)
    except ValueError as error:
        raise NotAnS3Event(f"body is not JSON ({error.__class__.__name__})") from None
    if not isinstance(message, dict):
        raise NotAnS3Event("body is not a JSON object")
    if message.get("Event") == TEST_EVENT:
        return []
    records = message.get("Records")
    if not isinstance(records, list) or not records:
        raise NotAnS3Event("body has no Records")
    created = []
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("eventName"), str):
            raise NotAnS3Event(f"record {index} has no eventName")
        if record["eventName"].startswith(OBJECT_CREATED):
            created.append(_created_object(index, record))
    return created


def _created_object(index: int, record: dict[str, Any]) -> S3Object:
    if record.get("eventSource") != "aws:s3":
        raise NotAnS3Event(f"record {index} is not from aws:s3")
    s3 = record.get("s3")
    bucket = s3.get("bucket") if isinstance(s3, dict) else None
    obj = s3.get("object") if isinstance(s3, dict) else None
    if not isinstance(bucket, dict) or not isinstance(obj, dict):
        raise NotAnS3Event(f"record {index} has no s3.bucket or s3.object")
    name, key = bucket.get("name"), obj.get("key")
    if not isinstance(name, str) or not name or not isinstance(key, str) or not key:
        raise NotAnS3Event(f"record {index} has no bucket name or object key")
    version_id, sequencer = obj.get("versionId") or None, obj.get("sequencer") or None
    if not isinstance(version_id or sequencer, str):
        raise NotAnS3Event(f"record {index} has neither versionId nor sequencer")
    size = obj.get("size", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise NotAnS3Event(f"record {index} has an invalid size")
    return S3Object(
        bucket=name,
        key=unquote_plus(key),
        version_id=version_id,
        sequencer=sequencer,
        size=size,
        etag=obj.get("eTag"),
    )
