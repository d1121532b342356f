"""Input the stack reads: contact rows, the files that carry them (JSON Lines, CSV, gzip), and the
event Amazon Connect sends RouteFunction."""

import csv
import gzip
import io
import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import model

import harness  # noqa: F401 (the layer on sys.path)

BASE_TIME = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def new_caller() -> str:
    """A unique, valid E.164 number in the fictional 555 range."""
    return "+1555" + f"{uuid.uuid4().int % 10**7:07d}"


def new_contact_id(tag: str = "c") -> str:
    return f"it-{tag}-{uuid.uuid4().hex[:16]}"


def contact(
    caller: str,
    *,
    minutes: int = 0,
    agent_id: str | None = "agent-1",
    disposition: str = "ESCALATED",
    wait_seconds: int = 5,
    email: str | None = None,
    survey_opt_in: bool | None = None,
    contact_id: str | None = None,
    queue: str | None = "support",
    updated_seconds: int = 60,
) -> dict:
    """One valid input row; ``minutes`` places its end relative to a fixed base time, and
    ``updated_seconds`` its version (`updated_at`) after the end: a later copy of the same
    contact is a correction, an earlier one changes nothing."""
    ended = BASE_TIME + timedelta(minutes=minutes)
    row: dict[str, Any] = {
        "contact_id": contact_id or new_contact_id(),
        "caller": caller,
        "started_at": (ended - timedelta(seconds=wait_seconds + 120)).isoformat(),
        "ended_at": ended.isoformat().replace("+00:00", "Z"),
        "updated_at": (ended + timedelta(seconds=updated_seconds)).isoformat(),
        "disposition": disposition,
        "wait_seconds": wait_seconds,
    }
    if agent_id is not None:
        row["agent_id"] = agent_id
    if queue is not None:
        row["queue"] = queue
    if email is not None:
        row["email"] = email
    if survey_opt_in is not None:
        row["survey_opt_in"] = survey_opt_in
    return row


def jsonl(rows: Iterable[dict | str]) -> bytes:
    """One JSON object per line; a str row is written as it is (a broken line)."""
    return "".join(
        (row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n"
        for row in rows
    ).encode()


def csv_bytes(rows: Iterable[dict]) -> bytes:
    """A header of the input fields, then one line per row (absent fields empty)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=model.INPUT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = {name: row.get(name, "") for name in model.INPUT_FIELDS}
        if "survey_opt_in" in row:
            values["survey_opt_in"] = str(row["survey_opt_in"]).lower()
        writer.writerow(values)
    return text.getvalue().encode()


def file_body(name: str, rows: Iterable[dict | str]) -> bytes:
    """A file of ``rows`` in the format its name says (.jsonl or .csv, optionally .gz)."""
    body = (
        jsonl(rows) if ".jsonl" in name else csv_bytes(row for row in rows if isinstance(row, dict))
    )
    return gzip.compress(body) if name.endswith(".gz") else body


def connect_event(caller: str) -> dict:
    """An Amazon Connect contact flow event (Lambda function invoked from a flow)."""
    contact_id = str(uuid.uuid4())
    return {
        "Name": "ContactFlowEvent",
        "Details": {
            "ContactData": {
                "Attributes": {},
                "Channel": "VOICE",
                "ContactId": contact_id,
                "CustomerEndpoint": {"Address": caller, "Type": "TELEPHONE_NUMBER"},
                "InitialContactId": contact_id,
                "InitiationMethod": "INBOUND",
                "InstanceARN": "arn:aws:connect:us-east-1:123456789012:instance/"
                "00000000-0000-0000-0000-000000000000",
                "PreviousContactId": contact_id,
                "Queue": None,
                "SystemEndpoint": {"Address": "+18005550100", "Type": "TELEPHONE_NUMBER"},
            },
            "Parameters": {},
        },
    }
