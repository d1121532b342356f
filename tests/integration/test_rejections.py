"""Bad rows are reported with their line numbers and never stop the good rows; unreadable files
get one report, no retries and no dead letter."""

import json

import pytest

from harness.builders import contact, jsonl, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import wait_until_drained

pytestmark = [pytest.mark.integration, pytest.mark.fan_out_independent]


def line_number(entry: dict) -> int:
    for name in ("line", "line_number", "lineno", "row"):
        if isinstance(entry.get(name), int):
            return entry[name]
    raise AssertionError(f"report entry without a line number: {entry}")


def no_dead_letter_mentions(stack: StackClient, *markers: str) -> None:
    for message in stack.peek("IngestDeadLetterQueueUrl"):
        for marker in markers:
            assert marker not in message["Body"], f"{marker} reached the ingest DLQ"


def test_bad_rows_are_reported_by_line_and_good_rows_kept(
    stack: StackClient, files, contact_cleanup
):
    caller = new_caller()
    contact_cleanup.append(caller)
    good = [
        contact(caller, minutes=1, agent_id="agent-1", disposition="RESOLVED"),
        contact(caller, minutes=2, agent_id="agent-2", disposition="TRANSFERRED"),
        contact(caller, minutes=3, agent_id=None, disposition="ABANDONED"),
    ]
    template = contact(caller, minutes=4)
    lines = [
        good[0],  # 1
        {**template, "caller": "0049 89 1234"},  # 2 not E.164
        good[1],  # 3
        '{"contact_id": "truncated',  # 4 not JSON
        {**template, "started_at": "2026-11-02T10:00:00Z"},  # 5 ended before started
        {k: v for k, v in template.items() if k != "agent_id"},  # 6 agent required
        {**template, "disposition": "HUNG_UP"},  # 7 unknown disposition
        {**template, "wait_seconds": -1},  # 8 negative wait
        good[2],  # 9 abandoned: no agent needed
        {**template, "contact_id": "bad id with spaces"},  # 10 contact id
        {k: v for k, v in template.items() if k != "ended_at"},  # 11 missing ended_at
    ]
    key, version = files.put("bad rows ü.jsonl", jsonl(lines))

    def stored():
        ids = {i["contact_id"]["S"] for i in stack.contacts_of(caller)}
        assert ids >= {r["contact_id"] for r in good}, ids
        return ids

    assert eventually(stored, timeout=60) == {r["contact_id"] for r in good}

    report = eventually(lambda: files.report_exists(key) and files.read_report(key), timeout=60)
    assert sorted(line_number(entry) for entry in report) == [2, 4, 5, 6, 7, 8, 10, 11]
    for entry in report:
        assert any(entry.get(name) for name in ("reasons", "reason", "error")), entry

    log = eventually(lambda: stack.file_outcome(key, version), timeout=30)
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert log["rows_ok"] == {"N": "3"}, log
    assert log["rows_rejected"] == {"N": "8"}, log
    assert log["report_key"] == {"S": files.report_key(key)}, log
    no_dead_letter_mentions(stack, key)


def test_unreadable_files_get_one_report_and_no_retries(stack: StackClient, files):
    failures_before = stack.failed_invocations("IngestFunction")
    bodies = {
        "notes.txt": b"not a contact export\n",
        "empty.jsonl": b"",
        "broken.jsonl.gz": b"\x1f\x8b\x08\x00 this is not gzip",
    }
    put = {name: files.put(name, body) for name, body in bodies.items()}

    def all_logged():
        logs = {name: stack.file_outcome(key, version) for name, (key, version) in put.items()}
        missing = [name for name, log in logs.items() if log is None]
        assert not missing, f"no processing log yet for {missing}"
        return logs

    logs = eventually(all_logged, timeout=60)
    for name, (key, _) in put.items():
        assert logs[name]["outcome"] == {"S": "REJECTED_FILE"}, (name, logs[name])
        report = files.read_report(key)
        assert len(report) >= 1, name
    # Terminal: the queue drains without a retry cycle and nothing is dead-lettered.
    wait_until_drained(stack, "IngestQueueUrl")
    no_dead_letter_mentions(stack, *(key for key, _ in put.values()))
    assert stack.failed_invocations("IngestFunction") == failures_before  # locally: no retry


def test_a_row_that_is_not_utf8_is_rejected_and_the_rest_of_its_file_kept(
    stack: StackClient, files, contact_cleanup
):
    """Encoding is checked per line: a Latin-1 row is one rejected row, not a rejected file."""
    caller = new_caller()
    contact_cleanup.append(caller)
    good = contact(caller, minutes=1)
    latin1 = {**contact(caller, minutes=2), "queue": "M\u00fcller"}
    body = "\n".join(json.dumps(row, ensure_ascii=False) for row in (latin1, good)) + "\n"
    key, version = files.put("mixed encodings.jsonl", body.encode("latin-1"))

    log = eventually(lambda: stack.file_outcome(key, version), timeout=60)
    assert log["outcome"] == {"S": "PROCESSED"}, log
    assert (log["rows_ok"], log["rows_rejected"]) == ({"N": "1"}, {"N": "1"}), log
    (entry,) = files.read_report(key)
    assert line_number(entry) == 1
    assert "UTF-8" in json.dumps(entry), entry
    assert {i["contact_id"]["S"] for i in stack.contacts_of(caller)} == {good["contact_id"]}
