"""Contact files as rows: Connect's contact records as Firehose writes them and the flat exports,
recognised from the object; line and record numbers, file-level rejections, bounds, resuming
after a line or record, and streaming."""

import csv
import gzip
import io
import json
import tracemalloc
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shared import files
from shared.files import MAX_LINE_BYTES, MAX_RECORD_BYTES, BadLine, FileRejected, Row, read_rows

HEADER = "contact_id,caller,wait_seconds\n"


def rows(name: str, data: bytes, after_line: int = 0) -> list:
    return list(read_rows(name, io.BytesIO(data), after_line=after_line))


def test_jsonl_rows_keep_json_types_and_line_numbers():
    data = b'{"contact_id": "a", "wait_seconds": 3}\n\n  \n{"contact_id": "b", "x": true}\n'
    assert rows("f.jsonl", data) == [
        Row(1, 1, {"contact_id": "a", "wait_seconds": 3}, text_values=False),
        Row(4, 4, {"contact_id": "b", "x": True}, text_values=False),
    ]


def test_jsonl_bad_lines_are_reported_and_reading_goes_on():
    data = b'{"contact_id": "a"\n[1, 2]\n"text"\n{"contact_id": "d"}\n[[[[' + b"[" * 100_000 + b"\n"
    assert rows("f.jsonl", data) == [
        BadLine(1, 1, "not valid JSON"),
        BadLine(2, 2, "not a JSON object"),
        BadLine(3, 3, "not a JSON object"),
        Row(4, 4, {"contact_id": "d"}, text_values=False),
        BadLine(5, 5, "not valid JSON"),
    ]


def test_jsonl_without_trailing_newline_and_with_crlf():
    assert [r.line for r in rows("f.jsonl", b'{"a": 1}\r\n{"a": 2}')] == [1, 2]


def test_csv_rows_are_strings_numbered_by_physical_line():
    data = (HEADER + 'a,+123,1\n\nb,"+4,\n5",2\nc,+9,3\n').encode()
    assert rows("f.csv", data) == [
        Row(2, 2, {"contact_id": "a", "caller": "+123", "wait_seconds": "1"}, text_values=True),
        Row(4, 5, {"contact_id": "b", "caller": "+4,\n5", "wait_seconds": "2"}, text_values=True),
        Row(6, 6, {"contact_id": "c", "caller": "+9", "wait_seconds": "3"}, text_values=True),
    ]


def test_csv_short_rows_leave_fields_missing_and_long_rows_are_bad_lines():
    result = rows("f.csv", (HEADER + "a,+1\nb,+2,3,extra\n").encode())
    assert result == [
        Row(2, 2, {"contact_id": "a", "caller": "+1"}, text_values=True),
        BadLine(3, 3, "more values than the header has columns"),
    ]


def test_csv_errors_are_bad_lines_and_reading_goes_on():
    big = "x" * (csv.field_size_limit() + 1)
    result = rows("f.csv", (HEADER + f'a,"{big}",1\nb,+2,3\n').encode())
    assert isinstance(result[0], BadLine) and result[0].reason.startswith("not valid CSV")
    assert result[-1] == Row(3, 3, {"contact_id": "b", "caller": "+2", "wait_seconds": "3"}, True)


def test_a_header_without_rows_is_a_file_without_rows():
    assert rows("f.csv", HEADER.encode()) == []


def test_a_csv_header_without_the_required_columns_rejects_the_file():
    data = (HEADER + "a,+1,2\n").encode()
    with pytest.raises(
        FileRejected, match=r"^the header row has no column started_at, disposition$"
    ):
        list(
            read_rows(
                "f.csv", io.BytesIO(data), csv_columns=("caller", "started_at", "disposition")
            )
        )
    named = list(read_rows("f.csv", io.BytesIO(data), csv_columns=("contact_id", "caller")))
    assert named == [Row(2, 2, {"contact_id": "a", "caller": "+1", "wait_seconds": "2"}, True)]


@pytest.mark.parametrize("name", ["f.jsonl.gz", "f.csv.gz"])
def test_gzip_files_are_decompressed(name):
    plain = b'{"contact_id": "a"}\n' if ".jsonl" in name else (HEADER + "a,+1,2\n").encode()
    assert rows(name, gzip.compress(plain)) == rows(name.removesuffix(".gz"), plain)


def test_concatenated_gzip_members_are_one_file():
    data = gzip.compress(b'{"a": 1}\n') + gzip.compress(b'{"a": 2}\n')
    assert [r.fields for r in rows("f.jsonl.gz", data)] == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize("name", ["f.jsonl", "f.csv"])
def test_a_utf8_bom_is_allowed(name):
    plain = '{"contact_id": "ä"}\n' if name.endswith("jsonl") else "contact_id\nä\n"
    result = rows(name, b"\xef\xbb\xbf" + plain.encode())
    assert result[0].fields == {"contact_id": "ä"}


def record(number: int, **extra) -> dict:
    return {"AWSContactTraceRecordFormatVersion": "2017-03-10", "ContactId": f"c-{number}", **extra}


def firehose(*records, newline: bool) -> bytes:
    """Records as Firehose writes them: concatenated, each followed by a newline with the
    AppendDelimiterToRecord processor."""
    end = "\n" if newline else ""
    return "".join(r if isinstance(r, str) else json.dumps(r) + end for r in records).encode()


FIREHOSE_KEY = "contact-records/2026/11/30/09/stream-1-2026-11-30-09-15-02-0d5f8c1e-7a2b"


@pytest.mark.parametrize("newline", [True, False])
@pytest.mark.parametrize("name", [FIREHOSE_KEY, FIREHOSE_KEY + ".gz", "records.json"])
def test_contact_records_are_read_with_or_without_newlines_and_gzip(name, newline):
    data = firehose(record(1), record(2, Agent=None), record(3), newline=newline)
    data = gzip.compress(data) if name.endswith(".gz") else data
    assert rows(name, data) == [
        Row(1, 1, record(1), text_values=False),
        Row(2, 2, record(2, Agent=None), text_values=False),
        Row(3, 3, record(3), text_values=False),
    ]


@pytest.mark.parametrize("name", [FIREHOSE_KEY, "a.jsonl", "a.csv"])
def test_gzip_is_recognised_by_its_bytes_without_the_suffix(name):
    plain = firehose(record(1), newline=True) if ".csv" not in name else b"contact_id\nc-1\n"
    assert rows(name, gzip.compress(plain)) == rows(name, plain)


@pytest.mark.parametrize("newline", [True, False])
def test_a_broken_record_between_good_ones_is_one_bad_record(newline):
    data = firehose(
        record(1),
        "not json at all",
        record(2),
        '{"Agent": {"ARN": "x"}, "Queue" 5}',  # nested objects are no record starts
        record(3),
        "[1, 2]",
        record(4),
        newline=newline,
    )
    result = rows(FIREHOSE_KEY, data)
    assert [r.fields["ContactId"] for r in result if isinstance(r, Row)] == [
        "c-1",
        "c-2",
        "c-3",
        "c-4",
    ]
    assert [(r.line, r.reason) for r in result if isinstance(r, BadLine)] == [
        (2, "not valid JSON"),
        (4, "not valid JSON"),
        (6, "not a JSON object"),
    ]


@pytest.mark.parametrize("newline", [True, False])
def test_a_truncated_last_record_is_reported_and_the_rest_kept(newline):
    data = firehose(record(1), record(2), newline=newline) + b'{"ContactId": "c-3", "Agent": {"AR'
    assert rows(FIREHOSE_KEY, data)[-2:] == [
        Row(2, 2, record(2), text_values=False),
        BadLine(3, 3, "the last record is cut off (a truncated object)"),
    ]


def test_a_record_over_the_bound_is_read_past_and_reported():
    long = record(2, Notes="x" * MAX_RECORD_BYTES)
    result = rows(FIREHOSE_KEY, firehose(record(1), long, record(3), newline=False))
    assert [type(r) for r in result] == [Row, BadLine, Row]
    assert result[1].reason == f"longer than {MAX_RECORD_BYTES} bytes"


def test_a_record_longer_than_the_lookahead_is_one_record():
    long = record(2, Attributes={f"a{n}": "v" * 100 for n in range(1000)})  # ~110 KB
    assert rows(FIREHOSE_KEY, firehose(record(1), long, newline=False))[1].fields == long


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n", b"contact_id,caller\n", b"[{}]"])
def test_an_object_that_is_none_of_the_formats_is_rejected(data):
    with pytest.raises(FileRejected, match="not a contacts file"):
        rows(FIREHOSE_KEY, data)


@pytest.mark.parametrize("gzipped", [True, False])
@pytest.mark.parametrize("newline", [True, False])
def test_contact_records_resumed_after_any_record_give_exactly_the_records_after_it(
    gzipped, newline
):
    data = firehose(record(1), "{broken", record(2), record(3), newline=newline)
    data = gzip.compress(data) if gzipped else data
    every = rows(FIREHOSE_KEY, data)
    assert len(every) == 4
    for done in every:
        assert rows(FIREHOSE_KEY, data, after_line=done.end_line) == [
            r for r in every if r.line > done.end_line
        ]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("f.jsonl", b""),
        ("f.jsonl", b"\n \n\r\n"),
        ("f.csv", b""),
        ("f.csv", b"\xef\xbb\xbf"),
        ("f.jsonl.gz", gzip.compress(b"", mtime=0)),
        ("f.csv.gz", b""),
        (FIREHOSE_KEY, b""),
        (FIREHOSE_KEY, b" \n\n"),
        (FIREHOSE_KEY + ".gz", gzip.compress(b"", mtime=0)),
    ],
)
def test_empty_files_are_rejected(name, data):
    with pytest.raises(FileRejected, match="empty file"):
        rows(name, data)


@pytest.mark.parametrize(
    "data",
    [
        b"this is not gzip at all",
        gzip.compress(b'{"a": 1}\n' * 1000, mtime=0)[:-30],  # truncated upload
        gzip.compress(b'{"a": 1}\n', mtime=0)[:10]
        + b"\x00" * 20
        + gzip.compress(b"x", mtime=0)[30:],
    ],
)
def test_corrupt_gzip_is_rejected(data):
    with pytest.raises(FileRejected, match="not a valid gzip stream"):
        rows("f.jsonl.gz", data)


def test_a_bad_crc_is_rejected():
    data = bytearray(gzip.compress(b'{"a": 1}\n'))
    data[-8] ^= 0xFF
    with pytest.raises(FileRejected, match="gzip"):
        rows("f.jsonl.gz", bytes(data))
    assert zlib  # corrupt deflate data raises zlib.error, covered by the cases above


@pytest.mark.parametrize("name", ["f.jsonl", "f.csv"])
def test_bytes_that_are_not_utf8_cost_their_line_only(name):
    # They come through as lone surrogates, which the model rejects as "not valid UTF-8 text".
    data = (
        "contact_id\nM\u00fcller\nok\n"
        if name == "f.csv"
        else '{"a": "M\u00fcller"}\n{"a": "ok"}\n'
    )
    result = rows(name, data.encode("latin-1"))
    assert [r.fields for r in result] == (
        [{"contact_id": "M\udcfcller"}, {"contact_id": "ok"}]
        if name == "f.csv"
        else [{"a": "M\udcfcller"}, {"a": "ok"}]
    )


@pytest.mark.parametrize("name", ["f.jsonl", "f.csv"])
def test_an_overlong_line_is_a_bad_line_read_past_without_holding_it(name):
    header = b"a\n" if name == "f.csv" else b""
    record = b"1\n" if name == "f.csv" else b'{"a": 1}\n'
    data = header + record + b"x" * (MAX_LINE_BYTES * 3) + b"\n" + record
    result = rows(name, data)
    first = 2 if name == "f.csv" else 1
    assert [r.line for r in result] == [first, first + 1, first + 2]
    assert isinstance(result[1], BadLine) and "longer than" in result[1].reason
    assert isinstance(result[2], Row)


def test_a_file_past_its_line_bound_is_rejected_after_its_rows(monkeypatch):
    monkeypatch.setattr(files, "MAX_LINES", 3)
    reader = read_rows("f.jsonl", io.BytesIO(b'{"a": 1}\n\n\n{"a": 2}\n'))
    assert next(reader).fields == {"a": 1}
    with pytest.raises(FileRejected, match="more than 3 lines"):
        next(reader)


def test_a_gzip_bomb_is_rejected_by_its_decompressed_size(monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1 << 20)
    bomb = gzip.compress(b'{"a": 1}\n' + b" " * (4 << 20))
    assert len(bomb) < 8 * 1024
    with pytest.raises(FileRejected, match="decompressed"):
        rows("f.jsonl.gz", bomb)


@pytest.mark.parametrize("name", ["f.jsonl", "f.csv", "f.jsonl.gz", "f.csv.gz"])
def test_a_resumed_file_gives_the_records_after_the_line(name):
    plain = (
        (HEADER + 'a,+1,1\nb,"+2\n2",2\nc,+3,3\n').encode()
        if ".csv" in name
        else b'{"a": 1}\n\n{"a": 2}\n{"a": 3}\n'
    )
    data = gzip.compress(plain) if name.endswith(".gz") else plain
    every = rows(name, data)
    for done in every:
        assert rows(name, data, after_line=done.end_line) == [
            r for r in every if r.line > done.end_line
        ]


# Lines of a small file: records, blank lines, bad JSON and lines over a bound of 24 bytes, read
# 16 bytes at a time, so that lines cross chunks and a skipped stretch ends anywhere in one.
RESUMED_LINES = st.lists(
    st.sampled_from([b'{"a": 1}', b"", b"{", b'{"a": "' + b"x" * 30 + b'"}', b"y" * 60]),
    max_size=30,
)


@given(lines=RESUMED_LINES, trailing_newline=st.booleans(), gzipped=st.booleans())
def test_a_file_resumed_after_any_record_gives_exactly_the_records_after_it(
    lines, trailing_newline, gzipped
):
    plain = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    name, data = ("f.jsonl.gz", gzip.compress(plain)) if gzipped else ("f.jsonl", plain)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "MAX_LINE_BYTES", 24)
        patch.setattr(files, "_CHUNK_BYTES", 16)
        try:
            every = rows(name, data)
        except FileRejected:  # empty: nothing to resume
            return
        for done in every:
            assert rows(name, data, after_line=done.end_line) == [
                r for r in every if r.line > done.end_line
            ]


def test_a_resumed_file_is_not_empty_when_nothing_is_left():
    assert rows("f.jsonl", b'{"a": 1}\n', after_line=1) == []


class GeneratedStream(io.RawIOBase):
    """A large file produced on demand; fails if anyone asks for all of it at once."""

    def __init__(self, chunks, max_read: int):
        self._chunks = iter(chunks)
        self._pending = b""
        self.max_read = max_read
        self.bytes_served = 0

    def readable(self):
        return True

    def read(self, size=-1):
        if size is None or size < 0 or size > self.max_read:
            raise AssertionError(f"read({size}) would load the file at once")
        while len(self._pending) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._pending += chunk
        data, self._pending = self._pending[:size], self._pending[size:]
        self.bytes_served += len(data)
        return data

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def generated_lines(lines: int):
    for start in range(0, lines, 1000):
        yield "".join(
            json.dumps({"contact_id": f"c-{n}", "caller": f"+49151{n:08d}", "notes": f"{n}" * 90})
            + "\n"
            for n in range(start, min(start + 1000, lines))
        ).encode()


def gzipped(chunks):
    compressor = zlib.compressobj(wbits=31)  # the gzip container
    for chunk in chunks:
        yield compressor.compress(chunk)
    yield compressor.flush()


@pytest.mark.parametrize("name", ["big.jsonl", "big.jsonl.gz"])
def test_rows_are_read_lazily_from_the_stream(name):
    chunks = generated_lines(300_000)
    stream = GeneratedStream(gzipped(chunks) if name.endswith(".gz") else chunks, 1 << 20)
    reader = read_rows(name, stream)
    for _ in range(10):
        next(reader)
    assert stream.bytes_served <= 256 * 1024  # ten rows in, only a buffer's worth was read


def test_memory_stays_flat_over_a_large_stream():
    lines = 40_000  # ~20 MB of JSON lines
    stream = GeneratedStream(gzipped(generated_lines(lines)), max_read=1 << 20)
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_rows("big.jsonl.gz", stream))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == lines
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes"  # a fifth of the stream, or less


@pytest.mark.parametrize("newline", [True, False])
def test_a_broken_first_record_is_one_bad_record_and_the_rest_kept(newline):
    data = firehose("not json", record(1), record(2), newline=newline)
    assert rows(FIREHOSE_KEY, data) == [
        BadLine(1, 1, "not valid JSON"),
        Row(2, 2, record(1), text_values=False),
        Row(3, 3, record(2), text_values=False),
    ]
    assert rows(FIREHOSE_KEY, data, after_line=1) == rows(FIREHOSE_KEY, data)[1:]
