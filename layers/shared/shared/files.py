"""Contact files read row by row from binary streams. Pure: no AWS calls.

Formats by suffix: `.jsonl` (one JSON object per line) and `.csv` (header row), each optionally
`.gz`. Text is UTF-8, with or without a BOM. A stream is never read whole: memory stays flat in
the file's size (a 1 GB file fits a 256 MB function), one bounded line at a time.

Per line, `read_rows` yields a `Row` (the raw fields, for the model to validate) or a `BadLine`
(the line is not a record at all). Problems with the file as a whole raise `FileRejected`.
"""

import csv
import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

JSONL = ".jsonl"
CSV = ".csv"
GZIP = ".gz"
# A contact row is well under 1 KB; a longer line means this is not a contacts export, and
# reading it whole could exhaust the function's memory.
MAX_LINE_CHARS = 1 << 20


class FileRejected(Exception):
    """The file as a whole cannot be read as contacts; retrying cannot change that."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Row:
    line: int
    fields: dict[str, Any]
    text_values: bool  # CSV: every value is a string


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str


def file_format(name: str) -> tuple[str, bool]:
    """(JSONL or CSV, gzip-compressed?) by the name's suffix; FileRejected for any other."""
    compressed = name.endswith(GZIP)
    base = name.removesuffix(GZIP) if compressed else name
    for fmt in (JSONL, CSV):
        if base.endswith(fmt):
            return fmt, compressed
    raise FileRejected(
        "not a contacts file: the name must end in .jsonl, .csv, .jsonl.gz or .csv.gz"
    )


def read_rows(name: str, stream: BinaryIO) -> Iterator[Row | BadLine]:
    """The rows of a file in order; raises FileRejected (possibly after some rows) for another
    suffix, an empty file, a corrupt gzip stream, text that is not UTF-8 or an overlong line."""
    fmt, compressed = file_format(name)
    binary = gzip.GzipFile(fileobj=stream, mode="rb") if compressed else stream
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="")
    try:
        yield from (_jsonl_rows if fmt == JSONL else _csv_rows)(_bounded_lines(text))
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise FileRejected("not a valid gzip stream (corrupt or truncated)") from None
    except UnicodeDecodeError:
        raise FileRejected("not UTF-8 text") from None


def _bounded_lines(text: io.TextIOBase) -> Iterator[str]:
    number = 0
    while line := text.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise FileRejected(f"line {number} is longer than {MAX_LINE_CHARS} characters")
        yield line


def _jsonl_rows(lines: Iterable[str]) -> Iterator[Row | BadLine]:
    empty = True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue  # blank lines (a trailing newline, say) are not records
        empty = False
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            yield BadLine(number, "not valid JSON")
            continue
        if isinstance(fields, dict):
            yield Row(number, fields, text_values=False)
        else:
            yield BadLine(number, "not a JSON object")
    if empty:
        raise FileRejected("empty file")


def _csv_rows(lines: Iterable[str]) -> Iterator[Row | BadLine]:
    # A header without rows is a valid export of a quiet hour; no header at all is an empty file.
    reader = csv.DictReader(lines)
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            # csv's messages name the problem (NUL byte, field too large), never the content.
            yield BadLine(reader.line_num, f"not valid CSV: {error}")
            continue
        if None in fields:
            yield BadLine(reader.line_num, "more values than the header has columns")
        else:
            yield Row(reader.line_num, fields, text_values=True)
    if not reader.fieldnames:
        raise FileRejected("empty file")
