"""The contact-record generator: records shaped as Amazon Connect writes them, legs chained as
Connect chains them, and the S3 objects and keys Firehose makes of them."""

import gzip
import json
import random
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import connect_records as ctr

START = datetime(2026, 11, 2, 9, 0, 5, tzinfo=UTC)
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
KEY = re.compile(
    r"^contact-records/(\d{4})/(\d\d)/(\d\d)/(\d\d)/(?P<stream>[\w.-]+)-1-"
    r"(\d{4})-(\d\d)-(\d\d)-(\d\d)-(\d\d)-(\d\d)-"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?P<gz>\.gz)?$"
)
EVENTS = Path(__file__).resolve().parents[3] / "events"


def legs_of(kind, seed=7, **kwargs):
    return ctr.interaction(
        random.Random(seed), caller="+15550001234", started=START, kind=kind, **kwargs
    )


def split_concatenated(body: bytes) -> list[dict]:
    """JSON objects written one after another, with or without whitespace between them."""
    text, decoder, at, found = body.decode(), json.JSONDecoder(), 0, []
    while at < len(text):
        record, at = decoder.raw_decode(text, at)
        found.append(record)
        while at < len(text) and text[at].isspace():
            at += 1
    return found


def timestamps(value):
    """Every field named ...Timestamp in a record, at any depth, with its value."""
    if isinstance(value, dict):
        for name, inner in value.items():
            if name.endswith("Timestamp"):
                yield name, inner
            yield from timestamps(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from timestamps(inner)


@pytest.mark.parametrize("kind", ctr.KINDS)
def test_each_kind_makes_its_legs_chained_as_connect_chains_them(kind):
    legs = legs_of(kind)
    assert len(legs) == ctr.leg_count(kind)
    first = legs[0]["ContactId"]
    assert {ctr.interaction_id(leg) for leg in legs} == {first}
    # Connect leaves the first leg's InitialContactId and PreviousContactId null
    assert legs[0]["InitialContactId"] is None
    assert legs[0]["PreviousContactId"] is None
    assert all(leg["InitialContactId"] == first for leg in legs[1:])
    assert [leg["PreviousContactId"] for leg in legs[1:]] == [leg["ContactId"] for leg in legs[:-1]]
    assert [leg["NextContactId"] for leg in legs[:-1]] == [leg["ContactId"] for leg in legs[1:]]
    assert legs[-1]["NextContactId"] is None
    assert len({leg["ContactId"] for leg in legs}) == len(legs)


@pytest.mark.parametrize("kind", ctr.KINDS)
def test_a_record_has_connects_fields_types_and_size(kind):
    for leg in legs_of(kind):
        text = json.dumps(leg, separators=(",", ":"))
        assert json.loads(text) == leg
        assert len(text) >= 1500  # real records are KBs: ARNs, hierarchy, attributes
        assert leg["AWSContactTraceRecordFormatVersion"] == "2017-03-10"
        assert UUID.match(leg["ContactId"])
        assert leg["InstanceARN"] == ctr.INSTANCE_ARN
        assert leg["Channel"] in {"VOICE", "CHAT", "TASK"}
        assert list(leg) == sorted(leg)  # every field present, in Connect's order
        for name, value in timestamps(leg):
            assert value is None or TIMESTAMP.match(value), (name, value)
        assert all(isinstance(v, str) for v in leg["Attributes"].values())
        assert leg["InitiationTimestamp"] <= leg["DisconnectTimestamp"] < leg["LastUpdateTimestamp"]
        if leg["Queue"] and leg["Queue"]["EnqueueTimestamp"]:
            queue = leg["Queue"]
            assert queue["EnqueueTimestamp"] <= queue["DequeueTimestamp"]
            seconds = datetime.fromisoformat(queue["DequeueTimestamp"]) - datetime.fromisoformat(
                queue["EnqueueTimestamp"]
            )
            assert queue["Duration"] == seconds.total_seconds()
        if leg["Agent"]:
            agent = leg["Agent"]
            assert re.match(rf"^{re.escape(ctr.INSTANCE_ARN)}/agent/[0-9a-f-]{{36}}$", agent["ARN"])
            assert agent["ARN"].startswith("arn:aws:connect:us-east-1:111122223333:instance/")
            assert agent["HierarchyGroups"]["Level1"]["GroupName"]
            assert agent["RoutingProfile"]["Name"]
            assert agent["AfterContactWorkEndTimestamp"] <= leg["LastUpdateTimestamp"]
            assert isinstance(agent["AgentInteractionDuration"], int)


def test_a_handled_call_is_queued_then_connected_to_an_agent_and_recorded():
    [leg] = legs_of("handled")
    assert (leg["Channel"], leg["InitiationMethod"]) == ("VOICE", "INBOUND")
    assert leg["CustomerEndpoint"] == {"Address": "+15550001234", "Type": "TELEPHONE_NUMBER"}
    assert leg["Queue"]["Duration"] > 0
    assert leg["Agent"]["ConnectedToAgentTimestamp"] == leg["Queue"]["DequeueTimestamp"]
    assert leg["Recording"]["Location"] == leg["Recordings"][0]["Location"]
    assert leg["InitiationTimestamp"] == "2026-11-02T09:00:05Z"


def test_an_abandoned_call_has_no_agent_a_queue_wait_and_no_next_leg():
    [leg] = legs_of("abandoned")
    assert leg["Agent"] is None
    assert leg["Queue"]["Duration"] > 0
    assert leg["Queue"]["DequeueTimestamp"] == leg["DisconnectTimestamp"]
    assert leg["NextContactId"] is None
    assert leg["DisconnectReason"] == "CUSTOMER_DISCONNECT"
    assert leg["Recording"] is None


def test_transfers_open_legs_initiated_by_transfer_and_each_later_leg_has_an_agent():
    seen = set()
    for seed in range(20):
        legs = legs_of("transferred_twice", seed=seed)
        methods = [leg["InitiationMethod"] for leg in legs]
        assert methods in (
            ["INBOUND", "TRANSFER", "TRANSFER"],
            ["INBOUND", "QUEUE_TRANSFER", "TRANSFER"],
        )
        seen.add(methods[1])
        assert all(leg["Agent"] for leg in legs[1:])
        assert all(leg["SystemEndpoint"] is None for leg in legs[1:])
        assert len({leg["CustomerEndpoint"]["Address"] for leg in legs}) == 1
        # an internal transfer is not a transfer out of Connect
        assert all(leg["TransferredToEndpoint"] is None for leg in legs)
    assert seen == {"TRANSFER", "QUEUE_TRANSFER"}
    first, second = legs_of("transferred")
    assert first["Agent"]["Username"] and second["Agent"]["Username"]
    assert "transfer_reason" in second["Attributes"]


def test_a_transfer_out_of_connect_names_the_endpoint_and_when_it_answered():
    [leg] = legs_of("external_transfer")
    assert leg["TransferredToEndpoint"]["Address"] in ctr.EXTERNAL_DESKS
    assert leg["Agent"]["ConnectedToAgentTimestamp"] < leg["TransferCompletedTimestamp"]
    assert leg["TransferCompletedTimestamp"] < leg["DisconnectTimestamp"]


def test_a_callback_is_a_queued_inbound_leg_then_a_callback_leg_with_an_agent():
    request, call = legs_of("callback")
    assert request["Agent"] is None and request["Queue"] and request["NextContactId"]
    assert request["DisconnectReason"] == "CONTACT_FLOW_DISCONNECT"
    assert call["InitiationMethod"] == "CALLBACK"
    assert call["Queue"]["Name"] == "Callbacks"
    assert call["Agent"] and call["CustomerEndpoint"]["Address"] == "+15550001234"
    assert call["InitiationTimestamp"] == request["DisconnectTimestamp"]


def test_chats_and_tasks_carry_no_telephone_endpoint():
    [chat] = legs_of("chat")
    assert (chat["Channel"], chat["InitiationMethod"]) == ("CHAT", "API")
    assert chat["CustomerEndpoint"] is None and chat["SystemEndpoint"] is None
    assert chat["Recording"] is None
    assert chat["Recordings"][0]["MediaStreamType"] == "CHAT"
    [task] = legs_of("task")
    assert task["Channel"] == "TASK" and task["CustomerEndpoint"] is None
    assert task["References"][0]["Type"] == "URL"


def test_outbound_and_self_service_calls():
    [call] = legs_of("outbound")
    assert call["InitiationMethod"] == "OUTBOUND"
    assert call["SystemEndpoint"]["Address"] == ctr.OUTBOUND_CALLER_ID
    assert call["Agent"]["ConnectedToAgentTimestamp"] == call["InitiationTimestamp"]
    [ivr] = legs_of("self_service")
    assert ivr["Agent"] is None and ivr["Queue"] is None
    assert ivr["Attributes"]["self_service_outcome"]


def test_survey_attributes_take_the_configured_names():
    names = ctr.SurveyAttributes(opt_in="postCallSurvey", email="customerEmail")
    found = {}
    for seed in range(30):
        attributes = legs_of("handled", seed=seed, attribute_names=names)[0]["Attributes"]
        assert "survey_opt_in" not in attributes and "email" not in attributes
        assert len(attributes) >= 16
        for name in ("postCallSurvey", "customerEmail"):
            if name in attributes:
                found.setdefault(name, set()).add(attributes[name])
    assert found["postCallSurvey"] == {"true", "false"}
    assert all("@example." in email for email in found["customerEmail"])


def test_records_mix_every_kind_with_long_waits_in_delivery_order():
    rng = random.Random(11)
    recs = ctr.records(rng, 400, start=START, callers=["+15550000001", "+15550000002"])
    assert len(recs) > 400
    assert [r["LastUpdateTimestamp"] for r in recs] == sorted(
        r["LastUpdateTimestamp"] for r in recs
    )
    firsts = [r for r in recs if r["InitialContactId"] is None]
    assert len(firsts) == 400
    assert {r["CustomerEndpoint"]["Address"] for r in recs if r["CustomerEndpoint"]} == {
        "+15550000001",
        "+15550000002",
    }
    methods = {r["InitiationMethod"] for r in recs}
    assert methods >= {"INBOUND", "OUTBOUND", "TRANSFER", "QUEUE_TRANSFER", "CALLBACK", "API"}
    assert {r["Channel"] for r in recs} == {"VOICE", "CHAT", "TASK"}
    long_waits = [r for r in recs if r["Queue"] and r["Queue"]["Duration"] >= 600]
    assert 0.05 < len(long_waits) / len(recs) < 0.35
    # every leg's chain is whole: the legs an id names are in the set
    ids = {r["ContactId"] for r in recs}
    assert all(r["NextContactId"] in ids for r in recs if r["NextContactId"])


def test_records_take_a_mix_and_are_the_same_for_the_same_seed():
    only_chats = ctr.records(random.Random(3), 20, start=START, mix={"chat": 1})
    assert {r["Channel"] for r in only_chats} == {"CHAT"}
    one = ctr.records(random.Random(5), 50, start=START)
    assert one == ctr.records(random.Random(5), 50, start=START)
    assert one != ctr.records(random.Random(6), 50, start=START)
    assert legs_of("transferred_twice") == legs_of("transferred_twice")


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kind"):
        legs_of("voicemail")


def test_a_redelivered_copy_moves_last_update_and_a_newer_one_changes_an_attribute():
    [record] = legs_of("handled")
    newer = ctr.redelivered(record, seconds=90)
    assert newer["ContactId"] == record["ContactId"]
    assert newer["LastUpdateTimestamp"] > record["LastUpdateTimestamp"]
    assert newer["Attributes"]["crm_case_status"] == "closed"
    assert record["Attributes"]["crm_case_status"] == "open"  # the original is untouched
    older = ctr.redelivered(record, seconds=-30)
    assert older["LastUpdateTimestamp"] < record["LastUpdateTimestamp"]
    assert {**older, "LastUpdateTimestamp": record["LastUpdateTimestamp"]} == record
    assert ctr.redelivered(record, seconds=0) == record


def test_firehose_objects_concatenate_with_or_without_newlines_and_gzip():
    recs = [*legs_of("transferred"), *legs_of("chat")]
    plain = ctr.firehose_object(recs, newline=False, gzip=False)
    assert b"\n" not in plain and plain.count(b"}{") >= len(recs) - 1
    assert split_concatenated(plain) == recs
    lines = ctr.firehose_object(recs, newline=True, gzip=False)
    assert lines.endswith(b"\n")
    assert [json.loads(line) for line in lines.splitlines()] == recs
    packed = ctr.firehose_object(recs, newline=True, gzip=True)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == lines
    assert packed == ctr.firehose_object(recs, newline=True, gzip=True)  # reproducible


def test_firehose_keys_have_firehoses_format():
    when = datetime(2026, 11, 30, 9, 4, 17, tzinfo=UTC)
    key = ctr.firehose_key("acme-care-ctr", when, gzip=False)
    match = KEY.match(key)
    assert match and match["stream"] == "acme-care-ctr" and not match["gz"]
    assert key.startswith("contact-records/2026/11/30/09/acme-care-ctr-1-2026-11-30-09-04-17-")
    assert KEY.match(ctr.firehose_key("acme-care-ctr", when, gzip=True))["gz"] == ".gz"
    assert ctr.firehose_key("s", when, gzip=False) != ctr.firehose_key("s", when, gzip=False)
    other = ctr.firehose_key("s", when, gzip=False, prefix="ctr/", object_id=uuid.UUID(int=1))
    assert other == "ctr/2026/11/30/09/s-1-2026-11-30-09-04-17-00000000-0000-0000-0000-000000000001"


def test_the_sample_objects_in_events_data_are_the_modules_own():
    for name, body in ctr.sample_objects().items():
        assert (EVENTS / "data" / name).read_bytes() == body, f"rerun python -m {ctr.__name__}"
    recs = split_concatenated((EVENTS / "data" / "contact-records-concatenated").read_bytes())
    assert [r["Channel"] for r in recs].count("CHAT") == 1
    assert sum(r["InitialContactId"] is not None for r in recs) == 2  # three legs
    first, *_, again = recs
    assert again["ContactId"] == first["ContactId"]
    assert again["LastUpdateTimestamp"] > first["LastUpdateTimestamp"]


def test_the_sqs_event_names_a_contact_records_object():
    event = json.loads((EVENTS / "sqs-s3-contact-records.json").read_text())
    [message] = event["Records"]
    [notification] = json.loads(message["body"])["Records"]
    assert KEY.match(notification["s3"]["object"]["key"])
    assert notification["s3"]["object"]["key"].startswith("contact-records/2026/11/30/09/")
