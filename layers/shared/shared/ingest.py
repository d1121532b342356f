"""The ingest of one contacts file: stream it, validate each row, write the good rows, report the
bad ones, record the file's outcome. AWS clients are passed in; the steps are files (format),
model (contract), store (DynamoDB) and objects (S3).

Permanent outcomes are returned: PROCESSED (bad rows, if any, reported), REJECTED_FILE (the
report ends in one file-level reason; rows read before it were valid and stay written),
SKIPPED_MISSING (deleted before it was read). Anything raised is
transient (throttling after retries, 5xx, timeouts) and the whole file is retried; its row writes
are idempotent, so a retry after a crash part-way leaves one item per contact.
"""

import json
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import IO, Any

from shared import files, model, objects, store
from shared.s3_events import S3Object

PROCESSED = "PROCESSED"
REJECTED_FILE = "REJECTED_FILE"
SKIPPED_MISSING = "SKIPPED_MISSING"


@dataclass(frozen=True)
class FileOutcome:
    file_id: str
    outcome: str
    rows_ok: int
    rows_rejected: int
    report_key: str | None


class FileReport:
    """What happened to a file's rows: counts, and the lines of rejected/<key>.errors.jsonl
    spooled to a temporary file (not memory).

    Row lines carry the line number, the contact_id when it is a valid one, and the reasons;
    never the row's other values: the original file beside it holds those, and a copy would
    spread phone numbers and emails further.
    """

    def __init__(self, spool: IO[bytes]):
        self.spool = spool
        self.rows_ok = 0
        self.rows_rejected = 0
        self.file_rejected = False
        self.has_lines = False

    def contact_items(
        self, rows: Iterable[files.Row | files.BadLine], goodwill_wait_seconds: int
    ) -> Iterator[dict[str, Any]]:
        """The CONTACT items of the valid rows; the others are reported. A file-level problem
        ends the items without an error: rows before it were valid contacts and are kept."""
        try:
            for row in rows:
                contact = (
                    [row.reason]
                    if isinstance(row, files.BadLine)
                    else model.parse_contact(row.fields, text_values=row.text_values)
                )
                if isinstance(contact, model.Contact):
                    self.rows_ok += 1
                    yield contact.to_item(goodwill_wait_seconds)
                else:
                    self.reject_row(row, contact)
        except files.FileRejected as rejection:
            self.reject_file(rejection.reason)

    def reject_row(self, row: files.Row | files.BadLine, reasons: list[str]) -> None:
        self.rows_rejected += 1
        entry: dict[str, Any] = {"level": "row", "line": row.line}
        contact_id = row.fields.get("contact_id") if isinstance(row, files.Row) else None
        if isinstance(contact_id, str) and model.CONTACT_ID.fullmatch(contact_id):
            entry["contact_id"] = contact_id
        self._write({**entry, "reasons": reasons})

    def reject_file(self, reason: str) -> None:
        self.file_rejected = True
        self._write({"level": "file", "reasons": [reason]})

    def _write(self, entry: dict[str, Any]) -> None:
        self.has_lines = True
        self.spool.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")


def ingest_file(
    s3_object: S3Object, *, s3, dynamodb, table_name: str, goodwill_wait_seconds: int
) -> FileOutcome:
    with tempfile.TemporaryFile() as spool:
        report = FileReport(spool)
        try:
            files.file_format(s3_object.key)  # before downloading anything
            with closing(objects.open_object(s3, s3_object)) as body:
                rows = files.read_rows(s3_object.key, body)
                items = report.contact_items(rows, goodwill_wait_seconds)
                store.put_contacts(dynamodb, table_name, items)
            outcome = REJECTED_FILE if report.file_rejected else PROCESSED
        except objects.ObjectMissing:
            outcome = SKIPPED_MISSING
        except files.FileRejected as rejection:
            report.reject_file(rejection.reason)
            outcome = REJECTED_FILE

        report_key = objects.report_key(s3_object.key) if report.has_lines else None
        if report_key is not None:
            objects.put_report(s3, s3_object.bucket, report_key, spool)
    store.record_file_outcome(
        dynamodb,
        table_name,
        s3_object,
        outcome=outcome,
        rows_ok=report.rows_ok,
        rows_rejected=report.rows_rejected,
        report_key=report_key,
    )
    return FileOutcome(s3_object.file_id, outcome, report.rows_ok, report.rows_rejected, report_key)
