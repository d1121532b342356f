"""What the integration tests share beyond the stack client: a test's own corner of the bucket,
the wait for notifications, and wait times that put a contact clearly on one side of the
goodwill rule."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from shared import keys

from harness.builders import jsonl
from harness.polling import eventually, stable
from harness.stack import StackClient
from harness.topic import TopicCapture

# Clear of any sensible GoodwillWaitSeconds on either side: the tests do not depend on its value.
# Where the local stacks of a run write their functions' logs (`up`'s default, beside the template).
LOG_DIR = Path(__file__).resolve().parents[2] / ".emulator" / "logs"
SHORT_WAIT = 5
LONG_WAIT = 100_000


class Files:
    """A test's own corner of the bucket: incoming/it-<uuid>/..., removed with every version,
    its reports and its processing logs."""

    def __init__(self, stack: StackClient):
        self.stack = stack
        self.prefix = f"incoming/it-{uuid.uuid4().hex[:12]}/"
        self.versions: list[tuple[str, str]] = []

    def put(self, name: str, body: bytes) -> tuple[str, str | None]:
        key = self.prefix + name
        response = self.stack.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=body)
        if response.get("VersionId"):
            self.versions.append((key, response["VersionId"]))
        return key, response.get("VersionId")

    def put_jsonl(self, name: str, rows: Iterable[dict | str]) -> tuple[str, str | None]:
        return self.put(name, jsonl(rows))

    def read_report(self, key: str) -> list[dict]:
        """The report of the version of `key` this test put last."""
        body = self.stack.s3.get_object(Bucket=self.stack.bucket, Key=self.report_key(key))
        return [
            json.loads(line) for line in body["Body"].read().decode().splitlines() if line.strip()
        ]

    def report_key(self, key: str) -> str:
        """rejected/<key>/<version>.errors.jsonl of the version of `key` this test put last."""
        [version] = [v for k, v in self.versions if k == key][-1:]
        return f"rejected/{key}/{version}.errors.jsonl"

    def report_exists(self, key: str) -> bool:
        try:
            self.stack.s3.head_object(Bucket=self.stack.bucket, Key=self.report_key(key))
        except self.stack.s3.exceptions.ClientError:
            return False
        return True

    def delete_objects(self) -> None:
        """Objects (every version) and reports under the prefix (the rejected/ reports are not
        ingested: they are outside incoming/)."""
        for prefix in (self.prefix, "rejected/" + self.prefix):
            delete_all_versions(self.stack.s3, self.stack.bucket, prefix)

    def cleanup(self) -> None:
        """The objects, the processing log of every file and the newest version of every key."""
        self.delete_objects()
        self.stack.delete_items(
            keys.processing_log_key(f"{self.stack.bucket}/{key}#{version}")
            for key, version in self.versions
        )
        self.stack.delete_items(
            keys.object_key(self.stack.bucket, key) for key in {key for key, _ in self.versions}
        )


def delete_all_versions(s3, bucket: str, prefix: str) -> None:
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        objects = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if objects:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})


def wait_until_drained(stack: StackClient, output: str) -> None:
    """Wait until a queue holds nothing, visible or in flight. Bounded by one visibility timeout
    and a margin: an earlier test's message that failed once is in flight that long (180 s on the
    test stage), while one that keeps failing stays until the DLQ takes it after maxReceiveCount
    receives, so the wait fails."""
    visibility = int(stack.queue_attributes(output, "VisibilityTimeout")["VisibilityTimeout"])
    eventually(lambda: stack.queue_depth(output) == 0, timeout=visibility + 60)


def wait_for_notifications(
    stack: StackClient, topic: TopicCapture, expected: Counter, timeout: float = 90
) -> Counter:
    """Until every expected notification arrived and the pipeline stopped moving; the counts."""
    contact_ids = {contact_id for _, contact_id in expected}

    def all_arrived():
        missing = set(expected) - set(topic.counts(contact_ids))
        assert not missing, f"not yet at the topic: {sorted(missing)}"
        return True

    eventually(all_arrived, timeout=timeout, interval=0.5)
    # A duplicate or a retried message comes back after its queue's visibility timeout: on a
    # deployed environment's queues that is minutes, not the local stack's seconds.
    settle = max(timeout, stack.longest_redelivery() + 30)
    eventually(stack.idle, timeout=settle, interval=0.5)
    return stable(lambda: topic.counts(contact_ids), polls=3, timeout=settle)


@contextlib.contextmanager
def quick_redelivery(stack: StackClient, output: str) -> Iterator[None]:
    """On the local stack, a queue that redelivers after 1 s meanwhile, for a test that waits
    for a message to be received maxReceiveCount times (StackClient.redelivering_at_once). A
    deployed stack's queue is left as it is."""
    if not stack.is_local:
        yield
        return
    with stack.redelivering_at_once(output):
        yield


def pipe_failure_since(stack: StackClient, since: float) -> Callable[[dict], bool]:
    """Whether a StreamFailureQueue message is ChangePipe's failure record (the pipe's ARN in
    place of a function's) sent at or after ``since``."""
    pipe = stack.resources("AWS::Pipes::Pipe")["ChangePipe"]
    pipe_arn = stack.client("pipes").describe_pipe(Name=pipe)["Arn"]

    def of_the_pipe(message: dict) -> bool:
        body = json.loads(message["Body"])
        sent = int(message["Attributes"]["SentTimestamp"]) / 1000
        return body.get("requestContext", {}).get("functionArn") == pipe_arn and sent >= since

    return of_the_pipe
