"""Which copy of a contact wins: its own version (updated_at), never its file's upload; versions of
one key in S3's order whatever order their events arrive in; corrections in later files (one
CONTACT item per contact_id)."""

import json

import pytest

from harness.in_process import ShrinkingClock
from tests.unit.ingest.support import Delivery, notification

CONTACT = {
    "contact_id": "c-1",
    "caller": "+4915112345678",
    "agent_id": "agent-7",
    "started_at": "2026-11-29T10:00:00Z",
    "ended_at": "2026-11-29T10:05:00Z",
    "updated_at": "2026-11-29T12:00:00Z",
    "disposition": "RESOLVED",
    "wait_seconds": 42,
}
OTHER = CONTACT | {"contact_id": "c-2", "caller": "+4915199999999"}
NEWER = "2026-11-29T13:00:00Z"  # a correction's version: after CONTACT's


def jsonl(*rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def contacts(ingest) -> dict[str, dict]:
    found = {}
    for item in ingest.items():
        assert item["contact_id"] not in found, "two CONTACT items for one contact_id"
        found[item["contact_id"]] = item
    return found


@pytest.mark.parametrize("versioned", [True, False])
def test_a_late_event_for_an_older_version_is_stale_and_changes_nothing(ingest, versioned):
    v1 = ingest.put("incoming/a.jsonl", jsonl(CONTACT, OTHER), versioned=versioned)
    v2 = ingest.put(
        "incoming/a.jsonl", jsonl(CONTACT | {"agent_id": "agent-9", "updated_at": NEWER}), versioned
    )

    assert ingest.run(v2) == []
    before = ingest.items("CONTACT") + ingest.items("CONTACT_REF")
    assert ingest.run(v1) == []  # S3 delivered v1's event last

    assert ingest.items("CONTACT") + ingest.items("CONTACT_REF") == before
    assert contacts(ingest)["c-1"]["agent_id"] == "agent-9"
    assert "c-2" not in contacts(ingest)  # v1's own rows are not applied either
    stale = ingest.log_of(v1)
    assert stale["outcome"] == "STALE"
    assert stale["superseded_by"] == ingest.log_of(v2)["file_id"]
    assert ingest.metrics()["FilesStale"] == 1


def test_versions_in_order_each_apply(ingest):
    v1 = ingest.put("incoming/a.jsonl", jsonl(CONTACT, OTHER))
    v2 = ingest.put(
        "incoming/a.jsonl", jsonl(CONTACT | {"agent_id": "agent-9", "updated_at": NEWER})
    )
    assert ingest.run(v1) == [] and ingest.run(v2) == []
    assert {c: i["agent_id"] for c, i in contacts(ingest).items()} == {
        "c-1": "agent-9",
        "c-2": "agent-7",
    }
    assert ingest.log_of(v2)["outcome"] == "PROCESSED"


def test_a_redelivered_event_of_the_newest_version_is_not_stale(ingest):
    v1 = ingest.put("incoming/a.jsonl", jsonl(CONTACT))
    assert ingest.run(v1) == []
    ingest.cold_start()
    assert ingest.run(Delivery("redelivered", v1.body)) == []
    assert ingest.log_of(v1)["outcome"] == "PROCESSED"


def test_sequencers_compare_as_s3_documents_not_as_plain_strings(ingest, stack):
    # A shorter sequencer is left-padded with zeros before comparing: "FF" is before "0100".
    def event(sequencer: str, body: str) -> Delivery:
        stack.s3.put_object(Bucket=stack.bucket, Key="incoming/u.jsonl", Body=body.encode())
        text = notification(stack.bucket, "incoming/u.jsonl", None, len(body), sequencer)
        return Delivery(sequencer, text)

    older = event("FF", jsonl(CONTACT))
    newer = event("0100", jsonl(CONTACT | {"agent_id": "agent-9", "updated_at": NEWER}))
    assert ingest.run(newer) == [] and ingest.run(older) == []
    assert ingest.log_of(older)["outcome"] == "STALE"
    assert contacts(ingest)["c-1"]["agent_id"] == "agent-9"


def test_a_correction_in_a_later_file_replaces_the_contact_even_with_another_sort_key(ingest):
    first = ingest.put("incoming/a.jsonl", jsonl(CONTACT), event_time="2026-11-29T08:00:00Z")
    corrected = CONTACT | {
        "ended_at": "2026-11-29T10:07:00Z",
        "agent_id": "agent-9",
        "updated_at": NEWER,
    }
    fix = ingest.put("incoming/fix.jsonl", jsonl(corrected), event_time="2026-11-29T09:00:00Z")
    assert ingest.run(first) == [] and ingest.run(fix) == []

    [item] = ingest.items()
    assert item["sk"] == "CONTACT#2026-11-29T10:07:00.000Z#c-1"
    assert item["agent_id"] == "agent-9"
    [ref] = ingest.items("CONTACT_REF")
    assert (ref["item_pk"], ref["item_sk"]) == (item["pk"], item["sk"])


def test_an_older_export_arriving_after_a_correction_is_superseded(ingest):
    first = ingest.put("incoming/a.jsonl", jsonl(CONTACT), event_time="2026-11-29T08:00:00Z")
    corrected = CONTACT | {
        "ended_at": "2026-11-29T10:07:00Z",
        "agent_id": "agent-9",
        "updated_at": NEWER,
    }
    fix = ingest.put("incoming/fix.jsonl", jsonl(corrected), event_time="2026-11-29T09:00:00Z")
    assert ingest.run(fix) == [] and ingest.run(first) == []

    [item] = ingest.items()
    assert item["agent_id"] == "agent-9"
    log = ingest.log_of(first)
    assert (log["outcome"], log["rows_ok"], log["rows_superseded"]) == ("PROCESSED", 0, 1)
    assert ingest.metrics()["RowsSuperseded"] == 1


def test_a_correction_that_moves_a_contact_to_another_caller_leaves_one_item(ingest):
    first = ingest.put("incoming/a.jsonl", jsonl(CONTACT), event_time="2026-11-29T08:00:00Z")
    moved = CONTACT | {"caller": "+4930555000111", "updated_at": NEWER}
    fix = ingest.put("incoming/fix.jsonl", jsonl(moved), event_time="2026-11-29T09:00:00Z")
    assert ingest.run(first) == [] and ingest.run(fix) == []
    [item] = ingest.items()
    assert item["pk"] == "CALLER#+4930555000111"


def test_each_version_of_a_key_has_its_own_report_while_both_are_in_progress(ingest):
    # v1 is big: it stops after its first rows and continues later; v2 of the same key is
    # ingested meanwhile. Once one report served every version, v1 resumed from v2's: its own bad
    # rows went unreported and v2's were listed as v1's.
    def rows(prefix: str, count: int, bad: set[int]) -> str:
        return jsonl(
            *(
                {"contact_id": f"{prefix}-{n}"}
                if n in bad
                else CONTACT | {"contact_id": f"{prefix}-{n}", "caller": f"+49151{n:08d}"}
                for n in range(1, count + 1)
            )
        )

    v1 = ingest.put("incoming/a.jsonl", rows("v1", 300, {10, 150, 290}))
    v2 = ingest.put("incoming/a.jsonl", rows("v2", 5, {2, 4}))
    assert ingest.run(v1, context=ShrinkingClock()) == []
    [continuation] = ingest.stack.drain(ingest.stack.ingest_queue_url)
    assert ingest.log_of(v1)["outcome"] == "IN_PROGRESS"
    assert ingest.run(v2) == []
    pending = [Delivery(continuation["MessageId"], continuation["Body"])]
    while pending:
        assert ingest.run(*pending, context=ShrinkingClock()) == []
        pending = [
            Delivery(m["MessageId"], m["Body"])
            for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
        ]

    reports = {}
    for delivery in (v1, v2):
        log = ingest.log_of(delivery)
        assert log["outcome"] == "PROCESSED"
        assert log["report_key"] == f"rejected/incoming/a.jsonl/{log['version']}.errors.jsonl"
        reports[log["version"]] = [e["line"] for e in ingest.report_at(log["report_key"])]
    assert sorted(reports.values()) == [[2, 4], [10, 150, 290]]
    assert (ingest.log_of(v1)["rows_rejected"], ingest.log_of(v2)["rows_rejected"]) == (3, 2)


@pytest.mark.parametrize("key", ["incoming/a.jsonl", "incoming/a-again.jsonl"])
def test_re_uploading_an_old_export_changes_nothing_a_newer_copy_set(ingest, key):
    # A contact's version is the record's own `updated_at`, never its file's upload: the runbooks'
    # re-uploads (and any re-delivery) of an old export, under its own key or another, once
    # rewrote c-1 with agent-7 and routed the caller back to the agent a correction replaced.
    original = CONTACT | {"updated_at": "2026-11-29T10:06:00Z"}
    correction = original | {"agent_id": "agent-9", "updated_at": "2026-11-29T11:00:00Z"}
    first = ingest.put("incoming/a.jsonl", jsonl(original), event_time="2026-11-29T10:10:00Z")
    fix = ingest.put("incoming/fix.jsonl", jsonl(correction), event_time="2026-11-29T11:05:00Z")
    assert ingest.run(first) == [] and ingest.run(fix) == []
    before = ingest.items("CONTACT") + ingest.items("CONTACT_REF")

    again = ingest.put(key, jsonl(original), event_time="2026-11-30T08:00:00Z")
    assert ingest.run(again) == []

    assert ingest.items("CONTACT") + ingest.items("CONTACT_REF") == before
    assert contacts(ingest)["c-1"]["agent_id"] == "agent-9"
    log = ingest.log_of(again)
    assert (log["outcome"], log["rows_ok"], log["rows_superseded"]) == ("PROCESSED", 0, 1)
