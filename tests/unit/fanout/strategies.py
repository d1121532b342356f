"""Hypothesis strategies of DynamoDB stream records as the fan-out sees them: any event name, either
image present or absent, CONTACT items and others, and every field the filters test present,
absent or of another DynamoDB type, so that the typed corners of the filter language are hit."""

import json
import string

from hypothesis import strategies as st

from harness.events import record_of

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")
DISPOSITIONS = ("RESOLVED", "ABANDONED", "ESCALATED", "TRANSFERRED")

_text = st.text(string.ascii_letters + string.digits + "#-_ .@+", max_size=12)
_word = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
# Personal data, shaped as the input contract has it (built, not regex-drawn: ~50x faster).
callers = st.integers(10**6, 10**15 - 1).map(lambda n: f"+{n}")
emails = st.builds(lambda user, domain: f"{user}@{domain}.example", _word, _word)
agent_ids = _word.map(lambda v: f"agent-{v}")


def _typed(kind: str, value) -> dict:
    return {kind: value}


def other_types(leaf_text=_text) -> st.SearchStrategy[dict]:
    """A DynamoDB value of any type (S included), typed as the stream sends it."""
    scalar = st.one_of(
        leaf_text.map(lambda v: _typed("S", v)),
        st.integers(-1000, 100_000).map(lambda v: _typed("N", str(v))),
        st.booleans().map(lambda v: _typed("BOOL", v)),
        st.just({"NULL": True}),
        st.binary(max_size=6).map(lambda v: _typed("B", v.hex())),
        st.lists(leaf_text, min_size=1, max_size=3, unique=True).map(lambda v: _typed("SS", v)),
        st.lists(st.integers(0, 9).map(str), min_size=1, max_size=3, unique=True).map(
            lambda v: _typed("NS", v)
        ),
    )
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda v: _typed("L", v)),
            st.dictionaries(st.sampled_from(["S", "BOOL", "type", "x"]), inner, max_size=2).map(
                lambda v: _typed("M", v)
            ),
        ),
        max_leaves=4,
    )


@st.composite
def _fact(draw, admitted: st.SearchStrategy[dict], refused=None) -> dict | None:
    """A field's value: mostly (5 in 6) one a filter leaf admits, so records sit near every
    filter's boundary, not only far outside; else a refused value of its type, absent (None), or
    a value of any DynamoDB type."""
    if draw(st.integers(0, 5)):
        return draw(admitted)
    others = [st.none(), _OTHER_TYPES] + ([refused] if refused is not None else [])
    return draw(st.one_of(others))


_OTHER_TYPES = other_types()
_ITEM_TYPES = st.sampled_from(["LAST_AGENT", "GIFT_CARD", "CONTACT_REF", "contact", ""])
_BOOL_FACT = _fact(st.just({"BOOL": True}), st.just({"BOOL": False}))
_FIELDS = {
    "type": _fact(st.just({"S": "CONTACT"}), _ITEM_TYPES.map(lambda v: {"S": v})),
    "disposition": _fact(
        st.sampled_from(DISPOSITIONS).map(lambda v: {"S": v}), _text.map(lambda v: {"S": v})
    ),
    "wait_seconds": _fact(st.integers(0, 5000).map(lambda v: {"N": str(v)})),
    "survey_opt_in": _BOOL_FACT,
    "first_export": _BOOL_FACT,
    "long_wait": _BOOL_FACT,
}


@st.composite
def images(draw, caller=callers, email=emails, agent_id=agent_ids) -> dict:
    """An item image: a CONTACT most of the time, else another item type (or none, or a type
    attribute that is not an S); each field the filters test present, absent or of another
    type, with values on either side of the filters."""
    the_caller = draw(caller)
    contact_id = f"c-{draw(st.integers(1, 999_999))}"
    fields = {
        "pk": {"S": f"CALLER#{the_caller}"},
        "sk": {"S": f"CONTACT#2026-11-29T10:05:00.000Z#{contact_id}"},
        "contact_id": {"S": contact_id},
        "caller": {"S": the_caller},
        "agent_id": draw(_fact(agent_id.map(lambda v: {"S": v}))),
        "email": draw(_fact(email.map(lambda v: {"S": v}))),
        **{name: draw(strategy) for name, strategy in _FIELDS.items()},
    }
    return {name: value for name, value in fields.items() if value is not None}


@st.composite
def stream_records(draw, image=None) -> dict:
    """A stream record: any event name, with NewImage and OldImage each present or absent (as
    the event name has them usually, but not always: the filters must not rely on it)."""
    image = image or images()
    event_name = draw(st.sampled_from(("INSERT", *EVENT_NAMES)))  # most filters want INSERT
    new = draw(image) if draw(st.booleans()) or event_name != "REMOVE" else None
    old = draw(image) if draw(st.booleans()) and event_name != "INSERT" else None
    if draw(st.integers(0, 9)) == 0:  # now and then, an image where the event name has none
        new, old = draw(st.one_of(st.none(), image)), draw(st.one_of(st.none(), image))
    keys_of = new or old or {"pk": {"S": "CALLER#+14155550100"}, "sk": {"S": "LAST_AGENT"}}
    sequence = str(draw(st.integers(10**20, 10**21)))
    dynamodb = {
        "ApproximateCreationDateTime": 1764410700,
        "Keys": {"pk": keys_of.get("pk", {"S": "x"}), "sk": keys_of.get("sk", {"S": "x"})},
        "SequenceNumber": sequence,
        "SizeBytes": len(json.dumps([new, old])),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        dynamodb["NewImage"] = new
    if old is not None:
        dynamodb["OldImage"] = old
    return record_of(event_name, dynamodb)
