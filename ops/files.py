"""`ops file status|reprocess`: a contact file's processing log, and a file ingested again.

A reprocess releases everything that makes the ingest answer "done before": the file's step
claims (records.file_steps), its processing log and its report (a fresh run writes its own),
then sends IngestQueue the message that starts the file from its first line: the layer's own
continuation message (s3_events.continuation, after line 0) for the file's S3 object as the
original event described it (sequencer and event time from the processing log, so the rows keep
their export order). Without a processing log (the event never got that far) the object itself
gives them: its LastModified, and the sequencer the key's newest-version item holds for it.
Contacts already stored are rewritten as the same export (no survey or gift card again).
"""

from __future__ import annotations

from typing import Any

from harness.stack import StackClient
from shared import keys, s3_events

from ops import file_ref, records
from ops.errors import Confirm, OpsError
from ops.file_ref import FileRef

# The sequencer of a version the key's newest-version item does not know: before any real one.
FIRST_SEQUENCER = "0"
LOG_FIELDS = (
    "outcome",
    "steps",
    "next_line",
    "rows_ok",
    "rows_superseded",
    "rows_rejected",
    "report_key",
    "superseded_by",
)


def plain(item: dict[str, dict]) -> dict[str, Any]:
    """A DynamoDB item's S and N values as strings and ints."""
    return {name: int(v["N"]) if "N" in v else v.get("S") for name, v in item.items()}


def status(stack: StackClient, url: str, version_id: str | None) -> tuple[Any, str, bool]:
    file = file_ref.resolve(stack, url, version_id)
    log = stack.file_log(file.file_id)
    if log is None:
        return {"file_id": file.file_id, "log": None}, f"{file.file_id}: no processing log", True
    values = plain(log)
    shown = {name: values[name] for name in LOG_FIELDS if name in values}
    text = f"{file.file_id}\n" + "\n".join(f"  {name}: {value}" for name, value in shown.items())
    return {"file_id": file.file_id, "log": shown}, text, True


def reprocess(
    stack: StackClient, url: str, version_id: str | None, confirm: Confirm
) -> tuple[Any, str, bool]:
    file = file_ref.resolve(stack, url, version_id)
    log = stack.file_log(file.file_id)
    s3_object = original_object(stack, file, plain(log) if log else None)
    layer = records.persistence(stack, records.CLAIMS["IngestFunction"])
    claims = records.file_steps(layer, file.file_id)
    if confirm is not None and not confirm(
        f"ingest {file.url} (version {file.version}) again, releasing its "
        f"{len(claims)} claim(s) and processing log"
    ):
        raise OpsError("not confirmed: nothing changed")
    released = records.release(layer, claims)
    report_key = plain(log).get("report_key") if log else None
    if report_key:
        stack.s3.delete_object(Bucket=file.bucket, Key=report_key)
    stack.delete_items([keys.processing_log_key(file.file_id)])
    message = stack.sqs.send_message(
        QueueUrl=stack.outputs["IngestQueueUrl"],
        MessageBody=s3_events.continuation(s3_events.FileTask(s3_object)),
    )
    data = {
        "file_id": file.file_id,
        "claims_released": released,
        "previous_outcome": plain(log).get("outcome") if log else None,
        "report_deleted": report_key,
        "message_id": message["MessageId"],
    }
    text = (
        f"{file.file_id}: {len(released)} claim(s) released, processing log "
        f"({data['previous_outcome'] or 'none'}) removed, queued for ingest "
        f"(message {message['MessageId']}); `file status` shows the new outcome"
    )
    return data, text, True


def original_object(stack: StackClient, file: FileRef, log: dict | None) -> s3_events.S3Object:
    try:
        head = stack.s3.head_object(Bucket=file.bucket, Key=file.key, VersionId=file.version)
    except stack.s3.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound", "400"):
            raise OpsError(f"no version {file.version} of {file.url}") from None
        raise
    newest = stack.get_item(keys.object_key(file.bucket, file.key))
    newest_file = newest["file_id"]["S"] if newest else None
    if log and "event_time" in log and "sequencer" in log:
        sequencer, event_time = log["sequencer"], log["event_time"]
    else:
        sequencer = newest["sequencer"]["S"] if newest_file == file.file_id else FIRST_SEQUENCER
        event_time = keys.utc_timestamp(head["LastModified"])
    s3_object = s3_events.S3Object(
        bucket=file.bucket,
        key=file.key,
        version_id=file.version,
        sequencer=sequencer,
        size=head["ContentLength"],
        etag=head.get("ETag", "").strip('"') or None,
        event_time=event_time,
    )
    if (
        newest
        and newest_file != file.file_id
        and (newest["sequencer"]["S"] > s3_object.ordering_sequencer)
    ):
        raise OpsError(
            f"{file.file_id} is superseded by {newest_file}: a reprocess would change nothing "
            "(reprocess the newer version)"
        )
    return s3_object
