"""`ops idempotency show|purge IngestFunction` address the claims of the run the file's processing
log holds: after `ops file reprocess`, the new run's (its claims are keyed by run), not the claims
of the run S3's event started."""

import json

from shared import idempotency

from ops import files, records
from tests.unit.ingest.support import Delivery, Ingest
from tests.unit.ops.support import args

ROW = {
    "contact_id": "c-1",
    "caller": "+15551234567",
    "agent_id": "agent-7",
    "started_at": "2026-11-29T10:00:00Z",
    "ended_at": "2026-11-29T10:05:00Z",
    "updated_at": "2026-11-29T12:00:00Z",
    "disposition": "RESOLVED",
    "wait_seconds": 42,
}


def test_a_reprocessed_files_records_are_its_new_runs(ops_stack, stack, monkeypatch, capsys):
    ingest = Ingest(stack, monkeypatch, capsys)
    assert ingest.run(ingest.put("incoming/a.jsonl", json.dumps(ROW) + "\n")) == []
    url = f"s3://{stack.bucket}/incoming/a.jsonl"
    reprocessed, _, _ = files.reprocess(ops_stack, url, None, None)
    [message] = stack.drain(stack.ingest_queue_url)
    assert ingest.run(Delivery(message["MessageId"], message["Body"])) == []
    file_id = reprocessed["file_id"]
    layer = records.persistence(ops_stack, idempotency.FILE_STEPS)
    step = {"s3_object": {"file_id": file_id}, "after_line": 0}
    first_run = records.lookup(layer, step | {"run": None})
    new_run = records.lookup(layer, step | {"run": reprocessed["run"]})
    assert first_run and new_run and first_run.idempotency_key != new_run.idempotency_key

    target = args(function="IngestFunction", file=url)
    [shown] = records.show(ops_stack, target)[0]["records"]
    assert (shown["key"], shown["status"]) == (new_run.idempotency_key, "COMPLETED")

    assert records.purge(ops_stack, target, None)[0]["purged"] == [new_run.idempotency_key]
    assert records.lookup(layer, step | {"run": reprocessed["run"]}) is None
    assert records.lookup(layer, step | {"run": None}) is not None  # the earlier run's: untouched
