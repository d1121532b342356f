"""`ops file reprocess` against a running ingest (moto, the real IngestFunction handler): runs of a
file are fenced, so a step of an earlier run still queued, dead-lettered or running when the file
is reprocessed changes nothing, and a reprocess is refused while a step holds its claim. `ops
status` lists the files IN_PROGRESS for more than an hour, and they page."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from shared import keys

from harness.in_process import FakeLambdaContext, ShrinkingClock, load_handler
from ops import files, status
from ops.errors import OpsError
from ops.stack import Stack
from tests.unit.ingest.support import Delivery, Ingest, error_response, sqs_event
from tests.unit.template_yaml import alarm_threshold, of_type

ROWS = 800
# Deliveries of IngestQueue a file of ROWS rows needs, with room to spare; a file that cycles
# between its steps never runs out of them.
MAX_INVOCATIONS = 40


def row(n: int) -> dict:
    return {
        "contact_id": f"c-{n}",
        "caller": f"+49151{n:08d}",
        "agent_id": "agent-7",
        "started_at": "2026-11-29T10:00:00Z",
        "ended_at": "2026-11-29T10:05:00Z",
        "updated_at": "2026-11-29T12:00:00Z",
        "disposition": "RESOLVED",
        "wait_seconds": 42,
    }


def big_file(bad_lines: set[int] = frozenset()) -> str:
    rows = ({"contact_id": f"bad-{n}"} if n in bad_lines else row(n) for n in range(1, ROWS + 1))
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def ingest(stack, monkeypatch, capsys) -> Ingest:
    return Ingest(stack, monkeypatch, capsys)


def queued(ingest: Ingest) -> list[Delivery]:
    return [
        Delivery(m["MessageId"], m["Body"])
        for m in ingest.stack.drain(ingest.stack.ingest_queue_url)
    ]


def deliver_until_quiet(ingest: Ingest, pending: list[Delivery]) -> int:
    """Deliver what IngestQueue holds, one batch per invocation, failed messages again, until it
    is empty; the invocations it took. Each invocation has the first step's time (two writes of
    rows), so every step of every run stops where the first one did, after line N."""
    for invocation in range(1, MAX_INVOCATIONS + 1):
        failed = set(ingest.run(*pending, context=ShrinkingClock()))
        pending = [d for d in pending if d.message_id in failed] + queued(ingest)
        if not pending:
            return invocation
    raise AssertionError(f"IngestQueue still busy after {MAX_INVOCATIONS} invocations")


def url_of(ingest: Ingest, delivery: Delivery) -> tuple[str, str]:
    log = ingest.log_of(delivery)
    return f"s3://{log['bucket']}/{log['key']}", log["version"]


def test_a_reprocess_while_an_older_step_waits_completes_the_file_once(ingest, ops_stack):
    """The file stops after line N; its "after N" step waits (queued, or in the DLQ). The file is
    reprocessed, and the new run's first step fails once after taking over the log (S3 refused
    the read). The old "after N" arrives then: before runs were fenced it stored a result
    pointing back to line 0, and the file cycled 0 -> N -> 0 for ever with most rows unstored."""
    delivery = ingest.put("incoming/big.jsonl", big_file())
    assert ingest.run(delivery, context=ShrinkingClock()) == []
    [old_step] = queued(ingest)  # held: it waits in the queue or the DLQ
    assert 0 < ingest.log_of(delivery)["next_line"] < ROWS

    url, version = url_of(ingest, delivery)
    files.reprocess(ops_stack, url, version, confirm=None)
    refusals = []

    def refuse_once(**kwargs):  # the file's first read (it has no report)
        if not refusals:
            refusals.append(1)
            return error_response({"Error": {"Code": "AccessDenied", "Message": "Denied"}})
        return None

    ingest.app.s3.meta.events.register("before-call.s3.GetObject", refuse_once)
    [new_run] = queued(ingest)
    assert ingest.run(new_run, context=ShrinkingClock()) == [new_run.message_id]
    assert refusals

    deliver_until_quiet(ingest, [Delivery("old-step", old_step.body), new_run])

    assert len(ingest.items()) == ROWS
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["rows_ok"], log["run"]) == ("PROCESSED", ROWS, 1)
    assert ingest.metrics()["FileStepsObsolete"] == 1


def test_a_step_running_when_the_file_is_reprocessed_keeps_its_hands_off_the_new_run(
    ingest, ops_stack, monkeypatch
):
    """The old run's "after N" step starts before the new run's first step arrives, and is still
    running when the new run has taken the file over and finished it. The old step's rows are
    the same exports (harmless); its report and its final log write would replace the new run's:
    both are refused, and it continues nothing."""
    bad_lines = {n for n in range(1, ROWS + 1) if n % 100 == 0}
    delivery = ingest.put("incoming/big.jsonl", big_file(bad_lines))
    assert ingest.run(delivery, context=ShrinkingClock(remaining_ms=20_000)) == []
    [old_step] = queued(ingest)  # held: it waits in the queue or the DLQ
    assert ingest.log_of(delivery)["next_line"] < 100  # the old step has every bad row to come

    url, version = url_of(ingest, delivery)
    files.reprocess(ops_stack, url, version, confirm=None)
    [new_run] = queued(ingest)
    other_environment = load_handler("ingest", monkeypatch)
    took_over = []

    def new_run_meanwhile(**kwargs):
        if not took_over:
            took_over.append(
                other_environment.lambda_handler(sqs_event(new_run), FakeLambdaContext())
            )

    ingest.app.s3.meta.events.register("before-call.s3.GetObject", new_run_meanwhile)
    assert ingest.run(Delivery("old-step", old_step.body), context=FakeLambdaContext()) == []

    assert took_over == [{"batchItemFailures": []}]
    assert queued(ingest) == []  # no continuation of the old run
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["run"], log["rows_ok"], log["steps"]) == ("PROCESSED", 1, 792, 1)
    assert [entry["line"] for entry in ingest.report_at(log["report_key"])] == sorted(bad_lines)
    assert ingest.metrics()["FileStepsObsolete"] == 1


def test_a_reprocess_is_refused_while_a_step_holds_its_claim(ingest, ops_stack):
    delivery = ingest.put("incoming/big.jsonl", big_file())
    url = f"s3://{ops_stack.bucket}/incoming/big.jsonl"
    attempts = []

    def reprocess_meanwhile(**kwargs):
        with pytest.raises(OpsError) as refused:
            files.reprocess(ops_stack, url, None, confirm=None)
        attempts.append(str(refused.value))

    ingest.app.s3.meta.events.register("before-call.s3.GetObject", reprocess_meanwhile)
    assert ingest.run(delivery, context=FakeLambdaContext()) == []

    [message] = attempts
    assert "a step of this file is running" in message
    assert queued(ingest) == []  # nothing sent
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["rows_ok"], log["steps"]) == ("PROCESSED", ROWS, 1)
    assert "run" not in log  # still the first run

    ingest.app.s3.meta.events.unregister("before-call.s3.GetObject", reprocess_meanwhile)
    reprocessed, _, _ = files.reprocess(ops_stack, url, None, confirm=None)  # done: allowed
    assert (reprocessed["run"], reprocessed["previous_outcome"]) == (1, "PROCESSED")


def test_status_lists_the_files_in_progress_for_more_than_an_hour(ingest, ops_stack):
    now = datetime.now(UTC)
    recent = ingest.put("incoming/recent.jsonl", big_file(), event_time=keys.utc_timestamp(now))
    stuck = ingest.put(
        "incoming/stuck.jsonl", big_file(), event_time=keys.utc_timestamp(now - timedelta(hours=2))
    )
    for delivery in (recent, stuck):  # each stops after its first rows
        assert ingest.run(delivery, context=ShrinkingClock()) == []
    assert {ingest.log_of(d)["outcome"] for d in (recent, stuck)} == {"IN_PROGRESS"}
    assert ingest.metrics()["FileInProgressSeconds"] > 7200  # what the alarm watches

    outputs = dict(ops_stack.outputs)
    for queue in ops_stack.dead_letter_queues:
        outputs[f"{queue}Url"] = ingest.stack.sqs.create_queue(QueueName=queue)["QueueUrl"]
    data, text, _ = status.report(Stack("unit", ops_stack.session, outputs, {}))

    [listed] = data["files_in_progress"]
    assert listed["file_id"] == ingest.log_of(stuck)["file_id"]
    assert 7200 <= listed["in_progress_seconds"] < 7300
    assert "files IN_PROGRESS for more than an hour" in text
    assert "incoming/stuck.jsonl" in text and "incoming/recent.jsonl" not in text


def test_a_file_in_progress_for_more_than_an_hour_pages_someone():
    [alarm] = [
        resource["Properties"]
        for resource in of_type("AWS::CloudWatch::Alarm").values()
        if resource["Properties"]["MetricName"] == "FileInProgressSeconds"
    ]
    assert (alarm["Namespace"], alarm["Dimensions"]) == (
        "ContactCenter",
        [{"Name": "service", "Value": "ingest"}],
    )
    assert (alarm["Statistic"], alarm["ComparisonOperator"], alarm_threshold(alarm)) == (
        "Maximum",
        "GreaterThanThreshold",
        status.FILE_IN_PROGRESS_SECONDS,
    )
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_a_reprocess_before_the_files_s3_event_is_processed_is_refused(ingest, ops_stack):
    """No processing log yet: the sequencer and event time that order the file's rows are only in
    its S3 event (the object's metadata has neither), and the event will start the run. Before,
    a guessed sequencer ("0") made run 1 lose the newest-version claim to the file itself: the
    file ended STALE, superseded by itself."""
    delivery = ingest.put("incoming/a.jsonl", json.dumps(row(1)) + "\n")
    url = f"s3://{ops_stack.bucket}/incoming/a.jsonl"

    with pytest.raises(OpsError) as refused:
        files.reprocess(ops_stack, url, None, confirm=None)

    assert "has not been processed yet" in str(refused.value)
    assert queued(ingest) == []  # nothing sent
    assert deliver_until_quiet(ingest, [delivery]) == 1
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["rows_ok"], "run" in log) == ("PROCESSED", 1, False)
    assert [item["contact_id"] for item in ingest.items()] == ["c-1"]


def test_a_reprocess_of_a_file_in_progress_finishes_it_though_a_newer_version_came_meanwhile(
    ingest, ops_stack
):
    """Version 1 stops after line N (its rows up to N stored) and is reprocessed; version 2 of the
    key is applied before run 1's first step. Version 1's first run had claimed its version, so
    the reprocess goes on as that run would have (a file overtaken while in progress is finished,
    contact by contact the newer export wins). Before, run 1 claimed the version again, lost to
    version 2 and ended STALE ("changed nothing"), the first N rows stored and the rest never."""
    first = ingest.put("incoming/big.jsonl", big_file())
    assert ingest.run(first, context=ShrinkingClock()) == []
    [old_step] = queued(ingest)  # held: it waits in the queue or the DLQ
    stored_before = ingest.log_of(first)["next_line"]
    assert 0 < stored_before < ROWS

    url, version = url_of(ingest, first)
    files.reprocess(ops_stack, url, version, confirm=None)
    [new_run] = queued(ingest)
    corrected = {**row(1), "agent_id": "agent-8"}
    second = ingest.put("incoming/big.jsonl", json.dumps(corrected) + "\n")
    assert ingest.run(second) == []
    assert ingest.log_of(second)["outcome"] == "PROCESSED"

    deliver_until_quiet(ingest, [Delivery("old-step", old_step.body), new_run])

    log = ingest.log_of(first)
    assert (log["outcome"], log["run"], log["rows_ok"] + log["rows_superseded"]) == (
        "PROCESSED",
        1,
        ROWS,
    )
    contacts = {item["contact_id"]: item for item in ingest.items()}
    assert len(contacts) == ROWS
    assert contacts["c-1"]["agent_id"] == "agent-8"  # the newer export of c-1


def test_a_file_in_progress_can_be_reprocessed_after_a_newer_version_was_applied(ingest, ops_stack):
    """Version 1 stops after line N and its step is lost to the DLQ; version 2 is applied. Version
    1 must still end (else IngestFileInProgressAlarm pages for ever): its reprocess finishes it.
    Before, it was refused as superseded ("a reprocess would change nothing")."""
    first = ingest.put("incoming/big.jsonl", big_file())
    assert ingest.run(first, context=ShrinkingClock()) == []
    queued(ingest)  # its step: dead-lettered, never redriven
    second = ingest.put("incoming/big.jsonl", json.dumps(row(1)) + "\n")
    assert ingest.run(second) == []

    url, version = url_of(ingest, first)
    reprocessed, _, _ = files.reprocess(ops_stack, url, version, confirm=None)
    deliver_until_quiet(ingest, queued(ingest))

    assert (reprocessed["run"], reprocessed["previous_outcome"]) == (1, "IN_PROGRESS")
    log = ingest.log_of(first)
    assert (log["outcome"], log["rows_ok"] + log["rows_superseded"]) == ("PROCESSED", ROWS)
    assert len(ingest.items()) == ROWS


def test_a_step_of_the_replaced_run_that_comes_first_keeps_reading_its_report(ingest, ops_stack):
    """The file stops after line N with rows reported; it is reprocessed, and its "after N" step
    arrives before the new run's first step (which has not taken the log over yet): the log still
    names that step's run, so the step is due and resumes, reading the report of its run. Before,
    the reprocess had deleted that report: the step failed on NoSuchKey at every delivery, and
    behind it in each batch the new run's first step was deferred, so the file never finished."""
    bad_lines = {n for n in range(1, ROWS + 1) if n % 10 == 0}
    delivery = ingest.put("incoming/big.jsonl", big_file(bad_lines))
    assert ingest.run(delivery, context=ShrinkingClock()) == []
    [old_step] = queued(ingest)
    assert ingest.log_of(delivery)["report_rows"] > 0

    url, version = url_of(ingest, delivery)
    files.reprocess(ops_stack, url, version, confirm=None)
    [new_run] = queued(ingest)
    assert ingest.run(Delivery("old-step", old_step.body), context=ShrinkingClock()) == []

    deliver_until_quiet(ingest, [new_run, *queued(ingest)])

    assert len(ingest.items()) == ROWS - len(bad_lines)
    log = ingest.log_of(delivery)
    assert (log["outcome"], log["run"]) == ("PROCESSED", 1)
    assert [entry["line"] for entry in ingest.report_at(log["report_key"])] == sorted(bad_lines)
    assert ingest.metrics()["FileStepsObsolete"] == 1  # the old run's next step


def test_a_reprocess_that_rejects_nothing_leaves_no_row_of_the_earlier_runs_report(
    ingest, ops_stack, monkeypatch
):
    """The first run could not read a row (a fault since fixed), so its report lists it; the
    reprocess stores every row. Its report replaces the earlier one (ops deletes none): empty,
    not the earlier run's line."""
    shared_model = ingest.app.ingest.model
    parse_contact = shared_model.parse_contact

    def fails_on_c_2(fields, **kwargs):
        if fields.get("contact_id") == "c-2":
            raise ValueError("a fault since fixed")
        return parse_contact(fields, **kwargs)

    monkeypatch.setattr(shared_model, "parse_contact", fails_on_c_2)
    delivery = ingest.put(
        "incoming/small.jsonl", "".join(json.dumps(row(n)) + "\n" for n in (1, 2, 3))
    )
    assert ingest.run(delivery) == []
    first = ingest.log_of(delivery)
    assert [entry["line"] for entry in ingest.report_at(first["report_key"])] == [2]
    monkeypatch.setattr(shared_model, "parse_contact", parse_contact)

    files.reprocess(ops_stack, *url_of(ingest, delivery), confirm=None)
    deliver_until_quiet(ingest, queued(ingest))

    log = ingest.log_of(delivery)
    assert (log["outcome"], log["run"], log["rows_ok"], log["rows_rejected"]) == (
        "PROCESSED",
        1,
        3,
        0,
    )
    assert len(ingest.items()) == 3
    assert ingest.report_at(first["report_key"]) == []


def announce_as_the_template_does(ops_stack: Stack) -> list[str]:
    """The bucket's notification configuration of template.yaml, on the unit bucket; its
    prefixes."""
    bucket = of_type("AWS::S3::Bucket")["ContactsBucket"]
    declared = bucket["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    queue_arn = ops_stack.sqs.get_queue_attributes(
        QueueUrl=ops_stack.outputs["IngestQueueUrl"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    ops_stack.s3.put_bucket_notification_configuration(
        Bucket=ops_stack.bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": queue_arn,
                    "Events": [queue["Event"]],
                    "Filter": {"Key": {"FilterRules": queue["Filter"]["S3Key"]["Rules"]}},
                }
                for queue in declared
            ]
        },
    )
    return [rule["Value"] for queue in declared for rule in queue["Filter"]["S3Key"]["Rules"]]


def test_file_status_says_when_a_key_is_outside_the_ingested_prefixes(ingest, ops_stack):
    """A file put beside incoming/ gets no S3 event, so no processing log ever: status says why
    and where to put it, and asks for attention (exit 1), instead of "no processing log"."""
    prefixes = announce_as_the_template_does(ops_stack)
    assert prefixes == ["incoming/", "contact-records/"]
    for key in ("exports/a.jsonl", "incoming/a.jsonl"):
        ingest.stack.s3.put_object(Bucket=ops_stack.bucket, Key=key, Body=b"{}\n")

    data, text, ok = files.status(ops_stack, f"s3://{ops_stack.bucket}/exports/a.jsonl", None)
    assert not ok and data["ingested_prefixes"] == prefixes
    assert "exports/a.jsonl is outside the prefixes the bucket announces" in text
    assert "Put the file under incoming/" in text

    _, text, ok = files.status(ops_stack, f"s3://{ops_stack.bucket}/incoming/a.jsonl", None)
    assert ok and text.endswith("no processing log (not ingested yet)")


def test_file_status_prints_a_rejected_files_reasons(ingest, ops_stack):
    delivery = ingest.put("incoming/other.csv", "id,phone\n1,+4915112345678\n")
    assert ingest.run(delivery) == []
    assert ingest.log_of(delivery)["outcome"] == "REJECTED_FILE"

    data, text, ok = files.status(ops_stack, f"s3://{ops_stack.bucket}/incoming/other.csv", None)
    missing = "contact_id, caller, started_at, ended_at, updated_at, disposition, wait_seconds"
    assert ok and data["log"]["reasons"] == [f"the header row has no column {missing}"]
    assert f"  reasons: ['the header row has no column {missing}']" in text
