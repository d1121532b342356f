"""The ingest of one contacts file (Amazon Connect's contact records as Firehose writes them, or a
flat export): stream it, validate each record, store the good ones (the newest copy of each
contact wins, by the record's own version), report the bad ones, record the file's outcome. AWS
clients are passed in; the steps are files (format), model (contract), aws.table (DynamoDB) and
aws.files_bucket (S3).

No content of a row can fail its file: whatever a row holds, it is stored or reported with its
line number. Outcomes, in the file's PROCESSING_LOG item:

- PROCESSED: every record read; valid ones stored (or superseded by a newer copy of their
  contact: keys.contact_version), bad ones reported.
- REJECTED_FILE: the report ends in one file-level reason (none of the formats, empty, a CSV
  header without the contract's columns, corrupt gzip, past the size bounds); rows read before
  it stay stored.
- SKIPPED_MISSING: deleted before it was read.
- STALE: a newer version of the same key claimed it first (applied, or rejected: S3 delivered
  this event late); it changes nothing.
- IN_PROGRESS: too big for one invocation so far. The progress (next line, counts, report) is
  kept in the log and the file is resumed by a continuation message (s3_events.continuation).

Runs: the log belongs to one run of the file, the one its S3 event started (no run number) or the
latest `ops file reprocess` (1, 2, ...), which replaces the log of an earlier run when its first
step starts. Until then a step of the earlier run is the log's and goes on (with its report); the
reprocess run ends with its own report written whole over the earlier one (empty if it reports
nothing). A step of any other run (a continuation still queued or dead-lettered when the file
was reprocessed) is OBSOLETE: it stores no log, no report and no continuation, and a step that
was running when a newer run took over finds its log write refused and ends OBSOLETE too.

Anything raised is transient (throttling after retries, 5xx, timeouts) and the step is retried
from the last saved progress; its writes are versioned, so a re-run leaves one item per contact.
"""

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import IO, Any

from aws_lambda_powertools import Logger

from shared import files, keys, model
from shared.aws import files_bucket, table
from shared.s3_events import FileTask

PROCESSED = "PROCESSED"
REJECTED_FILE = "REJECTED_FILE"
SKIPPED_MISSING = "SKIPPED_MISSING"
STALE = "STALE"
IN_PROGRESS = "IN_PROGRESS"
FINAL_OUTCOMES = (PROCESSED, REJECTED_FILE, SKIPPED_MISSING, STALE)
# A step's outcome, never a log's: the step belongs to a run the log no longer holds.
OBSOLETE = "OBSOLETE"

# The report lists this many rejected rows, then counts the rest: a file of garbage must not
# write a report many times its own size.
MAX_REPORT_ROWS = 1000
# A write (one transaction) per this many contacts, or per this many rows when few of them are
# contacts; after each, the clock is read and the progress may be saved.
CONTACTS_PER_WRITE = 50
ROWS_PER_WRITE = 1000
# A step stops for a continuation once less than its margin is left: a quarter of the time the
# invocation started with, at most this, plus twice its longest write so far (a loaded table
# or throttling makes writes slow): enough to finish a write and save the progress.
MAX_MARGIN_SECONDS = 30.0


def step_margin(seconds_at_start: float) -> float:
    """The margin of every step of one invocation, from the time it started with (not the time
    left when a file starts: the fifth file of a batch would get almost none)."""
    return min(MAX_MARGIN_SECONDS, seconds_at_start / 4)


@dataclass
class Progress:
    """A file's counts and the last line done, as its processing log keeps them between
    invocations."""

    next_line: int = 0  # every line up to this one is stored or reported
    steps: int = 0  # invocations that read the file (more than one: continued)
    rows_ok: int = 0
    rows_superseded: int = 0
    rows_rejected: int = 0
    report_rows: int = 0  # rejected rows listed in the report

    @classmethod
    def of(cls, log: dict[str, Any]) -> "Progress":
        return cls(**{name: int(log.get(name, 0)) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Settings:
    """What turns a record into a contact: the deployment's parameters and the ingest's clock."""

    goodwill_wait_seconds: int
    survey_attributes: model.SurveyAttributes
    ingested_at: datetime


@dataclass(frozen=True)
class StepContext:
    """What a file's step works with besides its task: the AWS clients and the contacts table,
    the settings that turn records into contacts, the invocation's clock and margin
    (step_margin), and the handler's logger (for the step's transitions)."""

    s3: Any
    dynamodb: Any
    table_name: str
    settings: Settings
    seconds_left: Callable[[], float]
    margin: float
    logger: Logger

    def write_contacts(self, writes: list[table.ContactWrite]) -> table.WriteResult:
        return table.write_contacts(self.dynamodb, self.table_name, writes)


@dataclass(frozen=True)
class FileOutcome:
    file_id: str
    outcome: str
    rows_ok: int
    rows_superseded: int
    rows_rejected: int
    report_key: str | None
    next_line: int  # IN_PROGRESS: the line to resume after
    run: int | None
    run_started_at: str | None  # fixed-width UTC; None for an OBSOLETE step


class FileReport:
    """What happened to a file's rows: counts, and the lines of its report
    (files_bucket.report_key) spooled to a temporary file (not memory).

    Row lines carry the line number, the contact_id when it is a valid one, and the reasons;
    never the row's other values: the original file beside it holds those, and a copy would
    spread phone numbers and emails further.
    """

    def __init__(self, spool: IO[bytes], progress: Progress):
        self.spool = spool
        self.progress = progress

    @property
    def has_lines(self) -> bool:
        return self.spool.tell() > 0

    def mark(self) -> tuple[int, int, int]:
        """Where the report stands: rolled back to, rows read past it are reported again."""
        return self.spool.tell(), self.progress.rows_rejected, self.progress.report_rows

    def roll_back(self, mark: tuple[int, int, int]) -> None:
        position, self.progress.rows_rejected, self.progress.report_rows = mark
        self.spool.seek(position)
        self.spool.truncate()

    def contact_write(
        self, row: files.Row | files.BadLine, settings: "Settings"
    ) -> table.ContactWrite | None:
        """The row's contact to store, or None once the row is reported. Its version is its
        own (keys.contact_version), never the file's: an old copy re-uploaded changes nothing."""
        if isinstance(row, files.BadLine):
            self.reject_row(row.line, None, [row.reason])
            return None
        try:
            contact = model.parse_contact(
                row.fields,
                text_values=row.text_values,
                ingested_at=settings.ingested_at,
                survey_attributes=settings.survey_attributes,
            )
            if isinstance(contact, model.Contact):
                item = contact.to_item(settings.goodwill_wait_seconds)
                return table.ContactWrite(item, keys.contact_version(item), row.line)
            reasons = contact
        except Exception as error:  # no content of a row may fail its file
            reasons = [f"row could not be read ({type(error).__name__})"]
        contact_id = row.fields.get("contact_id", row.fields.get(model.CONNECT_CONTACT_ID))
        self.reject_row(row.line, contact_id, reasons)
        return None

    def count(self, result: table.WriteResult) -> None:
        self.progress.rows_ok += len(result.applied)
        self.progress.rows_superseded += len(result.superseded)
        for write in result.refused:
            self.reject_row(write.line, write.contact_id, ["refused by the table"])

    def reject_row(self, line: int, contact_id: Any, reasons: list[str]) -> None:
        self.progress.rows_rejected += 1
        if self.progress.report_rows >= MAX_REPORT_ROWS:
            return
        self.progress.report_rows += 1
        entry: dict[str, Any] = {"level": "row", "line": line}
        if isinstance(contact_id, str) and model.CONTACT_ID.fullmatch(contact_id):
            entry["contact_id"] = contact_id
        self._write({**entry, "reasons": reasons})

    def reject_file(self, reason: str) -> None:
        self._write({"level": "file", "reasons": [reason]})

    def finish(self) -> None:
        unlisted = self.progress.rows_rejected - self.progress.report_rows
        if unlisted:
            self._write({"level": "summary", "rows_not_listed": unlisted})

    def _write(self, entry: dict[str, Any]) -> None:
        self.spool.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")


def ingest_file(task: FileTask, context: StepContext) -> FileOutcome:
    s3_object = task.s3_object
    _trace(context.logger, "file step started", "step_started", task, after_line=task.after_line)
    log = table.file_log(context.dynamodb, context.table_name, s3_object.file_id)
    if log is None or _number(task.run) > _number(log.get("run")):
        return _start_run(task, log, context)
    if of_earlier_run(task, log):
        return _obsolete(task)  # the file was reprocessed after this step was sent
    started = log["run_started_at"] if task.run is not None else s3_object.event_time
    if log["outcome"] in FINAL_OUTCOMES:  # done before: a duplicate or a late retry
        return _outcome(task, log["outcome"], Progress.of(log), log.get("report_key"), started)
    progress = Progress.of(log)
    if progress.next_line != task.after_line:
        # An earlier run of this step saved its progress: the next step is due (again).
        return _outcome(task, IN_PROGRESS, progress, log.get("report_key"), started)
    return _resume(task, progress, started, context)


def _start_run(
    task: FileTask, replaced: dict[str, Any] | None, context: StepContext
) -> FileOutcome:
    """A run's first step: its log replaces none, or an earlier run's. The first run started
    with the upload (the event's time); a reprocess run starts now. The key's newest version is
    claimed once per file: a run replacing one that claimed it (any outcome but STALE) applies
    the file as that run did, even if a newer version came since (a file overtaken while in
    progress is finished; contact by contact, the newer export wins). Claimed again, it would end
    STALE, "changed nothing", with the rows the earlier run stored."""
    s3_object = task.s3_object
    if task.after_line:
        raise LookupError(f"no processing log of run {task.run} to resume {s3_object.file_id}")
    if task.run is None:
        started = s3_object.event_time
    else:
        started = keys.utc_timestamp(context.settings.ingested_at)
    if replaced is None or replaced["outcome"] == STALE:
        newer = table.claim_newest_version(context.dynamodb, context.table_name, s3_object)
    else:
        newer = None
    progress = Progress()
    values = {"outcome": IN_PROGRESS if newer is None else STALE, "run_started_at": started}
    if newer is not None:
        values["superseded_by"] = newer
    if not table.write_file_log(
        context.dynamodb,
        context.table_name,
        s3_object,
        {**values, **asdict(progress)},
        run=task.run,
        starts_run=True,
    ):
        return _obsolete(task)  # a newer run started meanwhile
    _trace(context.logger, "file run started", "run_started", task)
    if newer is not None:
        return _outcome(task, STALE, progress, None, started)
    return _resume(task, progress, started, context)


def of_earlier_run(task: FileTask, log: dict[str, Any]) -> bool:
    """The step's run is older than the one the file's log holds: the fence of a reprocess."""
    return _number(task.run) < _number(log.get("run"))


def _trace(logger: Logger, message: str, transition: str, task: FileTask, **fields: Any) -> None:
    """A file step's transition (harness.trace checks runs against them): one line a step, never
    one a row (ingest is the hot path)."""
    logger.info(
        message, transition=transition, file_id=task.s3_object.file_id, run=task.run, **fields
    )


def _number(run: Any) -> int:
    """A run's order: the first run (no number) before reprocess run 1."""
    return 0 if run is None else int(run)


def _resume(task: FileTask, progress: Progress, started: str, context: StepContext) -> FileOutcome:
    """Read the file after progress.next_line to its end, or until time runs short."""
    s3_object = task.s3_object
    progress.steps += 1
    report_key = files_bucket.report_key(s3_object)
    with tempfile.TemporaryFile() as spool:
        if progress.report_rows:
            files_bucket.read_report(
                context.s3, s3_object.bucket, report_key, spool, progress.report_rows
            )
        report = FileReport(spool, progress)
        outcome = PROCESSED
        try:
            with closing(files_bucket.open_object(context.s3, s3_object)) as body:
                rows = files.read_rows(
                    s3_object.key,
                    body,
                    after_line=progress.next_line,
                    csv_columns=model.REQUIRED_INPUT_FIELDS,
                )
                batches = _batches(rows, lambda row: report.contact_write(row, context.settings))
                if not _write_all(batches, report, context):
                    outcome = IN_PROGRESS
        except files_bucket.ObjectMissing:
            outcome = SKIPPED_MISSING
        except files.FileRejected as rejection:
            report.reject_file(rejection.reason)
            outcome = REJECTED_FILE
        if outcome != IN_PROGRESS:
            report.finish()
        # A reprocess run ends with its report written, empty if it reports nothing: it
        # replaces whole whatever an earlier run left there (ops deletes none: a step of that
        # run, due until this run's first step takes the log over, reads it).
        if report.has_lines or (task.run is not None and outcome != IN_PROGRESS):
            # The contacts' writes are versioned and harmless, a report is not: a newer run
            # that took over while this step ran has written its own.
            log = table.file_log(context.dynamodb, context.table_name, s3_object.file_id)
            if log is None or _number(log.get("run")) != _number(task.run):
                return _obsolete(task)
            files_bucket.put_report(context.s3, s3_object.bucket, report_key, spool)
        else:
            report_key = None
    values = {"outcome": outcome, "run_started_at": started, **asdict(progress)}
    if report_key is not None:
        values["report_key"] = report_key
    if not table.write_file_log(
        context.dynamodb, context.table_name, s3_object, values, run=task.run, starts_run=False
    ):
        return _obsolete(task)
    return _outcome(task, outcome, progress, report_key, started)


def _write_all(
    batches: Iterable[tuple[list[table.ContactWrite], int, bool]],
    report: FileReport,
    context: StepContext,
) -> bool:
    """Write the batches, each while the next one is read and parsed (the write waits on
    DynamoDB, the parse on the CPU); a batch's lines count as done, and the clock is read, once
    its write has returned. False when time ran short: the progress stops after the last batch
    written, and the one read meanwhile is taken out of the report, to be read again. Whatever
    is raised, the batch in flight is finished first: the rows read before a problem with the
    file stay stored."""
    progress = report.progress
    write, seconds_left, margin = context.write_contacts, context.seconds_left, context.margin
    longest_write = 0.0
    in_flight = None  # (the write, its batch's end line, the report after that batch, started)
    with ThreadPoolExecutor(max_workers=1) as writer:
        try:
            for writes, end_line, _ in batches:
                if in_flight is not None:
                    future, done_line, mark, started = in_flight
                    result, in_flight = future.result(), None
                    left = seconds_left()
                    longest_write = max(longest_write, started - left)
                    short = left < margin + 2 * longest_write
                    if short:
                        report.roll_back(mark)
                    report.count(result)
                    progress.next_line = done_line
                    if short:
                        return False
                in_flight = (writer.submit(write, writes), end_line, report.mark(), seconds_left())
        finally:
            if in_flight is not None:
                future, done_line, _, _ = in_flight
                report.count(future.result())
                progress.next_line = done_line
    return True


def _batches(
    rows: Iterable[files.Row | files.BadLine],
    contact_write: Callable[[files.Row | files.BadLine], table.ContactWrite | None],
) -> Iterator[tuple[list[table.ContactWrite], int, bool]]:
    """The contacts to write, CONTACTS_PER_WRITE at a time (or fewer after ROWS_PER_WRITE rows),
    each batch with the last line it covers and whether rows follow it. The rows read before a
    file-level problem come out before it is raised, so they are stored."""
    writes: list[table.ContactWrite] = []
    rows_read, end_line = 0, 0
    following = iter(rows)
    try:
        row = next(following, None)
        while row is not None:
            if (write := contact_write(row)) is not None:
                writes.append(write)
            rows_read, end_line = rows_read + 1, row.end_line
            row = next(following, None)  # read ahead: is there more after this batch?
            if len(writes) == CONTACTS_PER_WRITE or rows_read == ROWS_PER_WRITE or row is None:
                yield writes, end_line, row is not None
                writes, rows_read = [], 0
    except files.FileRejected:
        if rows_read:
            yield writes, end_line, False
        raise


def _outcome(
    task: FileTask, outcome: str, progress: Progress, report_key: str | None, started: str
) -> FileOutcome:
    return FileOutcome(
        task.s3_object.file_id,
        outcome,
        progress.rows_ok,
        progress.rows_superseded,
        progress.rows_rejected,
        report_key,
        progress.next_line,
        task.run,
        started,
    )


def _obsolete(task: FileTask) -> FileOutcome:
    return FileOutcome(task.s3_object.file_id, OBSOLETE, 0, 0, 0, None, 0, task.run, None)
