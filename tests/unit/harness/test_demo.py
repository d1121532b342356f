"""The demo's data (the chaos run's operator: test_chaos.py)."""

from datetime import UTC, datetime, timedelta

from harness import demo_data


def test_the_demo_data_is_the_seeds_at_any_hour_of_the_day_and_checked_by_the_layer():
    day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    early, late = (
        demo_data.generate(200, 20, 5, 600, now=day + timedelta(hours=h)) for h in (0, 23)
    )
    assert [r["ContactId"] for r in early.records] == [r["ContactId"] for r in late.records]
    assert (early.surveys, early.gift_cards, early.bad_rows) == (
        late.surveys,
        late.gift_cards,
        late.bad_rows,
    )
    assert set(early.redelivery_kinds) == set(demo_data.REDELIVERY_KINDS)
    assert len(early.files) == len(demo_data.FLAT_FILES)
    assert early.bad_rows == sum(f.bad_rows for f in early.files)
    # every contact once, re-deliveries included; every record parsed and kept
    ids = {r["ContactId"] for r in early.records}
    assert ids <= set(early.stored)
    assert len(early.stored) == len(ids) + sum(f.rows - f.bad_rows for f in early.files)
    assert early.good_rows == len(early.records) + len(early.redeliveries) + len(
        early.stored
    ) - len(ids)
