"""S3 adapter of the ingest: read a contacts file as a stream, write its rejects report.

The S3 client is passed in (built once per execution environment by the handler).
"""

from contextlib import closing
from typing import BinaryIO

from botocore.exceptions import ClientError

from shared.s3_events import S3Object

REJECTED_PREFIX = "rejected/"
REPORT_SUFFIX = ".errors.jsonl"
# The object (or the version the event names) is gone: deleted before it was read.
MISSING_CODES = {"NoSuchKey", "NoSuchVersion"}


class ObjectMissing(Exception):
    """The object the event names no longer exists; retrying cannot bring it back."""


def report_key(s3_object: S3Object) -> str:
    """rejected/<key>/<version>.errors.jsonl: one report per version of a key (the versionId, or
    the sequencer when the bucket is unversioned, as in the file id), so a version's steps never
    read or overwrite another's."""
    version = s3_object.version_id or s3_object.sequencer
    return f"{REJECTED_PREFIX}{s3_object.key}/{version}{REPORT_SUFFIX}"


def open_object(s3, s3_object: S3Object) -> BinaryIO:
    """The object's body as a stream (botocore's StreamingBody: read in chunks, never whole).

    A versioned object is read at the version the event names, so a later upload under the same
    key never changes what this file id ingests.
    """
    version = {"VersionId": s3_object.version_id} if s3_object.version_id else {}
    try:
        return s3.get_object(Bucket=s3_object.bucket, Key=s3_object.key, **version)["Body"]
    except ClientError as error:
        if error.response["Error"]["Code"] in MISSING_CODES:
            raise ObjectMissing(s3_object.file_id) from error
        raise


def put_report(s3, bucket: str, key: str, report: BinaryIO) -> None:
    """Upload a report spooled to a file (bounded: ingest.MAX_REPORT_ROWS lines, one request)."""
    report.seek(0)
    s3.put_object(Bucket=bucket, Key=key, Body=report, ContentType="application/x-ndjson")
    report.seek(0, 2)


def read_report(s3, bucket: str, key: str, spool: BinaryIO, lines: int) -> None:
    """The first `lines` lines of a report written by an earlier step of the same file, into the
    spool (lines a crashed step added after its last saved progress are dropped)."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    with closing(body):
        for number, line in enumerate(body.iter_lines(keepends=True), start=1):
            if number > lines:
                break
            spool.write(line)
