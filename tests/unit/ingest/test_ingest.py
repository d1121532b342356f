"""IngestFunction end to end against moto: files in, CONTACT items, reports and outcomes out,
every kind of duplicate delivery with one effect, transient failures as batch item failures."""

import csv
import gzip
import io
import json
import logging
import warnings

import pytest
from botocore.exceptions import ClientError
from shared.aws import table

from harness.in_process import FakeLambdaContext
from tests.unit.ingest.support import Delivery, Ingest, error_response

GOOD = [
    {
        "contact_id": "c-1",
        "caller": "+4915112345678",
        "agent_id": "agent-7",
        "queue": "billing",
        "started_at": "2026-11-29T10:00:00+01:00",
        "ended_at": "2026-11-29T10:05:00+01:00",
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": 42,
        "email": "pat@example.com",
        "survey_opt_in": True,
    },
    {
        "contact_id": "c-2",
        "caller": "+4915199999999",
        "started_at": "2026-11-29T09:00:00Z",
        "ended_at": "2026-11-29T09:02:00Z",
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": "ABANDONED",
        "wait_seconds": 900,
    },
]
PHONES = ("+4915112345678", "+4915199999999", "+4930555000111")
EMAILS = ("pat@example.com", "lee@example.com")


def jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def as_csv(rows) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(GOOD[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: str(v).lower() if isinstance(v, bool) else v for k, v in row.items()})
    return out.getvalue()


def test_a_file_becomes_typed_contact_items_with_the_contract_keys(ingest, stack):
    assert ingest.run(ingest.put("incoming/a.jsonl", jsonl(GOOD))) == []

    [first, second] = sorted(ingest.items(raw=True), key=lambda i: i["contact_id"]["S"])
    assert first["pk"] == {"S": "CALLER#+4915112345678"}
    assert first["sk"] == {"S": "CONTACT#2026-11-29T09:05:00.000Z#c-1"}
    assert first["wait_seconds"] == {"N": "42"}
    assert first["survey_opt_in"] == {"BOOL": True}
    assert first["long_wait"] == {"BOOL": False}
    assert first["email"] == {"S": "pat@example.com"}
    assert first["started_at"] == {"S": "2026-11-29T09:00:00.000Z"}
    assert second["survey_opt_in"] == {"BOOL": False}
    assert second["long_wait"] == {"BOOL": True}
    assert not {"agent_id", "queue", "email"} & second.keys()

    [log] = ingest.processing_log()
    assert log["outcome"] == "PROCESSED"
    assert (log["rows_ok"], log["rows_superseded"], log["rows_rejected"]) == (2, 0, 0)
    assert log["key"] == "incoming/a.jsonl" and log["bucket"] == stack.bucket
    assert log["file_id"] == f"{stack.bucket}/incoming/a.jsonl#{log['version']}"
    assert log["size"] == len(jsonl(GOOD)) and log["etag"] == "etag"
    assert "report_key" not in log
    assert ingest.reports() == []
    metrics = ingest.metrics()
    assert metrics["FilesProcessed"] == 1
    assert metrics["RowsIngested"] == 2
    assert metrics["RowsRejected"] == 0


def test_bad_rows_are_reported_by_line_and_good_rows_kept(ingest):
    bad_caller = GOOD[0] | {"contact_id": "c-3", "caller": "+4930555000111x"}
    naive = GOOD[0] | {"contact_id": "c-4", "ended_at": "2026-11-29T10:05:00", "wait_seconds": -1}
    text = jsonl([GOOD[0]]) + "{not json\n" + jsonl([bad_caller, GOOD[1], naive])
    assert ingest.run(ingest.put("incoming/mixed.jsonl", text)) == []

    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-1", "c-2"]
    report = ingest.report("incoming/mixed.jsonl")
    assert report == [
        {"level": "row", "line": 2, "reasons": ["not valid JSON"]},
        {
            "level": "row",
            "line": 3,
            "contact_id": "c-3",
            "reasons": ["caller: not an E.164 number (+ and 7-15 digits)"],
        },
        {
            "level": "row",
            "line": 5,
            "contact_id": "c-4",
            "reasons": ["ended_at: has no UTC offset or Z", "wait_seconds: not an integer >= 0"],
        },
    ]
    [log] = ingest.processing_log()
    assert (log["outcome"], log["rows_ok"], log["rows_rejected"]) == ("PROCESSED", 2, 3)
    assert log["report_key"] == f"rejected/incoming/mixed.jsonl/{log['version']}.errors.jsonl"
    assert ingest.metrics()["RowsRejected"] == 3


@pytest.mark.parametrize(
    ("key", "encode"),
    [
        ("incoming/a.csv", lambda rows: as_csv(rows).encode()),
        ("incoming/a.csv.gz", lambda rows: gzip.compress(as_csv(rows).encode())),
        ("incoming/a.jsonl.gz", lambda rows: gzip.compress(jsonl(rows).encode())),
        ("incoming/bom.csv", lambda rows: b"\xef\xbb\xbf" + as_csv(rows).encode()),
    ],
)
def test_csv_and_gzip_files_give_the_same_items_as_jsonl(ingest, key, encode):
    assert ingest.run(ingest.put("incoming/reference.jsonl", jsonl(GOOD))) == []
    expected = {i["sk"]: i for i in ingest.items()}
    ingest.clear_contacts()
    assert ingest.run(ingest.put(key, encode(GOOD))) == []
    assert {i["sk"]: i for i in ingest.items()} == expected
    assert {log["key"]: log["rows_ok"] for log in ingest.processing_log()}[key] == 2


def test_a_key_with_spaces_and_unicode_arrives_url_encoded_and_is_read_decoded(ingest):
    key = "incoming/2026-11-29/Kontakte München+Co.jsonl"
    delivery = ingest.put(key, jsonl(GOOD) + "[]\n")
    assert "Kontakte+M%C3%BCnchen%2BCo.jsonl" in delivery.body
    assert ingest.run(delivery) == []
    assert len(ingest.items()) == 2
    assert ingest.report(key) == [{"level": "row", "line": 3, "reasons": ["not a JSON object"]}]
    [log] = ingest.processing_log()
    assert log["key"] == key
    assert log["file_id"].startswith(f"contacts-bucket/{key}#")


@pytest.mark.parametrize(
    ("key", "body", "reason"),
    [
        ("incoming/contacts.xlsx", b"PK\x03\x04", "not a contacts file"),
        ("contact-records/2026/11/29/10/s-1-2026-11-29-10-00-00-u", b"\x89PNG", "not a contacts"),
        ("incoming/empty.jsonl", b"", "empty file"),
        ("incoming/empty.csv.gz", gzip.compress(b"", mtime=0), "empty file"),
        ("incoming/corrupt.jsonl.gz", b"\x1f\x8b\x08\x00garbage", "not a valid gzip stream"),
        ("incoming/truncated.csv.gz", gzip.compress(as_csv(GOOD).encode(), mtime=0)[:-6], "gzip"),
        ("incoming/other.csv", b"id,phone\n1,+4915112345678\n", "the header row has no column"),
    ],
)
def test_unreadable_files_get_one_report_and_are_acknowledged(ingest, key, body, reason):
    assert ingest.run(ingest.put(key, body)) == []  # acknowledged: no retry, no DLQ

    [line] = ingest.report(key)
    assert line["level"] == "file"
    assert reason in line["reasons"][0]
    [log] = ingest.processing_log()
    assert log["outcome"] == "REJECTED_FILE"
    assert log["report_key"] == f"rejected/{key}/{log['version']}.errors.jsonl"
    assert ingest.metrics()["FilesRejected"] == 1
    assert ingest.items() == []


def test_rows_before_a_truncation_stay_ingested_and_the_file_is_rejected(ingest):
    rows = [GOOD[n % 2] | {"contact_id": f"c-{n}", "caller": f"+49151{n:08d}"} for n in range(300)]
    truncated = gzip.compress(as_csv(rows).encode())[:-100]
    delivery = ingest.put("incoming/cut.csv.gz", truncated)
    assert ingest.run(delivery) == []

    [line] = ingest.report("incoming/cut.csv.gz")
    assert line == {"level": "file", "reasons": ["not a valid gzip stream (corrupt or truncated)"]}
    log = ingest.log_of(delivery)
    assert log["outcome"] == "REJECTED_FILE"
    # Valid contacts read before the corruption are kept, the last partial batch included.
    assert 200 < log["rows_ok"] == len(ingest.items()) < 300


def test_s3_test_event_is_acknowledged_and_ignored(ingest):
    body = json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ingest.cold_start()  # imported here: its warning filter is part of it
        assert ingest.run(Delivery("test-event", body)) == []
    assert ingest.processing_log() == [] and ingest.reports() == []
    # expected to publish no metric: Powertools' "No application metrics" warning is not shown
    assert [str(w.message) for w in caught if "metrics" in str(w.message)] == []


def test_a_poison_message_is_reported_and_acknowledged(ingest):
    good = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    assert ingest.run(Delivery("poison", "Hello from SQS!"), good) == []
    assert len(ingest.items()) == 2  # the rest of the batch is unaffected
    assert ingest.metrics()["MessagesRejected"] == 1
    errors = [json.loads(line) for line in ingest.output.splitlines() if '"ERROR"' in line]
    assert errors[0]["message_id"] == "poison"
    assert "not JSON" in errors[0]["reason"]


@pytest.mark.parametrize("versioned", [True, False])
def test_an_object_deleted_before_it_is_read_is_skipped(ingest, stack, versioned):
    delivery = ingest.put("incoming/gone.jsonl", jsonl(GOOD), versioned=versioned)
    for version in stack.s3.list_object_versions(Bucket=stack.bucket)["Versions"]:
        stack.s3.delete_object(
            Bucket=stack.bucket, Key=version["Key"], VersionId=version["VersionId"]
        )

    assert ingest.run(delivery) == []
    [log] = ingest.processing_log()
    assert log["outcome"] == "SKIPPED_MISSING"
    assert ingest.metrics()["FilesSkipped"] == 1
    assert ingest.items() == [] and ingest.reports() == []


def test_the_version_the_event_names_is_read_even_after_an_overwrite(ingest, stack):
    first = ingest.put("incoming/a.jsonl", jsonl([GOOD[0]]))
    stack.s3.put_object(Bucket=stack.bucket, Key="incoming/a.jsonl", Body=jsonl([GOOD[1]]).encode())
    assert ingest.run(first) == []
    assert [i["contact_id"] for i in ingest.items()] == ["c-1"]


# ---- duplicates: every kind of duplicate delivery has one effect --------------------------------


def effects(ingest) -> tuple:
    return (
        sorted((i["pk"], i["sk"]) for i in ingest.items()),
        [(log["outcome"], log["rows_ok"]) for log in ingest.processing_log()],
    )


def test_the_same_message_twice_in_one_batch(ingest):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    assert ingest.run(delivery, delivery) == []
    assert len(ingest.items()) == 2
    assert effects(ingest)[1] == [("PROCESSED", 2)]
    metrics = ingest.metrics()
    assert (metrics["FilesProcessed"], metrics["DuplicatesSuppressed"]) == (1, 1)
    assert metrics["RowsIngested"] == 2


def test_the_same_message_again_in_a_later_invocation_and_environment(ingest, monkeypatch):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    assert ingest.run(delivery) == []
    before = effects(ingest)
    writes = []
    ingest.cold_start()
    ingest.app.dynamodb.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", lambda **kwargs: writes.append(1)
    )
    assert ingest.run(delivery) == []
    assert effects(ingest) == before
    assert writes == []  # not even re-written
    assert ingest.metrics()["DuplicatesSuppressed"] == 1


def test_the_same_s3_event_under_two_message_ids(ingest):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    again = Delivery("another-message-id", delivery.body)
    assert ingest.run(delivery, again) == []
    assert ingest.run(Delivery("a-third-message-id", delivery.body)) == []
    assert len(ingest.items()) == 2
    assert len(ingest.processing_log()) == 1
    assert ingest.metrics()["DuplicatesSuppressed"] == 2


def test_a_new_version_of_a_file_is_a_new_file_whose_rows_replace_the_olds(ingest):
    assert ingest.run(ingest.put("incoming/a.jsonl", jsonl(GOOD))) == []
    changed = [GOOD[0] | {"queue": "support"}, GOOD[1]]
    assert ingest.run(ingest.put("incoming/a.jsonl", jsonl(changed))) == []
    assert [log["outcome"] for log in ingest.processing_log()] == ["PROCESSED"] * 2
    assert sorted((i["contact_id"], i.get("queue")) for i in ingest.items()) == [
        ("c-1", "support"),
        ("c-2", None),
    ]


def test_the_same_contact_in_two_files_is_one_item(ingest):
    assert ingest.run(ingest.put("incoming/a.jsonl", jsonl(GOOD))) == []
    assert ingest.run(ingest.put("incoming/b.csv", as_csv([GOOD[1]]))) == []
    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-1", "c-2"]


def test_the_same_contact_twice_in_one_file_is_one_item_the_later_row(ingest):
    # Even with another ended_at (another sort key): one item per contact_id, the later line's.
    changed = GOOD[0] | {"queue": "support", "ended_at": "2026-11-29T10:06:00+01:00"}
    delivery = ingest.put("incoming/a.jsonl", jsonl([GOOD[0], changed]))
    assert ingest.run(delivery) == []
    [item] = ingest.items()
    assert (item["queue"], item["ended_at"]) == ("support", "2026-11-29T09:06:00.000Z")
    log = ingest.log_of(delivery)
    assert (log["rows_ok"], log["rows_superseded"]) == (1, 1)


# ---- failures: transient ones are retried, and retries are harmless -------------------------


def fail_get_object_of(app, key: str, code: str = "InternalError"):
    """A 5xx from S3 for one object (after boto3's retries): a narrow fault at the AWS boundary."""

    def fail(params, **kwargs):
        if params["url_path"].endswith(key.replace(" ", "%20")):
            raise ClientError({"Error": {"Code": code, "Message": "injected"}}, "GetObject")

    app.s3.meta.events.register("before-call.s3.GetObject", fail)
    return fail


def test_a_transient_failure_fails_exactly_that_message_and_its_retry_completes(ingest):
    deliveries = [
        ingest.put(f"incoming/{n}.jsonl", jsonl([GOOD[n % 2] | {"contact_id": f"c-{n}"}]))
        for n in range(3)
    ]
    hook = fail_get_object_of(ingest.app, "incoming/1.jsonl")

    assert ingest.run(*deliveries) == [deliveries[1].message_id]
    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-0", "c-2"]

    ingest.app.s3.meta.events.unregister("before-call.s3.GetObject", hook)
    assert ingest.run(deliveries[1]) == []  # the claim was released: the retry runs
    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-0", "c-1", "c-2"]
    assert sorted(log["outcome"] for log in ingest.processing_log()) == ["PROCESSED"] * 3


def test_a_file_claimed_by_a_running_invocation_is_retried_later_not_twice(ingest, monkeypatch):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    app = ingest.app
    inner = ingest.app.ingest.ingest_file

    def concurrent_delivery(*args, **kwargs):
        # While this invocation holds the claim, another environment receives the same event.
        other = Ingest(ingest.stack, monkeypatch, ingest.capsys)
        assert other.run(delivery) == [delivery.message_id]
        return inner(*args, **kwargs)

    monkeypatch.setattr(app.ingest, "ingest_file", concurrent_delivery)
    assert ingest.run(delivery) == []
    assert len(ingest.items()) == 2


class Crash(BaseException):
    """The execution environment dies (timeout, out of memory): no exception handler runs."""


def test_a_crash_after_writing_rows_then_a_retry_leaves_one_item_per_contact(ingest, stack):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))

    def crash_on_processing_log(params, **kwargs):
        if b'"PROCESSED"' in params["body"]:
            raise Crash

    ingest.app.dynamodb.meta.events.register(
        "before-call.dynamodb.PutItem", crash_on_processing_log
    )
    with pytest.raises(Crash):
        ingest.run(delivery, context=FakeLambdaContext(remaining_ms=1))  # dies at its timeout
    assert len(ingest.items()) == 2  # rows were written before the crash
    assert [log["outcome"] for log in ingest.processing_log()] == ["IN_PROGRESS"]

    ingest.cold_start()  # SQS redelivers after the visibility timeout, to a new environment
    assert ingest.run(delivery) == []
    assert sorted(i["contact_id"] for i in ingest.items()) == ["c-1", "c-2"]
    [log] = ingest.processing_log()
    assert (log["outcome"], log["rows_ok"]) == ("PROCESSED", 2)


def conflict_once(stack, hook_calls: list):
    """A TransactWriteItems cancelled by a conflicting transaction the first time: DynamoDB
    cancels with TransactionConflict on the contended item and None for the others."""

    def hook(params, **kwargs):
        hook_calls.append(1)
        if len(hook_calls) > 1:
            return None
        actions = json.loads(params["body"])["TransactItems"]
        reasons = [{"Code": "TransactionConflict"}] + [{"Code": "None"}] * (len(actions) - 1)
        return error_response(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                "CancellationReasons": reasons,
            }
        )

    return hook


def test_a_transaction_cancelled_by_a_conflict_is_retried_with_backoff(ingest, stack, monkeypatch):
    rows = [GOOD[0] | {"contact_id": f"c-{n}"} for n in range(30)]
    delivery = ingest.put("incoming/a.jsonl", jsonl(rows))
    sleeps, calls = [], []
    monkeypatch.setattr(table.time, "sleep", sleeps.append)
    ingest.app.dynamodb.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", conflict_once(stack, calls)
    )
    assert ingest.run(delivery) == []
    assert len(ingest.items()) == 30
    assert len(calls) == 2  # 30 contacts in one transaction, cancelled once, then written
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.1


def test_writes_failing_after_every_attempt_fail_the_message_for_a_retry(
    ingest, stack, monkeypatch
):
    delivery = ingest.put("incoming/a.jsonl", jsonl(GOOD))
    monkeypatch.setattr(table.time, "sleep", lambda seconds: None)

    def always_conflicting(params, **kwargs):
        return conflict_once(stack, [])(params)

    ingest.app.dynamodb.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", always_conflicting
    )
    assert ingest.run(delivery) == [delivery.message_id]
    assert ingest.items() == []
    assert [log["outcome"] for log in ingest.processing_log()] == ["IN_PROGRESS"]

    ingest.app.dynamodb.meta.events.unregister(
        "before-call.dynamodb.TransactWriteItems", always_conflicting
    )
    assert ingest.run(delivery) == []
    assert len(ingest.items()) == 2
    assert [log["outcome"] for log in ingest.processing_log()] == ["PROCESSED"]


# ---- logs and cost ------------------------------------------------------------------------------


def test_no_phone_number_or_email_reaches_the_logs(ingest, caplog):
    caplog.set_level(logging.INFO)  # the level the function runs at (POWERTOOLS_LOG_LEVEL)
    bad = GOOD[0] | {
        "contact_id": "c-9",
        "caller": "+4930555000111",
        "wait_seconds": "x",
        "email": "lee@example.com",
    }
    ok = ingest.put("incoming/a.jsonl", jsonl([*GOOD, bad]) + '{"caller": "+4930555000111"\n')
    failing = ingest.put("incoming/b.jsonl", jsonl(GOOD))
    fail_get_object_of(ingest.app, "incoming/b.jsonl")
    assert ingest.run(ok, ok, failing, Delivery("poison", json.dumps({"caller": PHONES[2]}))) == [
        failing.message_id
    ]

    logs = ingest.output + caplog.text
    assert "file outcome recorded" in logs and "file failed" in logs  # the logs were captured
    for secret in (*PHONES, *EMAILS, "4915112345678", "example.com"):
        assert secret not in logs


def test_dynamodb_requests_per_row_stay_within_budget(ingest):
    # Ten transactions show the cost per transaction and per row as well as forty would: a row
    # costs no request of its own, whatever the file's size (on moto each row costs ~8 ms of CPU).
    lines = 500
    rows = [
        GOOD[n % 2] | {"contact_id": f"c-{n}", "caller": f"+49151{n:08d}"} for n in range(lines)
    ]
    delivery = ingest.put("incoming/big.jsonl.gz", gzip.compress(jsonl(rows).encode()))
    requests = []
    ingest.app.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda event_name, **kwargs: requests.append(event_name)
    )
    assert ingest.run(delivery) == []
    assert ingest.log_of(delivery)["rows_ok"] == lines
    # A transaction per 50 new contacts; the claim and its completion; the processing log read,
    # the key's newest version, the log started and finished.
    assert len(requests) == lines / 50 + 2 + 4
    assert len(requests) / lines <= 0.05
