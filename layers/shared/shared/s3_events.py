"""The messages of IngestQueue (SQS message bodies), parsed into the files to ingest. Pure: no
AWS calls.

IngestQueue carries S3 event notifications and, for a file too big for one invocation, the
ingest's own continuation messages (`continuation`): the same file, to be resumed after a line,
in the same run. A file's first run is the one its S3 event starts (no run number); each
`ops file reprocess` starts the next, numbered from 1, and a message of a run other than the one
the file's processing log holds is obsolete (shared.ingest).

A file is identified by bucket, URL-decoded key and version (the versionId, or the sequencer when
the bucket is unversioned), never by the SQS message id: S3 itself may deliver one event twice
under two message ids. Versions of one key are ordered by sequencer (S3's documented order of the
events of a key: compare after left-padding with zeros), never by arrival.
"""

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

from shared import keys

TEST_EVENT = "s3:TestEvent"
OBJECT_CREATED = "ObjectCreated:"
CONTINUATION = "IngestContinuation"
_SEQUENCER_WIDTH = 32
_SEQUENCER = re.compile(r"[0-9A-Fa-f]{1,64}")


class NotAnS3Event(ValueError):
    """The message body is not an S3 event notification: retrying cannot change that."""


@dataclass(frozen=True)
class S3Object:
    bucket: str
    key: str  # URL-decoded
    version_id: str | None  # None when the bucket is unversioned
    sequencer: str
    size: int
    etag: str | None
    event_time: str  # the event's eventTime, fixed-width UTC (keys.utc_timestamp)
    # The file's idempotency key: "<bucket>/<key>#<versionId or sequencer>".
    file_id: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(
            self, "file_id", f"{self.bucket}/{self.key}#{self.version_id or self.sequencer}"
        )

    @property
    def ordering_sequencer(self) -> str:
        """The sequencer in a form whose string order is S3's order of one key's events."""
        return self.sequencer.upper().rjust(_SEQUENCER_WIDTH, "0")


@dataclass(frozen=True)
class FileTask:
    """A file to ingest, from its first line or resumed after `after_line`, in run `run` (None:
    the run its S3 event started)."""

    s3_object: S3Object
    after_line: int = 0
    run: int | None = None


def continuation(task: FileTask) -> str:
    """The IngestQueue message that resumes a file after `task.after_line` in `task.run`
    (the first run's messages name none)."""
    fields = {k: v for k, v in asdict(task.s3_object).items() if k != "file_id"}
    run = {} if task.run is None else {"run": task.run}
    return json.dumps({CONTINUATION: {**fields, "after_line": task.after_line, **run}})


def parse_message(body: str) -> list[FileTask]:
    """The files an IngestQueue message names: the created objects of an S3 notification (none
    for `s3:TestEvent`, sent once when the notification is configured, or for events other than
    ObjectCreated), or the file a continuation resumes.

    Raises NotAnS3Event for anything else (the reason names the missing part, never the content).
    """
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise NotAnS3Event(f"body is not JSON ({error.__class__.__name__})") from None
    if not isinstance(message, dict):
        raise NotAnS3Event("body is not a JSON object")
    if CONTINUATION in message:
        return [_continued_file(message[CONTINUATION])]
    return [FileTask(s3_object) for s3_object in _created_objects(message)]


def _continued_file(fields: Any) -> FileTask:
    texts = ("bucket", "key", "sequencer", "event_time")
    if (
        not isinstance(fields, dict)
        or not all(isinstance(fields.get(name), str) for name in texts)
        or not _is_count(fields.get("size"))
        or not _is_count(fields.get("after_line"))
        or not ("run" not in fields or (_is_count(fields["run"]) and fields["run"] > 0))
        or fields.keys() - {"run"} != {*texts, "size", "after_line", "version_id", "etag"}
    ):
        raise NotAnS3Event("continuation does not name a file, a line and a run")
    after_line, run = fields.pop("after_line"), fields.pop("run", None)
    return FileTask(S3Object(**fields), after_line, run)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _created_objects(message: dict[str, Any]) -> list[S3Object]:
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
    version_id, sequencer = obj.get("versionId") or None, obj.get("sequencer")
    if version_id is not None and not isinstance(version_id, str):
        raise NotAnS3Event(f"record {index} has an invalid versionId")
    if not isinstance(sequencer, str) or not _SEQUENCER.fullmatch(sequencer):
        raise NotAnS3Event(f"record {index} has no sequencer")
    size = obj.get("size", 0)
    if not _is_count(size):
        raise NotAnS3Event(f"record {index} has an invalid size")
    return S3Object(
        bucket=name,
        key=unquote_plus(key),
        version_id=version_id,
        sequencer=sequencer,
        size=size,
        etag=obj.get("eTag"),
        event_time=_event_time(index, record.get("eventTime")),
    )


def _event_time(index: int, value: Any) -> str:
    try:
        moment = datetime.fromisoformat(value)
        if moment.utcoffset() is None:
            raise ValueError
        return keys.utc_timestamp(moment)
    except (TypeError, ValueError, OverflowError):
        raise NotAnS3Event(f"record {index} has no valid eventTime") from None
