"""The input contract of DESIGN.md, rule by rule, and the CONTACT item it becomes."""

import json
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from shared import formats, model
from shared.model import Contact, parse_contact

from harness.in_process import cold_start
from tests.unit.ingest.support import Ingest

GOOD = {
    "contact_id": "c-1_A",
    "caller": "+4915112345678",
    "agent_id": "agent-7",
    "queue": "billing",
    "started_at": "2026-11-29T10:00:00+01:00",
    "ended_at": "2026-11-29T10:05:30.250+01:00",
    "updated_at": "2026-11-29T10:06:00+01:00",
    "disposition": "RESOLVED",
    "wait_seconds": 42,
    "email": "pat@example.com",
    "survey_opt_in": True,
}
GOOD_CSV = GOOD | {"wait_seconds": "42", "survey_opt_in": "true"}
INGESTED_AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JSON_ROW = {"text_values": False, "ingested_at": INGESTED_AT}


def reasons(fields, text_values=False, ingested_at=INGESTED_AT) -> list[str]:
    result = parse_contact(fields, text_values=text_values, ingested_at=INGESTED_AT)
    assert isinstance(result, list), "expected the row to be rejected"
    return result


def test_a_valid_json_row_becomes_a_contact():
    contact = parse_contact(GOOD, text_values=False, ingested_at=INGESTED_AT)
    assert contact == Contact(
        contact_id="c-1_A",
        caller="+4915112345678",
        agent_id="agent-7",
        queue="billing",
        started_at=datetime(2026, 11, 29, 10, 0, tzinfo=timezone(timedelta(hours=1))),
        ended_at=datetime(2026, 11, 29, 10, 5, 30, 250000, tzinfo=timezone(timedelta(hours=1))),
        disposition="RESOLVED",
        wait_seconds=42,
        email="pat@example.com",
        survey_opt_in=True,
        updated_at=datetime(2026, 11, 29, 10, 6, tzinfo=timezone(timedelta(hours=1))),
        interaction_id="c-1_A",
    )


def test_the_same_row_from_csv_is_the_same_contact():
    assert parse_contact(GOOD_CSV, text_values=True, ingested_at=INGESTED_AT) == parse_contact(
        GOOD, text_values=False, ingested_at=INGESTED_AT
    )


def test_optional_fields_may_be_absent_or_empty():
    fields = {k: v for k, v in GOOD.items() if k not in ("queue", "email", "survey_opt_in")}
    contact = parse_contact(fields | {"queue": ""}, text_values=False, ingested_at=INGESTED_AT)
    assert (contact.queue, contact.email, contact.survey_opt_in) == (None, None, False)


def test_unknown_fields_are_ignored():
    assert isinstance(
        parse_contact(GOOD | {"notes": "x"}, text_values=False, ingested_at=INGESTED_AT), Contact
    )


@pytest.mark.parametrize(
    "field",
    ["contact_id", "caller", "started_at", "ended_at", "disposition", "wait_seconds", "agent_id"],
)
@pytest.mark.parametrize("missing", [None, "", "absent"])
def test_required_fields(field, missing):
    fields = {k: v for k, v in GOOD.items() if k != field}
    if missing != "absent":
        fields[field] = missing
    assert f"{field}: required" in reasons(fields)


def test_the_required_input_fields_are_those_every_row_needs():
    """model.REQUIRED_INPUT_FIELDS (a CSV header without one rejects the file) are exactly the
    fields whose absence rejects a row whatever it holds (agent_id: not for an abandoned one)."""
    abandoned = {k: v for k, v in GOOD.items() if k != "agent_id"} | {"disposition": "ABANDONED"}
    for field in model.INPUT_FIELDS:
        without = {k: v for k, v in abandoned.items() if k != field}
        parsed = parse_contact(without, **JSON_ROW)
        rejected = isinstance(parsed, list) and f"{field}: required" in parsed
        assert rejected == (field in model.REQUIRED_INPUT_FIELDS), field


@pytest.mark.parametrize("contact_id", ["a", "A-z_09", "x" * 64])
def test_contact_id_accepts_1_to_64_of_the_alphabet(contact_id):
    assert isinstance(
        parse_contact(
            GOOD | {"contact_id": contact_id}, text_values=False, ingested_at=INGESTED_AT
        ),
        Contact,
    )


@pytest.mark.parametrize("contact_id", ["x" * 65, "c 1", "c.1", "c/1", "ç1", "c1\n", 123])
def test_contact_id_rejects_anything_else(contact_id):
    assert any(r.startswith("contact_id:") for r in reasons(GOOD | {"contact_id": contact_id}))


@pytest.mark.parametrize("caller", ["+1234567", "+123456789012345", "+4915112345678"])
def test_caller_accepts_e164(caller):
    assert isinstance(
        parse_contact(GOOD | {"caller": caller}, text_values=False, ingested_at=INGESTED_AT),
        Contact,
    )


@pytest.mark.parametrize(
    "caller",
    [
        "4915112345678",
        "+0123456789",
        "+123456",
        "+1234567890123456",
        "+49 151 1234",
        "+49-151",
        "+4915112345678\n",
        4915112345678,
    ],
)
def test_caller_rejects_anything_but_e164(caller):
    result = reasons(GOOD | {"caller": caller})
    assert any(r.startswith("caller:") for r in result)
    assert not any("4915" in r for r in result)  # reasons never echo the phone number


def test_agent_id_is_optional_only_for_abandoned_contacts():
    fields = {k: v for k, v in GOOD.items() if k != "agent_id"}
    assert (
        parse_contact(
            fields | {"disposition": "ABANDONED"}, text_values=False, ingested_at=INGESTED_AT
        ).agent_id
        is None
    )
    for disposition in ("RESOLVED", "ESCALATED", "TRANSFERRED"):
        assert "agent_id: required" in reasons(fields | {"disposition": disposition})


def test_an_abandoned_contact_keeps_an_agent_id_it_has():
    contact = parse_contact(
        GOOD | {"disposition": "ABANDONED"}, text_values=False, ingested_at=INGESTED_AT
    )
    assert contact.agent_id == "agent-7"


@pytest.mark.parametrize("disposition", ["resolved", "DONE", " RESOLVED", 1])
def test_disposition_is_one_of_the_enum(disposition):
    assert any(r.startswith("disposition:") for r in reasons(GOOD | {"disposition": disposition}))


@pytest.mark.parametrize(
    "moment", ["2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123456+05:30", "2026-11-29T10:00-03:00"]
)
def test_timestamps_with_offset_or_z_are_accepted(moment):
    fields = GOOD | {"started_at": moment, "ended_at": "2026-11-30T00:00:00Z"}
    assert isinstance(parse_contact(fields, text_values=False, ingested_at=INGESTED_AT), Contact)


@pytest.mark.parametrize(
    ("moment", "reason"),
    [
        ("2026-11-29T10:00:00", "has no UTC offset or Z"),
        ("2026-11-29", "has no UTC offset or Z"),
        ("29.11.2026 10:00", "not an ISO-8601 timestamp"),
        ("2026-13-01T00:00:00Z", "not an ISO-8601 timestamp"),
        (1764410400, "must be a string"),
    ],
)
def test_naive_or_malformed_timestamps_are_rejected(moment, reason):
    assert f"started_at: {reason}" in reasons(GOOD | {"started_at": moment})


def test_ended_at_may_not_precede_started_at_across_offsets():
    # 10:00+01:00 is 09:00Z: an end at 09:30Z is after it, one at 08:59Z before it.
    ok = GOOD | {"started_at": "2026-11-29T10:00:00+01:00", "ended_at": "2026-11-29T09:30:00Z"}
    assert isinstance(parse_contact(ok, text_values=False, ingested_at=INGESTED_AT), Contact)
    same = ok | {"ended_at": "2026-11-29T09:00:00Z"}
    assert isinstance(parse_contact(same, text_values=False, ingested_at=INGESTED_AT), Contact)
    early = ok | {"ended_at": "2026-11-29T08:59:00Z"}
    assert "ended_at: before started_at" in reasons(early)


@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("12", 12), ("0600", 600)])
def test_csv_wait_seconds_are_digit_strings(value, expected):
    assert (
        parse_contact(
            GOOD_CSV | {"wait_seconds": value}, text_values=True, ingested_at=INGESTED_AT
        ).wait_seconds
        == expected
    )


@pytest.mark.parametrize(
    "value", ["1.5", "-1", "+3", " 12", "12 ", "1e3", "twelve", "١٢", "9" * 39]
)
def test_csv_wait_seconds_reject_anything_else(value):
    assert any(
        r.startswith("wait_seconds:") for r in reasons(GOOD_CSV | {"wait_seconds": value}, True)
    )


def test_csv_empty_wait_seconds_is_missing():
    assert "wait_seconds: required" in reasons(GOOD_CSV | {"wait_seconds": ""}, True)


@pytest.mark.parametrize("value", [0, 42, 10**38 - 1])
def test_json_wait_seconds_are_integers(value):
    assert (
        parse_contact(
            GOOD | {"wait_seconds": value}, text_values=False, ingested_at=INGESTED_AT
        ).wait_seconds
        == value
    )


@pytest.mark.parametrize("value", [True, False, 1.5, 12.0, -1, "12", 10**38])
def test_json_wait_seconds_reject_bools_floats_strings_negatives(value):
    assert any(r.startswith("wait_seconds:") for r in reasons(GOOD | {"wait_seconds": value}))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("TRUE", True), ("False", False), ("", False), (None, False)],
)
def test_csv_survey_opt_in(value, expected):
    fields = GOOD_CSV | {"survey_opt_in": value}
    assert (
        parse_contact(fields, text_values=True, ingested_at=INGESTED_AT).survey_opt_in is expected
    )


@pytest.mark.parametrize("value", ["yes", "1", "t"])
def test_csv_survey_opt_in_rejects_other_words(value):
    assert "survey_opt_in: not a boolean (true or false)" in reasons(
        GOOD_CSV | {"survey_opt_in": value}, True
    )


@pytest.mark.parametrize("value", ["true", 1, 0])
def test_json_survey_opt_in_is_a_boolean_only(value):
    assert "survey_opt_in: not a boolean (true or false)" in reasons(
        GOOD | {"survey_opt_in": value}
    )


def test_default_survey_opt_in_is_false():
    fields = {k: v for k, v in GOOD.items() if k != "survey_opt_in"}
    assert parse_contact(fields, text_values=False, ingested_at=INGESTED_AT).survey_opt_in is False


@pytest.mark.parametrize(
    ("field", "longest"),
    [("agent_id", "a" * 64), ("queue", "q" * 128), ("email", "p" * 64 + "@" + "d." * 93 + "com")],
)
def test_agent_id_queue_and_email_are_strings_of_bounded_length(field, longest):
    assert f"{field}: must be a string" in reasons(GOOD | {field: 7})
    assert isinstance(parse_contact(GOOD | {field: longest}, **JSON_ROW), Contact)
    [reason] = reasons(GOOD | {field: longest + "x"})
    assert reason.startswith(f"{field}: ") and longest not in reason


def test_every_broken_rule_is_reported_at_once():
    fields = {
        "contact_id": "bad id",
        "caller": "123",
        "disposition": "NOPE",
        "started_at": "2026-11-29T10:00:00",
        "ended_at": "x",
        "wait_seconds": -1,
    }
    # contact_id, caller, disposition, agent_id, 3 times (updated_at missing), wait
    assert len(reasons(fields)) == 8


def test_to_item_builds_the_contact_item_of_the_contract():
    item = parse_contact(GOOD, text_values=False, ingested_at=INGESTED_AT).to_item(
        goodwill_wait_seconds=600
    )
    assert item == {
        "pk": "CALLER#+4915112345678",
        "sk": "CONTACT#2026-11-29T09:05:30.250Z#c-1_A",
        "type": "CONTACT",
        "contact_id": "c-1_A",
        "interaction_id": "c-1_A",  # a flat row is an interaction of its own
        "channel": "VOICE",
        "caller": "+4915112345678",
        "agent_id": "agent-7",
        "queue": "billing",
        "started_at": "2026-11-29T09:00:00.000Z",
        "ended_at": "2026-11-29T09:05:30.250Z",
        "updated_at": "2026-11-29T09:06:00.000Z",
        "disposition": "RESOLVED",
        "wait_seconds": 42,
        "email": "pat@example.com",
        "survey_opt_in": True,
        "long_wait": False,
        "expires_at": 1830503130,  # ended_at + 400 days (CONTACT_RETENTION): the table's TTL
    }


def test_to_item_leaves_absent_fields_out_and_flags_long_waits():
    fields = {k: v for k, v in GOOD.items() if k not in ("agent_id", "queue", "email")}
    item = parse_contact(
        fields | {"disposition": "ABANDONED", "wait_seconds": 600},
        text_values=False,
        ingested_at=INGESTED_AT,
    ).to_item(goodwill_wait_seconds=600)
    assert not {"agent_id", "queue", "email"} & item.keys()
    assert item["long_wait"] is True
    assert (
        parse_contact(
            GOOD | {"wait_seconds": 599}, text_values=False, ingested_at=INGESTED_AT
        ).to_item(600)["long_wait"]
        is False
    )


def test_ended_at_in_the_sort_key_is_utc():
    contact = parse_contact(
        GOOD | {"ended_at": "2026-11-30T01:00:00+02:00"}, text_values=False, ingested_at=INGESTED_AT
    )
    assert contact.ended_at.astimezone(UTC).hour == 23
    assert contact.to_item(600)["sk"] == "CONTACT#2026-11-29T23:00:00.000Z#c-1_A"


@pytest.mark.parametrize(
    ("moment", "reason"),
    [
        ("0001-01-01T00:30:00+01:00", "before 2000-01-01"),  # converting it to UTC overflows
        ("0999-06-01T00:00:00Z", "before 2000-01-01"),  # would format as 999-... and sort last
        ("1999-12-31T23:59:59.999Z", "before 2000-01-01"),
        ("9999-12-31T23:30:00-01:00", "more than a day after the ingest"),
        ("2026-11-30T12:00:01Z", "more than a day after the ingest"),
    ],
)
def test_timestamps_out_of_range_are_rejected_never_raised(moment, reason):
    fields = GOOD | {"started_at": "2026-11-29T09:00:00Z", "ended_at": moment}
    assert f"ended_at: {reason}" in reasons(fields)


def test_timestamps_at_the_bounds_are_valid_and_sort_keys_stay_fixed_width():
    remembered = (INGESTED_AT - model.REMEMBERED).isoformat()
    for moment in (remembered, "2026-11-30T12:00:00Z", "2026-11-30T13:00:00+01:00"):
        fields = GOOD | {"started_at": "2000-01-01T00:00:00Z", "ended_at": moment}
        item = parse_contact(fields, text_values=False, ingested_at=INGESTED_AT).to_item(600)
        assert len(item["sk"]) == len("CONTACT#2026-11-29T09:05:30.250Z#") + len("c-1_A")


def test_a_contact_that_ended_before_what_the_table_remembers_is_refused():
    # Its items may have expired (400 days after it ended): stored again, it would be a new
    # contact and earn a second survey and gift card.
    ended = INGESTED_AT - model.REMEMBERED - timedelta(seconds=1)
    fields = GOOD | {"started_at": "2000-01-01T00:00:00Z", "ended_at": ended.isoformat()}
    assert reasons(fields) == [
        "ended_at: more than 399 days before the ingest, past what the table remembers of a contact"
    ]


def test_a_csv_integer_of_thousands_of_digits_is_rejected_never_raised():
    # 4,301 characters: Python refuses int() of more than 4,300 digits, leading zeros included.
    assert (
        parse_contact(
            GOOD_CSV | {"wait_seconds": "0" * 4300 + "7"}, text_values=True, ingested_at=INGESTED_AT
        ).wait_seconds
        == 7
    )
    assert "wait_seconds: more than 38 digits" in reasons(
        GOOD_CSV | {"wait_seconds": "9" * 4301}, text_values=True
    )


def test_a_json_integer_past_38_digits_is_rejected():
    assert "wait_seconds: more than 38 digits" in reasons(GOOD | {"wait_seconds": 10**38})
    assert (
        parse_contact(
            GOOD | {"wait_seconds": 10**38 - 1}, text_values=False, ingested_at=INGESTED_AT
        ).wait_seconds
        == 10**38 - 1
    )


@pytest.mark.parametrize("field", ["queue", "email", "agent_id", "started_at"])
def test_text_with_lone_surrogates_is_rejected(field):
    # JSON can escape one ("\\ud800"); bytes that are not UTF-8 decode to one.
    for text in ("\ud800", "M\udcfcller"):
        assert f"{field}: not valid UTF-8 text" in reasons(GOOD | {field: text})


# --- ids are canonical: one contact, one id, whatever the export's spelling ----------------------


def spellings(value: str):
    """``value`` with any of its letters upper-cased."""
    return st.lists(st.booleans(), min_size=len(value), max_size=len(value)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(value, upper, strict=True))
    )


@given(data=st.data(), contact_uuid=st.uuids())
def test_any_spelling_of_a_uuid_is_the_same_contact_and_agent(data, contact_uuid):
    canonical = str(contact_uuid)
    spelling = data.draw(spellings(canonical))
    agent = data.draw(spellings(canonical))
    contact = parse_contact(GOOD | {"contact_id": spelling, "agent_id": agent}, **JSON_ROW)
    assert (contact.contact_id, contact.agent_id) == (canonical, canonical)
    assert contact.to_item(600)["sk"].endswith(f"#{canonical}")


@given(contact_id=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True))
def test_an_id_that_is_not_a_uuid_is_kept_as_it_is(contact_id):
    assume(not model.UUID.fullmatch(contact_id))
    assert parse_contact(GOOD | {"contact_id": contact_id}, **JSON_ROW).contact_id == contact_id


@pytest.mark.parametrize("almost", ["5CA32FBD8F9246AF92A56B0F970F0EFE", "C-1", "ABC-DEF"])
def test_only_the_hyphenated_uuid_form_is_lower_cased(almost):
    assert parse_contact(GOOD | {"contact_id": almost}, **JSON_ROW).contact_id == almost


# --- agent_id, queue and email: strict patterns, no control characters ---------------------------

CONTROL = st.characters(categories=["Cc", "Cf", "Zl", "Zp"])
STRICT_FIELDS = ("agent_id", "queue", "email")
VALID = {
    "agent_id": st.from_regex(r"[A-Za-z0-9._@-]{1,64}", fullmatch=True),
    "queue": st.text(
        st.characters(categories=["L", "M", "N", "P", "S", "Zs"]), min_size=1, max_size=128
    ).filter(lambda q: q == q.strip()),
    "email": st.emails().filter(formats.is_email),
}


@pytest.mark.parametrize("field", STRICT_FIELDS)
@given(data=st.data())
def test_a_control_or_format_character_anywhere_rejects_the_row(field, data):
    valid = data.draw(VALID[field])
    at = data.draw(st.integers(0, len(valid)))
    value = valid[:at] + data.draw(CONTROL) + valid[at:]
    [reason] = reasons(GOOD | {field: value})
    assert reason.startswith(f"{field}: ") and value not in reason


@pytest.mark.parametrize("field", STRICT_FIELDS)
@given(data=st.data())
def test_every_value_the_pattern_describes_is_accepted_as_it_is(field, data):
    value = data.draw(VALID[field])
    contact = parse_contact(GOOD | {field: value}, **JSON_ROW)
    assert isinstance(contact, Contact)
    assert getattr(contact, field) == (model.canonical_id(value) if field == "agent_id" else value)


@pytest.mark.parametrize("field", STRICT_FIELDS)
@given(value=st.text(max_size=80))
def test_what_is_accepted_holds_no_invisible_character(field, value):
    contact = parse_contact(GOOD | {field: value}, **JSON_ROW)
    if isinstance(contact, Contact) and getattr(contact, field) is not None:
        assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent_id", "agent-7\x1b[2J"),
        ("agent_id", "agent 7"),
        ("agent_id", "agent/7"),
        ("queue", "billing\r\nBcc: x@example.com"),
        ("queue", " billing"),
        ("queue", "bill\u202eing"),
        ("queue", "bill\u200bing"),
        ("email", "pat@example.com\r\nBcc: x@example.com"),
        ("email", "pat@example"),
        ("email", "pat example@example.com"),
        ("email", '"pat"@example.com'),
        ("email", "pät@example.com"),
    ],
)
def test_hostile_or_malformed_values_are_rejected(field, value):
    [reason] = reasons(GOOD | {field: value})
    assert reason == f"{field}: {model.FIELD_RULES[field].says}"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent_id", "jane.doe@example.com"),
        ("agent_id", "5ca32fbd-8f92-46af-92a5-6b0f970f0efe"),
        ("queue", "Kundenservice"),
        ("queue", "Soporte técnico (nivel 2)"),
        ("queue", "サポート"),
        ("email", "pat.o'neil+surveys@mail.example.co.uk"),
    ],
)
def test_real_values_are_accepted(field, value):
    assert isinstance(parse_contact(GOOD | {field: value}, **JSON_ROW), Contact)


# --- through the ingest and the Goodwill consumer, in moto --------------------------------------

ABANDONED_ROW = {
    "caller": "+4915112345678",
    "started_at": "2026-11-29T10:00:00Z",
    "ended_at": "2026-11-29T10:05:00Z",
    "updated_at": "2026-11-29T10:06:00Z",
    "disposition": "ABANDONED",
    "wait_seconds": 900,
}


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.data(),
    contact_uuid=st.uuids().filter(lambda u: any(c in "abcdef" for c in str(u))),
)
def test_a_uuid_re_exported_in_other_spellings_is_one_contact_with_one_gift_card(
    stack, monkeypatch, capsys, lambda_context, data, contact_uuid
):
    canonical = str(contact_uuid)
    exports = data.draw(st.lists(spellings(canonical), min_size=2, max_size=3, unique=True))
    ingest = Ingest(stack, monkeypatch, capsys)
    for n, spelling in enumerate(exports):
        row = ABANDONED_ROW | {"contact_id": spelling}
        assert ingest.run(ingest.put(f"incoming/{canonical}-{n}.jsonl", json.dumps(row))) == []

    goodwill = cold_start("goodwill", monkeypatch)
    goodwill.lambda_handler({"Records": stack.stream_records()}, lambda_context)

    def of_this_contact(item_type: str) -> list[str]:
        ids = [item["contact_id"] for item in ingest.items(item_type)]
        return [i for i in ids if i.lower() == canonical]

    assert of_this_contact("CONTACT") == [canonical]
    assert of_this_contact("GIFT_CARD") == [canonical]
    notifications = [json.loads(m["Body"]) for m in stack.drain(stack.notification_queue_url)]
    assert [n["contact_id"] for n in notifications if n["contact_id"].lower() == canonical] == [
        canonical
    ]
