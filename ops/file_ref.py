"""A contact file as the operator names it (s3://bucket/key, optionally a version) and as the
ingest identifies it (its file id: bucket/key#version, s3_events.S3Object.file_id)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from harness.stack import StackClient

from ops.errors import OpsError


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
        return f"s3://{self.bucket}/{self.key}"


def resolve(stack: StackClient, url: str, version_id: str | None) -> FileRef:
    """The file of the stack's bucket; without a version, the object's current one."""
    parsed = urlparse(url)
    bucket, key = parsed.netloc, parsed.path.removeprefix("/")
    if parsed.scheme != "s3" or not bucket or not key:
        raise OpsError(f"{url!r} is not s3://bucket/key")
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
