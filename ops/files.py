"""`ops file status|reprocess`: a contact file's processing log, and a file ingested again; and
the files IN_PROGRESS for longer than an hour (`ops status`).

A reprocess starts a new run of the file (shared.ingest: the first run is the one its S3 event
started, reprocess runs are numbered 1, 2, ...): it sends IngestQueue the first step of the
next run, the layer's own continuation message
(s3_events.continuation, after line 0, run N + 1) for the file's S3 object as the original event
described it (sequencer and event time from the processing log, so the rows keep their export
order). Without a processing log there is nothing to reprocess: the file's S3 event has not
started its first run (it is queued, being retried, or in IngestDeadLetterQueue), and only that
event knows the sequencer and event time that order the file's rows (the object's own metadata
has neither: LastModified is not the eventTime, and S3 gives the sequencer in events alone), so a
reprocess then is refused rather than guessed. That step replaces
the log; from then on every step of an earlier run (a continuation still queued or in
IngestDeadLetterQueue) is acknowledged as obsolete, so nothing needs releasing. The report stays:
until then a step of the earlier run that comes before the new run's first is the log's and reads
it; the new run writes its own over it, whole (empty if it reports nothing). It refuses while a
step of the file holds its claim (a function is running it): that step would go on beside the new
run. Contacts already stored are rewritten as the same export (no survey or gift card again).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import ingest, keys, s3_events

from ops import file_ref, records, table
from ops.errors import Confirm, OpsError
from ops.file_ref import FileRef
from ops.stack import Stack

LOG_FIELDS = (
    "outcome",
    "run",
    "run_started_at",
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


def status(stack: Stack, url: str, version_id: str | None) -> tuple[Any, str, bool]:
    """The file's processing log; for a rejected file the report's reasons, and for a file with
    no log whether its key is where the bucket announces files to the ingest at all."""
    file = file_ref.resolve(stack, url, version_id)
    log = stack.file_log(file.file_id)
    if log is None:
        prefixes = ingested_prefixes(stack)
        data = {"file_id": file.file_id, "log": None, "ingested_prefixes": prefixes}
        if any(file.key.startswith(prefix) for prefix in prefixes):
            return data, f"{file.file_id}: no processing log (not ingested yet)", True
        text = (
            f"{file.file_id}: no processing log, and none will come: {file.key} is outside the "
            f"prefixes the bucket announces to the ingest ({', '.join(prefixes)}). Put the file "
            f"under {prefixes[0] if prefixes else 'one of them'} to have it ingested"
        )
        return data, text, False
    values = plain(log)
    shown = {name: values[name] for name in LOG_FIELDS if name in values}
    if values.get("outcome") == ingest.REJECTED_FILE and "report_key" in values:
        shown["reasons"] = file_reasons(stack, file.bucket, values["report_key"])
    text = f"{file.file_id}\n" + "\n".join(f"  {name}: {value}" for name, value in shown.items())
    return {"file_id": file.file_id, "log": shown}, text, True


def ingested_prefixes(stack: Stack) -> list[str]:
    """The key prefixes whose new objects the bucket announces (its notification filters)."""
    configuration = stack.s3.get_bucket_notification_configuration(Bucket=stack.bucket)
    return [
        rule["Value"]
        for queue in configuration.get("QueueConfigurations", [])
        for rule in queue.get("Filter", {}).get("Key", {}).get("FilterRules", [])
        if rule["Name"].lower() == "prefix"
    ]


def file_reasons(stack: Stack, bucket: str, report_key: str) -> list[str]:
    """Why a rejected file was: the file-level lines of its report (the rows' are per row)."""
    body = stack.s3.get_object(Bucket=bucket, Key=report_key)["Body"]
    lines = (json.loads(line) for line in body.iter_lines() if line.strip())
    return [reason for line in lines if line.get("level") == "file" for reason in line["reasons"]]


def reprocess(
    stack: Stack, url: str, version_id: str | None, confirm: Confirm
) -> tuple[Any, str, bool]:
    file = file_ref.resolve(stack, url, version_id)
    head = head_object(stack, file)
    log = stack.file_log(file.file_id)
    if log is None:
        raise OpsError(
            f"{file.file_id} has not been processed yet: its S3 event starts its first run (it is "
            "queued, being retried, or in IngestDeadLetterQueue: `ops dlq redrive` it). Only that "
            "event knows the file's sequencer; reprocess once `ops file status` shows a log"
        )
    values = plain(log)
    s3_object = original_object(stack, file, head, values)
    refuse_while_running(stack, file.file_id, values)
    run = values.get("run", 0) + 1
    if confirm is not None and not confirm(
        f"ingest {file.url} (version {file.version}) again as run {run}; steps of earlier runs "
        "still queued or dead-lettered will be acknowledged as obsolete"
    ):
        raise OpsError("not confirmed: nothing changed")
    message = stack.sqs.send_message(
        QueueUrl=stack.outputs["IngestQueueUrl"],
        MessageBody=s3_events.continuation(s3_events.FileTask(s3_object, 0, run)),
    )
    data = {
        "file_id": file.file_id,
        "run": run,
        "previous_outcome": values.get("outcome"),
        "message_id": message["MessageId"],
    }
    text = (
        f"{file.file_id}: run {run} queued for ingest (message {message['MessageId']}), "
        f"replacing the processing log ({data['previous_outcome'] or 'none'}) when it starts; "
        "`file status` shows the new outcome"
    )
    return data, text, True


def refuse_while_running(stack: Stack, file_id: str, log: dict[str, Any]) -> None:
    """Refuse while a function holds the claim of the step the log says is due: an in-progress
    idempotency record that has not expired (a crashed step's expires with its invocation)."""
    layer = records.persistence(stack, records.CLAIMS["IngestFunction"])
    step = {"s3_object": {"file_id": file_id}, "run": log.get("run"), "after_line": 0}
    if log.get("outcome") == ingest.IN_PROGRESS:
        step["after_line"] = log["next_line"]
    record = records.lookup(layer, step)
    if record is None or record.status != "INPROGRESS":
        return
    until = (record.in_progress_expiry_timestamp or 0) / 1000
    if until > time.time():
        raise OpsError(
            f"{file_id}: a step of this file is running (after line {step['after_line']}; its "
            f"claim is held until {table.utc(until)}): a reprocess now would run beside it. "
            "Wait for it to end, look at `ops file status`, then reprocess if still needed"
        )


def in_progress_for_long(stack: Stack, seconds: int) -> list[dict[str, Any]]:
    """Files whose run has been IN_PROGRESS for more than `seconds`, oldest first. A Scan with a
    filter reads the whole table (about 0.5 read units per 4 KB): fine for an operator's command
    run by hand; an index kept only for this would cost a write on every step of every file."""
    now = datetime.now(UTC)
    cutoff = keys.utc_timestamp(now - timedelta(seconds=seconds))
    pages = stack.dynamodb.get_paginator("scan").paginate(
        TableName=stack.contacts_table,
        FilterExpression="#type = :log AND #outcome = :in_progress AND #started < :cutoff",
        ProjectionExpression="file_id, #run, next_line, steps, #started",
        ExpressionAttributeNames={
            "#type": "type",
            "#outcome": "outcome",
            "#run": "run",
            "#started": "run_started_at",
        },
        ExpressionAttributeValues={
            ":log": {"S": keys.PROCESSING_LOG},
            ":in_progress": {"S": ingest.IN_PROGRESS},
            ":cutoff": {"S": cutoff},
        },
    )
    found = []
    for item in (item for page in pages for item in page["Items"]):
        values = plain(item)
        started = datetime.fromisoformat(values["run_started_at"])
        found.append(values | {"in_progress_seconds": round((now - started).total_seconds())})
    return sorted(found, key=lambda file: -file["in_progress_seconds"])


def head_object(stack: Stack, file: FileRef) -> dict[str, Any]:
    try:
        return stack.s3.head_object(Bucket=file.bucket, Key=file.key, VersionId=file.version)
    except stack.s3.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound", "400"):
            raise OpsError(f"no version {file.version} of {file.url}") from None
        raise


def original_object(
    stack: Stack, file: FileRef, head: dict[str, Any], log: dict[str, Any]
) -> s3_events.S3Object:
    """The file's S3 object as its event described it (the processing log kept the sequencer and
    event time). Refused when a newer version of the key is applied and the file is done (its
    rows stored or superseded, or the file STALE): a reprocess would change nothing. A file still
    IN_PROGRESS is not refused: its runs finish it whatever came since (shared.ingest)."""
    newest = stack.get_item(keys.object_key(file.bucket, file.key))
    newest_file = newest["file_id"]["S"] if newest else None
    s3_object = s3_events.S3Object(
        bucket=file.bucket,
        key=file.key,
        version_id=file.version,
        sequencer=log["sequencer"],
        size=head["ContentLength"],
        etag=head.get("ETag", "").strip('"') or None,
        event_time=log["event_time"],
    )
    if (
        log["outcome"] != ingest.IN_PROGRESS
        and newest
        and newest_file != file.file_id
        and (newest["sequencer"]["S"] > s3_object.ordering_sequencer)
    ):
        raise OpsError(
            f"{file.file_id} is superseded by {newest_file}: a reprocess would change nothing "
            "(reprocess the newer version)"
        )
    return s3_object
