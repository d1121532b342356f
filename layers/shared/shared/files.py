"""Contact files read record by record from binary streams. Pure: no AWS calls.

Formats, recognised from the object: Amazon Connect's contact records as Kinesis Data Firehose
writes them (JSON objects concatenated with no delimiter, or each followed by a newline, in an
object with no extension or `.gz`), and the flat exports `.jsonl` (one JSON object per line) and
`.csv` (header row), named by their suffix. Any of them may be gzip-compressed: by its `.gz`
suffix or, without one, by gzip's magic bytes. Text is UTF-8, with or without a BOM. A stream is
never read whole: memory stays flat in the file's size, one bounded record at a time.

Per record, `read_rows` yields a `Row` (the raw fields, for the model to validate) or a `BadLine`
(not a record at all: not JSON, broken CSV, an overlong line, a truncated last record). Nothing
a record holds raises: bytes that are not UTF-8 come through as lone surrogates (which the model
rejects), so one bad record costs that record only. A `line` is a line of a flat export and the
record's ordinal in a stream of contact records (whose records may share one line). Problems with
the file as a whole raise `FileRejected`: content that is none of the formats, an empty file, a
corrupt gzip stream, or a file past MAX_FILE_BYTES (decompressed) or MAX_LINES.
"""

import codecs
import contextlib
import csv
import gzip
import json
import re
import zlib
from collections.abc import Collection, Iterator
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
_GZIP_MAGIC = b"\x1f\x8b"
# Firehose takes records of at most 1,000 KiB: a contact record longer than a line's bound is
# not one. A record is parsed once this much of the stream (or its end) is buffered after it.
MAX_RECORD_BYTES = MAX_LINE_BYTES
_LOOKAHEAD_CHARS = 1 << 14
_SPACE = re.compile(r"[ \t\r\n]*")
# A contact record's key (shared.model reads the record): what tells one from a nested object.
CONNECT_RECORD_KEY = "ContactId"


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


def read_rows(
    name: str, stream: BinaryIO, *, after_line: int = 0, csv_columns: Collection[str] = ()
) -> Iterator[Row | BadLine]:
    """The records of a file in order, those after line (or record) `after_line` (read before:
    a resumed file); raises FileRejected (possibly after some rows) for content that is none of
    the formats, an empty file, a CSV header without one of `csv_columns`, a corrupt gzip stream
    or a file past the bounds."""
    base = name.removesuffix(GZIP)
    peeked = _Peeked(stream)
    compressed = name.endswith(GZIP) or peeked.starts_with(_GZIP_MAGIC)
    text = _Peeked(gzip.GzipFile(fileobj=peeked, mode="rb")) if compressed else peeked
    try:
        if base.endswith(CSV):
            yield from _csv_rows(_Lines(text), after_line, csv_columns)
        elif base.endswith(JSONL):
            yield from _jsonl_rows(_Lines(text), after_line)
        else:
            yield from _contact_records(text, after_line)
    except (gzip.BadGzipFile, EOFError, zlib.error):
        raise FileRejected("not a valid gzip stream (corrupt or truncated)") from None


class _Peeked:
    """A binary stream whose first bytes can be looked at before it is read."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._head = b""

    def starts_with(self, prefix: bytes) -> bool:
        while len(self._head) < len(prefix):
            chunk = self._stream.read(len(prefix) - len(self._head))
            if not chunk:
                break
            self._head += chunk
        return self._head.startswith(prefix)

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._stream.read(size)
        head, self._head = self._head, b""
        if size < 0:
            return head + self._stream.read()
        return head if len(head) >= size else head + self._stream.read(size - len(head))


def _contact_records(stream: BinaryIO, after_record: int) -> Iterator[Row | BadLine]:
    """JSON objects as Firehose concatenates them (no delimiter, or whitespace and newlines
    between them): each one a Row, numbered from 1. A stretch that is not JSON (or not an object)
    is one BadLine, read past to where the next record starts; a record cut off by the end of
    the object is one BadLine. An object in which no record ever starts is not a contacts file."""
    records = _Records(stream)
    if not records.fill(1):
        raise FileRejected("empty file")
    leading = records.skip_leading()
    if leading is not None and after_record < 1:
        yield BadLine(1, 1, leading)
    for number, record in enumerate(records, start=1 if leading is None else 2):
        if number > MAX_LINES:
            raise FileRejected(f"more than {MAX_LINES} records")
        if number <= after_record:
            continue
        if isinstance(record, str):
            yield BadLine(number, number, record)
        elif isinstance(record, dict):
            yield Row(number, number, record, text_values=False)
        else:
            yield BadLine(number, number, "not a JSON object")


class _Records:
    """The JSON values of a text stream of concatenated records, parsed by json's C decoder from
    a buffer that holds a record and a little lookahead; a broken record comes out as the reason
    it is not one (a str)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._buffer = ""
        self._position = 0
        self._bytes = 0
        self._eof = False

    def fill(self, chars: int) -> bool:
        """Read until `chars` characters follow the position or the stream ends, and move past
        whitespace; whether a record follows."""
        while True:
            while len(self._buffer) - self._position < chars and not self._eof:
                self._read()
            self._position = _SPACE.match(self._buffer, self._position).end()
            if self._position < len(self._buffer) or self._eof:
                return self._position < len(self._buffer)

    def skip_leading(self) -> str | None:
        """Move past what comes before the first record, if the stream does not open one: the
        reason it is no record. FileRejected when no record ever starts."""
        if self._buffer.startswith("{", self._position):
            return None
        reason = self._skip_broken(cut_off=False)
        if not self.fill(1):
            raise FileRejected(
                "not a contacts file: neither Amazon Connect contact records (JSON) nor a .jsonl "
                "or .csv export"
            )
        return reason

    def __iter__(self) -> Iterator[Any]:
        decoder = json.JSONDecoder()
        wanted = _LOOKAHEAD_CHARS
        while self.fill(wanted):
            if self._position > _LOOKAHEAD_CHARS:  # what was parsed is dropped, not copied on
                self._buffer = self._buffer[self._position :]
                self._position = 0
            start = self._position
            try:
                value, self._position = decoder.raw_decode(self._buffer, start)
            except (ValueError, RecursionError) as error:
                cut_off = self._cut_off(error)
                if cut_off and not self._eof and wanted <= MAX_RECORD_BYTES:
                    wanted *= 2  # a long record: parsed again once more of it is here
                    continue
                yield self._skip_broken(cut_off and wanted <= MAX_RECORD_BYTES)
            else:
                too_long = self._position - start > MAX_RECORD_BYTES
                yield f"longer than {MAX_RECORD_BYTES} bytes" if too_long else value
            wanted = _LOOKAHEAD_CHARS

    def _cut_off(self, error: Exception) -> bool:
        """The parse failed at the end of what is buffered: more of the stream may complete it."""
        return isinstance(error, json.JSONDecodeError) and (
            error.msg.startswith("Unterminated string") or error.pos >= len(self._buffer) - 8
        )

    def _skip_broken(self, cut_off: bool) -> str:
        """Move past the broken record at the position, to where the next record starts (or the
        end), holding no more of it than the search has not passed; the reason."""
        start, searched, dropped = self._position, self._position + 1, 0
        while True:
            found, searched = self._next_start(searched)
            if found is not None or self._eof:
                end = len(self._buffer) if found is None else found
                self._position = end
                if dropped + end - start > MAX_RECORD_BYTES:
                    return f"longer than {MAX_RECORD_BYTES} bytes"
                if found is None and cut_off:
                    return "the last record is cut off (a truncated object)"
                return "not valid JSON"
            if searched == len(self._buffer):  # keep the last character: a '}' may end a record
                keep = max(start, len(self._buffer.rstrip(" \t\r\n")) - 1)
                dropped += keep - start
                self._buffer, self._position = self._buffer[keep:], 0
                start, searched = 0, 1
            self._read()

    def _next_start(self, searched: int) -> tuple[int | None, int]:
        """Where the next record starts at or after `searched`: an object that opens right after
        one closed or at a line's start (a nested object never does), or any object that parses
        whole as a contact record (Firehose concatenates records: a broken one leaves no
        newline). Else None, and where to search again once more is read: a candidate that
        needs more text, or the buffer's end."""
        buffer = self._buffer
        while (brace := buffer.find("{", searched)) >= 0:
            before = brace - 1
            while before >= 0 and buffer[before] in " \t\r":
                before -= 1
            if before >= 0 and buffer[before] in "}\n":
                return brace, brace
            if buffer.startswith('"', brace + 1):
                try:
                    value, _ = json.JSONDecoder().raw_decode(buffer, brace)
                    if isinstance(value, dict) and CONNECT_RECORD_KEY in value:
                        return brace, brace
                except (ValueError, RecursionError) as error:
                    more = not self._eof and len(buffer) - brace <= MAX_RECORD_BYTES
                    if more and self._cut_off(error):
                        return None, brace
            searched = brace + 1
        return None, len(buffer)

    def _read(self) -> None:
        chunk = self._stream.read(_CHUNK_BYTES)
        first = self._bytes == 0
        self._bytes += len(chunk)
        if self._bytes > MAX_FILE_BYTES:
            raise FileRejected(f"larger than {MAX_FILE_BYTES} bytes decompressed")
        self._eof = not chunk
        self._buffer += self._decoder.decode(chunk, final=self._eof)
        if first and self._buffer.startswith("\ufeff"):
            self._buffer = self._buffer[1:]


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


def _csv_rows(lines: _Lines, after_line: int, columns: Collection[str]) -> Iterator[Row | BadLine]:
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
    # Every row of a header without them would be rejected alone: the file is, once, by its name.
    if missing := [column for column in columns if column not in header]:
        raise FileRejected(f"the header row has no column {', '.join(missing)}")
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
