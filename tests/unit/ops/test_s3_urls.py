"""`ops` names a file by its s3:// URL, whose key is any text: `#`, `?`, `%`, spaces and unicode
are part of the key, so `file status|reprocess` and `idempotency show|purge` address exactly that
object, never a shorter key (urlparse cut `incoming/export#2.jsonl` to `incoming/export`)."""

import json

import pytest
from shared import s3_events

from ops import file_ref, files, records
from ops.errors import OpsError
from tests.unit.ingest.support import Ingest
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
KEYS = [
    "incoming/export#2.jsonl",
    "incoming/export?part=2.jsonl",
    "incoming/export%202.jsonl",
    "incoming/export 2 ü 東京.jsonl",
    "incoming/export#?%20 ü.jsonl",
]


@pytest.mark.parametrize("key", KEYS)
def test_a_key_with_url_characters_addresses_its_own_object(
    key, ops_stack, stack, monkeypatch, capsys
):
    ingest = Ingest(stack, monkeypatch, capsys)
    # the object a URL parser would address instead: ingested too, so a wrong address finds it
    shorter = ingest.put("incoming/export", json.dumps({**ROW, "contact_id": "c-0"}) + "\n")
    delivery = ingest.put(key, json.dumps(ROW) + "\n")
    assert ingest.run(shorter, delivery) == []
    [task] = s3_events.parse_message(delivery.body)
    file_id = task.s3_object.file_id
    url = f"s3://{stack.bucket}/{key}"

    data, text, ok = files.status(ops_stack, url, None)
    assert ok and data["file_id"] == file_id and data["log"]["rows_ok"] == 1
    assert text.startswith(file_id)

    shown, _, _ = records.show(ops_stack, args(function="IngestFunction", file=url))
    assert shown["target"] == file_id and len(shown["records"]) == 1

    purged, _, _ = records.purge(ops_stack, args(function="IngestFunction", file=url), None)
    assert purged["purged"] == [shown["records"][0]["key"]]
    assert records.show(ops_stack, args(function="IngestFunction", file=url))[0]["records"] == []
    shorter_url = f"s3://{stack.bucket}/incoming/export"
    assert (
        len(
            records.show(ops_stack, args(function="IngestFunction", file=shorter_url))[0]["records"]
        )
        == 1
    )

    reprocessed, _, _ = files.reprocess(ops_stack, url, None, None)
    assert reprocessed["file_id"] == file_id
    [message] = stack.drain(stack.ingest_queue_url)
    [queued] = s3_events.parse_message(message["Body"])
    assert (queued.s3_object.key, queued.s3_object.file_id) == (key, file_id)


@pytest.mark.parametrize(
    "url", ["s3://", "s3://bucket", "s3://bucket/", "s3:///key", "S3://bucket/key", "bucket/key"]
)
def test_a_url_without_bucket_and_key_is_refused(url):
    with pytest.raises(OpsError, match="is not s3://bucket/key"):
        file_ref.split_url(url)


def test_only_the_first_slash_ends_the_bucket():
    assert file_ref.split_url("s3://b/a//b#c?d") == ("b", "a//b#c?d")
