"""A contact file as the operator names it (s3://bucket/key, optionally a version) and as the
ingest identifies it (its file id: bucket/key#version, s3_events.S3Object.file_id)."""

from __future__ import annotations

from dataclasses import dataclass

from ops.errors import OpsError
from ops.stack import Stack

S3_SCHEME = "s3://"


@dataclass(frozen=True)
class FileRef:
    bucket: str
    key: str
    version: str  # the versionId (the sequencer on an unversioned bucket)

    @property
    def file_id(self) -> str:
        return f"{self.bucket}/{self.key}#{self.version}"

    @property
    def url(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.key}"


def split_url(url: str) -> tuple[str, str]:
    """s3://bucket/key -> (bucket, key), split by hand: a key is any text, so `#` and `?` are part
    of it (urlparse cuts them off as fragment and query) and `%` is itself, never an escape."""
    bucket, slash, key = url.removeprefix(S3_SCHEME).partition("/")
    if not url.startswith(S3_SCHEME) or not bucket or not slash or not key:
        raise OpsError(f"{url!r} is not s3://bucket/key")
    return bucket, key


def resolve(stack: Stack, url: str, version_id: str | None) -> FileRef:
    """The file of the stack's bucket; without a version, the object's current one."""
    bucket, key = split_url(url)
    if bucket != stack.bucket:
        raise OpsError(f"{bucket} is not the stack's contacts bucket ({stack.bucket})")
    if version_id:
        return FileRef(bucket, key, version_id)
    try:
        head = stack.s3.head_object(Bucket=bucket, Key=key)
    except stack.s3.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            raise OpsError(f"no object {url} (give --version-id for a deleted one)") from None
        raise
    version = head.get("VersionId")
    if not version or version == "null":
        raise OpsError(f"{url} has no version id: give --version-id (the processing log's version)")
    return FileRef(bucket, key, version)
