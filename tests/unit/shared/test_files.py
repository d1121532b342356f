"""Contact files as rows: formats, line numbers, file-level rejections, bounds, resuming after a
line, and streaming."""

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
from shared.files import MAX_LINE_BYTES, BadLine, FileRejected, Row, file_format, read_rows

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


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.jsonl", (".jsonl", False)),
        ("a.csv.gz", (".csv", True)),
        ("dir.csv/a.jsonl.gz", (".jsonl", True)),
    ],
)
def test_file_format_by_suffix(name, expected):
    assert file_format(name) == expected


@pytest.mark.parametrize(
    "name", ["a.json", "a.txt", "a.csv.zip", "a.gz", "a.CSV", "jsonl", "a.jsonl.gz.bak"]
)
def test_other_suffixes_are_rejected(name):
    with pytest.raises(FileRejected, match="must end in"):
        rows(name, b'{"a": 1}\n')


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("f.jsonl", b""),
        ("f.jsonl", b"\n \n\r\n"),
        ("f.csv", b""),
        ("f.csv", b"\xef\xbb\xbf"),
        ("f.jsonl.gz", gzip.compress(b"", mtime=0)),
        ("f.csv.gz", b""),
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
