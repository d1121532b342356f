"""IngestQueue message bodies (S3 event notifications, continuations) -> the files to ingest,
and the order of a key's versions and of exports."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from shared.s3_events import FileTask, NotAnS3Event, S3Object, continuation, parse_message

EVENTS = Path(__file__).resolve().parents[3] / "events"


def body_of(event_file: str, index: int = 0) -> str:
    return json.loads((EVENTS / event_file).read_text())["Records"][index]["body"]


def notification(key="incoming/a.jsonl", event_time="2026-11-29T08:15:02.431Z", **object_fields):
    obj = {"key": key, "size": 10, "eTag": "abc", "sequencer": "0055"} | object_fields
    return json.dumps(
        {
            "Records": [
                {
                    "eventSource": "aws:s3",
                    "eventName": "ObjectCreated:Put",
                    "eventTime": event_time,
                    "s3": {"bucket": {"name": "contacts-bucket"}, "object": obj},
                }
            ]
        }
    )


def parse_notification(body: str) -> list[S3Object]:
    tasks = parse_message(body)
    assert all(task.after_line == 0 for task in tasks)
    return [task.s3_object for task in tasks]


def test_put_event_names_the_object_with_its_key_url_decoded():
    [s3_object] = parse_notification(body_of("sqs-s3-put.json"))
    assert s3_object.bucket == "contacts-bucket"
    assert s3_object.key == "incoming/2026-11-29/Kontakte München.jsonl"
    assert s3_object.version_id == "3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"
    assert s3_object.size == 1184
    assert s3_object.etag == "d41d8cd98f00b204e9800998ecf8427e"
    assert s3_object.file_id == (
        "contacts-bucket/incoming/2026-11-29/Kontakte München.jsonl"
        "#3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"
    )


@pytest.mark.parametrize(
    ("encoded", "decoded"),
    [
        ("incoming/a+b.csv", "incoming/a b.csv"),
        ("incoming/a%2Bb.csv", "incoming/a+b.csv"),
        ("incoming%2F2026%2Fx.csv", "incoming/2026/x.csv"),
        ("incoming/%E2%82%AC+%26+%25.csv", "incoming/€ & %.csv"),
    ],
)
def test_keys_are_decoded_as_form_encoding(encoded, decoded):
    [s3_object] = parse_notification(notification(key=encoded))
    assert s3_object.key == decoded


def test_unversioned_bucket_identifies_the_file_by_the_sequencer():
    [s3_object] = parse_notification(notification(sequencer="0068CA1F"))
    assert s3_object.version_id is None
    assert s3_object.file_id == "contacts-bucket/incoming/a.jsonl#0068CA1F"


def test_version_id_wins_over_the_sequencer():
    [s3_object] = parse_notification(notification(versionId="v1", sequencer="0068"))
    assert s3_object.file_id.endswith("#v1")


def test_same_event_under_two_message_ids_is_the_same_file():
    first, second = (body_of("sqs-s3-duplicate.json", i) for i in (0, 1))
    assert parse_notification(first) == parse_notification(second)


def test_s3_test_event_names_no_object():
    assert parse_notification(body_of("sqs-s3-test-event.json")) == []


def test_events_other_than_object_created_are_ignored():
    body = json.loads(notification())
    body["Records"][0]["eventName"] = "ObjectRemoved:DeleteMarkerCreated"
    assert parse_notification(json.dumps(body)) == []


def test_file_id_is_part_of_the_dataclass_fields():
    # Powertools hashes the dataclass' fields (dataclasses.asdict); the claim key is file_id.
    s3_object = S3Object("b", "k.csv", "v", "0055", 1, None, "2026-11-29T08:15:02.431Z")
    assert asdict(FileTask(s3_object))["s3_object"]["file_id"] == "b/k.csv#v"


def test_the_event_time_is_fixed_width_utc():
    [s3_object] = parse_notification(notification(event_time="2026-11-29T09:15:02+01:00"))
    assert s3_object.event_time == "2026-11-29T08:15:02.000Z"


@pytest.mark.parametrize(
    ("earlier", "later"),
    [("0055", "0056"), ("55", "0056"), ("00FF", "100"), ("0068ca1f3b", "0068CA1F3C")],
)
def test_versions_of_a_key_are_ordered_by_sequencer_padded_with_zeros(earlier, later):
    [first] = parse_notification(notification(sequencer=earlier))
    [second] = parse_notification(notification(sequencer=later))
    assert first.ordering_sequencer < second.ordering_sequencer


def test_a_continuation_names_the_same_file_the_line_to_resume_after_and_the_run():
    [s3_object] = parse_notification(body_of("sqs-s3-put.json"))
    for task in (FileTask(s3_object, 4200), FileTask(s3_object, 4200, 3)):
        assert parse_message(continuation(task)) == [task]
    assert "run" not in continuation(FileTask(s3_object, 4200))  # the run S3's event started


@pytest.mark.parametrize(
    "body",
    [
        '{"IngestContinuation": 1}',
        '{"IngestContinuation": {"bucket": "b", "after_line": 3}}',
        continuation(FileTask(S3Object("b", "k", None, "01", 1, None, "t"), 1)).replace(
            '"after_line": 1', '"after_line": "1"'
        ),
        *(
            continuation(FileTask(S3Object("b", "k", None, "01", 1, None, "t"), 1, 2)).replace(
                '"run": 2', f'"run": {run}'
            )
            for run in ("0", "null", '"2"', "true")
        ),
    ],
)
def test_a_malformed_continuation_is_a_permanent_error(body):
    with pytest.raises(NotAnS3Event, match="continuation"):
        parse_message(body)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (body_of("sqs-poison.json"), "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"hello": "world"}', "no Records"),
        ('{"Records": []}', "no Records"),
        ('{"Records": [42]}', "no eventName"),
        ('{"Records": [{"eventName": "ObjectCreated:Put", "eventSource": "aws:sqs"}]}', "aws:s3"),
        ('{"Records": [{"eventName": "ObjectCreated:Put", "eventSource": "aws:s3"}]}', "s3.bucket"),
        (notification(key=""), "object key"),
        (notification(sequencer=None), "no sequencer"),
        (notification(sequencer="not hex"), "no sequencer"),
        (notification(event_time="yesterday"), "eventTime"),
        (notification(event_time="2026-11-29T08:15:02"), "eventTime"),
        (notification(size=-1), "size"),
    ],
)
def test_anything_else_is_a_permanent_error_naming_the_missing_part(body, reason):
    with pytest.raises(NotAnS3Event, match=reason) as raised:
        parse_message(body)
    assert "Hello" not in str(raised.value)  # the reason never echoes the content
