"""Single-table keys and deterministic ids."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from shared import keys


def test_utc_timestamp_is_fixed_width_utc_with_milliseconds():
    assert keys.utc_timestamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.000Z"
    )
    assert keys.utc_timestamp(datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.999Z"
    )
    moments = [
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 123_000, tzinfo=timezone(timedelta(hours=-11))),
    ]
    assert {len(keys.utc_timestamp(m)) for m in moments} == {24}


def test_utc_timestamp_normalises_offsets():
    paris = datetime.fromisoformat("2026-11-29T11:00:00+01:00")
    assert keys.utc_timestamp(paris) == "2026-11-29T10:00:00.000Z"


def test_string_order_is_time_order_across_offsets():
    """10:30 in Tokyo is earlier than 09:00 in London on the same day."""
    moments = [
        datetime.fromisoformat("2026-11-29T10:30:00+09:00"),  # 01:30Z
        datetime.fromisoformat("2026-11-29T09:00:00+00:00"),  # 09:00Z
        datetime.fromisoformat("2026-11-28T23:00:00-11:00"),  # 10:00Z
        datetime.fromisoformat("2026-11-29T10:00:00.001+00:00"),
    ]
    stamps = [keys.utc_timestamp(m) for m in moments]
    assert sorted(stamps) == [keys.utc_timestamp(m) for m in sorted(moments)]
    assert stamps == sorted(stamps)


def test_item_keys():
    assert keys.caller_pk("+14155550101") == "CALLER#+14155550101"
    assert keys.contact_sk("2026-11-29T10:00:00.000Z", "c-1") == (
        "CONTACT#2026-11-29T10:00:00.000Z#c-1"
    )
    assert keys.last_agent_key("+14155550101") == {
        "pk": "LAST_AGENT#+14155550101",
        "sk": "LAST_AGENT",
    }
    assert keys.gift_card_key("c-1") == {"pk": "GIFT_CARD#c-1", "sk": "GIFT_CARD"}
    assert keys.processing_log_key("b/k#v") == {"pk": "FILE#b/k#v", "sk": "PROCESSING_LOG"}


def test_contact_sort_keys_of_one_caller_sort_by_time():
    early = keys.contact_sk(
        keys.utc_timestamp(datetime.fromisoformat("2026-11-29T12:00+02:00")), "z"
    )
    late = keys.contact_sk(keys.utc_timestamp(datetime.fromisoformat("2026-11-29T10:00:01Z")), "a")
    assert early < late


def test_notification_id_is_deterministic_per_kind_and_contact():
    assert keys.notification_id(keys.SURVEY, "c-1") == "SURVEY#c-1"
    assert keys.notification_id(keys.GIFT_CARD, "c-1") == "GIFT_CARD#c-1"
    assert keys.notification_id(keys.SURVEY, "c-1") != keys.notification_id(keys.GIFT_CARD, "c-1")
    with pytest.raises(ValueError, match="unknown notification kind"):
        keys.notification_id("COUPON", "c-1")
