"""Contact files read row by row from binary streams. Pure: no AWS calls.

Formats by suffix: `.jsonl` (one JSON object per line) and `.csv` (header row), each optionally
`.gz`. Text is UTF-8, with or without a BOM. A stream is never read whole: memory stays flat in
the file's size, one bounded line at a time.

Per record, `read_rows` yields a `Row` (the raw fields, for the model to validate) or a `BadLine`
(not a record at all: not JSON, broken CSV, an overlong line). Nothing a line holds raises: bytes
that are not UTF-8 come through as lone surrogates (which the model rejects), so one bad line
costs that line only. Problems with the file as a whole raise `FileRejected`: another suffix, an
empty file, a corrupt gzip stream, or a file past MAX_FILE_BYTES (decompressed) or MAX_LINES.
"""

import contextlib
import csv
import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

JSONL = ".jsonl"
CSV = ".csv"
GZIP = ".gz"
# A contact row is well under 1 KB. A longer line is reported and skipped without being held.
MAX_LINE_BYTES = 1 << 20
# Bounds of one file, decompressed: far above an export of a day of contacts, far below what would
# keep a file in flight for hours (a small gzip of blank lines expands to millions of lines).
MAX_FILE_BYTES = 1 << 30
MAX_LINES = 5_000_000
_CHUNK_BYTES = 1 << 13  # small enough that a corrupt gzip tail costs few lines
_BOM = b"\xef\xbb\xbf"


class FileRejected(Exception):
    """The file as a whole cannot be read as contacts; retrying cannot change that."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Row:
    line: int  # the record's first line (the one reported)
    end_line: int  # its last line: a CSV value may span lines
    fields: dict[str, Any]
    text_values: bool  # CSV: every value is a string


@dataclass(frozen=True)
class BadLine:
    line: int
    end_line: int
    reason: str


class _OverlongLine(Exception):
    pass


class _Lines:
    """The physical lines of a binary stream as text, numbered from 1 (`number`: lines read).

    Lines end at b"\\n". A line over MAX_LINE_BYTES is read past in chunks and raises
    _OverlongLine; bytes that are not UTF-8 decode to lone surrogates (surrogateescape)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._buffer = bytearray()
        self._eof = False
        self._bytes = 0
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        raw = self._next_raw()
        if self.number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        return raw.decode("utf-8", "surrogateescape")

    def skip(self, count: int) -> None:
        """Read past `count` lines without decoding them (a resumed file). The buffer's whole
        lines are counted and dropped at once while more are left to skip (a file's later steps
        would otherwise spend their time re-reading its start line by line)."""
        while count > 0:
            whole = self._buffer.count(b"\n")
            if 0 < whole < count:
                del self._buffer[: self._buffer.rfind(b"\n") + 1]
                self._count(whole)
                count -= whole
            elif not whole and not self._eof and len(self._buffer) <= MAX_LINE_BYTES:
                self._fill()
            else:  # the last lines to skip, the file's end or an overlong line: one at a time
                with contextlib.suppress(_OverlongLine):
                    self._next_raw()
                count -= 1

    def _next_raw(self) -> bytes:
        overlong = False
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                break
            if self._eof:
                if not self._buffer and not overlong:
                    raise StopIteration
                line = bytes(self._buffer)
                self._buffer.clear()
                break
            if len(self._buffer) > MAX_LINE_BYTES:
                overlong = True
                self._buffer.clear()  # the rest of this line is dropped as it arrives
            searched = len(self._buffer)
            self._fill()
        self._count(1)
        if overlong or len(line) > MAX_LINE_BYTES:
            raise _OverlongLine
        return line

    def _count(self, lines: int) -> None:
        self.number += lines
        if self.number > MAX_LINES:
            raise FileRejected(f"more than {MAX_LINES} lines")

    def _fill(self) -> None:
        chunk = self._stream.read(_CHUNK_BYTES)
        if not chunk:
            self._eof = True
            return
        self._bytes += len(chunk)
        if self._bytes > MAX_FILE_BYTES:
            raise FileRejected(f"larger than {MAX_FILE_BYTES} bytes decompressed")
        self._buffer += chunk


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


def read_rows(name: str, stream: BinaryIO, *, after_line: int = 0) -> Iterator[Row | BadLine]:
    """The records of a file in order, those ending after line `after_line` (the lines up to it
    were read before: a resumed file); raises FileRejected (possibly after some rows) for another
    suffix, an empty file, a corrupt gzip stream or a file past the bounds."""
    fmt, compressed = file_format(name)
    lines = _Lines(gzip.GzipFile(fileobj=stream, mode="rb") if compressed else stream)
    try:
        yield from (_jsonl_rows if fmt == JSONL else _csv_rows)(lines, after_line)
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise FileRejected("not a valid gzip stream (corrupt or truncated)") from None


def _overlong(line: int) -> BadLine:
    return BadLine(line, line, f"longer than {MAX_LINE_BYTES} bytes")


def _jsonl_rows(lines: _Lines, after_line: int) -> Iterator[Row | BadLine]:
    lines.skip(after_line)
    empty = after_line == 0
    while True:
        try:
            line = next(lines)
        except StopIteration:
            break
        except _OverlongLine:
            empty = False
            yield _overlong(lines.number)
            continue
        if not line.strip():
            continue  # blank lines (a trailing newline, say) are not records
        empty = False
        number = lines.number
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            yield BadLine(number, number, "not valid JSON")
            continue
        if isinstance(fields, dict):
            yield Row(number, number, fields, text_values=False)
        else:
            yield BadLine(number, number, "not a JSON object")
    if empty:
        raise FileRejected("empty file")


def _csv_rows(lines: _Lines, after_line: int) -> Iterator[Row | BadLine]:
    # A header without rows is a valid export of a quiet hour; no header at all is an empty file.
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        raise FileRejected("empty file") from None
    except (csv.Error, _OverlongLine):
        raise FileRejected("the header row is not valid CSV") from None
    if not header:
        raise FileRejected("empty file")
    lines.skip(max(0, after_line - lines.number))
    while True:
        first = lines.number + 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except _OverlongLine:
            yield BadLine(first, lines.number, f"a line is longer than {MAX_LINE_BYTES} bytes")
            continue
        except csv.Error as error:
            # csv's messages name the problem (NUL byte, field too large), never the content.
            yield BadLine(first, lines.number, f"not valid CSV: {error}")
            continue
        if not values:
            continue  # a blank line
        if len(values) > len(header):
            yield BadLine(first, lines.number, "more values than the header has columns")
        else:
            yield Row(first, lines.number, dict(zip(header, values, strict=False)), True)
