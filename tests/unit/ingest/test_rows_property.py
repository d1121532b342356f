"""No content of a row can fail its file: searched by hypothesis over hostile rows (any JSON value,
nesting, huge and non-finite numbers, lone surrogates, NUL bytes, bytes that are not UTF-8, very
long fields, impossible dates, CSV quoting) between good rows.

Two properties: over many examples, the reader and the validation never raise and every contact
they accept is storable as DynamoDB requires; over fewer (each a whole invocation against moto),
the ingest of such a file succeeds, stores every good row and reports the others by line.
"""

import csv
import io
import json
import os
from datetime import UTC, datetime, timedelta, timezone

from boto3.dynamodb.types import TypeSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import files, keys, model
from shared.ingest import FileReport, Progress, Settings

from tests.unit.ingest.support import Ingest
from tests.unit.support import moto_stack

INGESTED_AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MAX_ITEM_BYTES = 400 * 1024
EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "1"))  # a multiplier for long searches


def good_row(n: int) -> dict:
    return {
        "contact_id": f"g-{n}",
        "caller": f"+1415555{n:04d}",
        "agent_id": f"agent-{n}",
        "queue": "support",
        "started_at": "2026-11-29T08:55:00Z",
        "ended_at": "2026-11-29T10:05:00+01:00",
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": n,
        "email": f"g{n}@example.com",
        "survey_opt_in": True,
    }


# Any text at all: lone surrogates, NUL, control characters, every plane.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)
long_text = st.text(min_size=257, max_size=3000)
offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23))
moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
timestamps = st.one_of(
    st.builds(lambda m, o: m.replace(tzinfo=timezone(o)).isoformat(), moments, offsets),
    moments.map(lambda m: m.replace(tzinfo=None).isoformat()),  # no offset
    st.sampled_from(["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00", "2026-02-30"]),
    any_text,
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**37, max_value=10**4000),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | any_text | long_text | timestamps,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = list(good_row(0))


@st.composite
def mutated_rows(draw, n: int) -> dict:
    """A good row with some fields replaced by anything, removed, or joined by others."""
    row = good_row(n) | {"contact_id": f"h-{n}"}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            row[name] = draw(json_values)
        else:
            row.pop(name)
    row |= draw(st.dictionaries(any_text, json_values, max_size=2))
    return row


def digits_line(n: int) -> bytes:
    # An integer literal JSON allows but Python refuses to read (over 4,300 digits).
    return b'{"contact_id": "h-%d", "wait_seconds": %s}' % (n, b"7" * 5000)


@st.composite
def hostile_jsonl_line(draw, n: int) -> bytes:
    kind = draw(st.sampled_from(["mutated", "value", "bytes", "digits", "deep"]))
    if kind == "mutated":
        text = json.dumps(draw(mutated_rows(n)), ensure_ascii=draw(st.booleans()))
        return text.encode("utf-8", "surrogatepass")  # an unescaped surrogate: not UTF-8
    if kind == "value":
        return json.dumps(draw(json_values)).encode()
    if kind == "digits":
        return digits_line(n)
    if kind == "deep":
        return b"[" * draw(st.integers(1000, 100_000))
    return draw(st.binary(max_size=300)).replace(b"\n", b" ")


@st.composite
def jsonl_files(draw) -> tuple[bytes, set[str]]:
    """A file of good rows with hostile lines between them; the good rows' contact ids."""
    lines, good = [], set()
    for n in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            lines.append(json.dumps(good_row(n)).encode())
            good.add(f"g-{n}")
        else:
            lines.append(draw(hostile_jsonl_line(n)))
    return b"\n".join(lines) + b"\n", good


def csv_text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@st.composite
def csv_files(draw) -> tuple[bytes, set[str]]:
    """A CSV file (csv.writer quoting: a value may span lines) of good and hostile rows; the
    good rows' contact ids. (Raw garbage is left to JSONL: in CSV an unbalanced quote joins the
    lines after it into one value, as RFC 4180 reads it, which no reader can tell from data.)"""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    good = set()
    for n in range(draw(st.integers(1, 10))):
        row = good_row(n) if draw(st.booleans()) else draw(mutated_rows(n))
        values = [csv_text(row.get(name, "")) for name in FIELDS]
        extra = [csv_text(value) for key, value in row.items() if key not in FIELDS]
        if row.get("contact_id") == f"g-{n}":
            good.add(f"g-{n}")
        writer.writerow(values + extra[: draw(st.integers(0, 2))])
    return out.getvalue().encode("utf-8", "surrogatepass"), good


def dynamodb_storable(item: dict) -> None:
    """What DynamoDB requires of an item: key attributes non-empty strings, text valid Unicode,
    numbers of at most 38 digits, at most 400 KB."""
    assert item["pk"] and item["sk"]
    size = 0
    for name, value in item.items():
        typed = TypeSerializer().serialize(value)
        if "S" in typed:
            typed["S"].encode("utf-8")  # raises on a lone surrogate
        if "N" in typed:
            assert len(typed["N"].lstrip("-").replace(".", "").lstrip("0")) <= 38
        size += len(name.encode()) + len(json.dumps(typed))
    assert size < MAX_ITEM_BYTES


@settings(max_examples=300 * EXAMPLES, deadline=None)
@given(st.one_of(jsonl_files(), csv_files()))
def test_reading_and_validating_any_file_never_raises_and_accepts_only_storable_items(example):
    data, _ = example
    name = "incoming/f.csv" if data.startswith(b"contact_id,") else "incoming/f.jsonl"
    report = FileReport(io.BytesIO(), Progress())
    ingest_settings = Settings(600, model.SurveyAttributes(), INGESTED_AT)
    try:
        for row in files.read_rows(name, io.BytesIO(data)):
            write = report.contact_write(row, ingest_settings)
            if write is not None:
                dynamodb_storable(write.item)
                assert write.item["sk"].startswith(keys.CONTACT_SK_PREFIX)
                assert len(write.item["ended_at"]) == len("2026-11-29T09:05:00.000Z")
    except files.FileRejected as rejection:  # only a file-level bound may stop it
        assert "longer than" not in rejection.reason


@settings(
    max_examples=25 * EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(example=st.one_of(jsonl_files(), csv_files()))
def test_ingesting_any_file_succeeds_stores_every_good_row_and_reports_the_rest(
    aws_env, monkeypatch, capsys, example
):
    data, good = example
    name = "incoming/f.csv" if data.startswith(b"contact_id,") else "incoming/f.jsonl"
    with moto_stack(monkeypatch) as stack:
        ingest = Ingest(stack, monkeypatch, capsys)
        delivery = ingest.put(name, data)
        assert ingest.run(delivery) == []  # the file never fails: no retry, no dead letter

        log = ingest.log_of(delivery)
        if not data.strip():  # nothing but blank lines: the one file-level outcome left
            assert (log["outcome"], ingest.report(name)[0]["reasons"]) == (
                "REJECTED_FILE",
                ["empty file"],
            )
            return
        assert log["outcome"] == "PROCESSED"
        stored = {item["contact_id"]: item for item in ingest.items()}
        assert good <= stored.keys()
        for contact_id in good:
            row = good_row(int(contact_id.removeprefix("g-")))
            contact = model.parse_contact(row, text_values=False, ingested_at=INGESTED_AT)
            expected = contact.to_item(600) | {"first_export": True}
            assert stored[contact_id] == expected
        rejected = int(log["rows_rejected"])
        report = ingest.report(name) if rejected else []
        assert len(report) == rejected
        assert all(entry["level"] == "row" and entry["reasons"] for entry in report)
        assert len({entry["line"] for entry in report}) == len(report)
        assert not good & {entry.get("contact_id") for entry in report}
