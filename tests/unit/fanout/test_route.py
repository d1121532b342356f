"""RouteFunction: the caller's last agent for a live Connect contact, as a flat map of strings."""

import json
from pathlib import Path

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import formats
from shared.aws import table

from harness import ROOT
from harness.events import contact
from harness.in_process import cold_start

EVENTS = ROOT / "events"


@pytest.fixture
def route(stack, monkeypatch):
    return cold_start("route", monkeypatch)


def connect_event(address) -> dict:
    event = json.loads((EVENTS / "connect-contact-flow.json").read_text())
    endpoint = event["Details"]["ContactData"]["CustomerEndpoint"]
    if address is None:
        del endpoint["Address"]
    else:
        endpoint["Address"] = address
    return event


def seed_last_agent(stack, caller="+14155550101"):
    """The caller's contact stored as the ingest leaves it, then LastAgentFunction's write."""
    seen = contact("c-42", caller, "2026-11-29T10:05:00Z", agent_id="agent-7")
    stack.dynamodb.put_item(
        TableName=stack.contacts_table,
        Item={name: TypeSerializer().serialize(value) for name, value in seen.items()},
    )
    assert table.update_last_agent(stack.dynamodb, stack.contacts_table, seen) == "updated"


def test_a_known_caller_is_routed_to_the_last_agent(stack, route, lambda_context):
    seed_last_agent(stack)

    assert route.lambda_handler(connect_event("+14155550101"), lambda_context) == {
        "found": "true",
        "agent_id": "agent-7",
        "contact_id": "c-42",
        "ended_at": "2026-11-29T10:05:00.000Z",
    }


def test_an_unknown_caller_is_not_found(stack, route, lambda_context):
    seed_last_agent(stack)
    event = json.loads((EVENTS / "connect-contact-flow-unknown-caller.json").read_text())

    assert route.lambda_handler(event, lambda_context) == {"found": "false"}


@pytest.mark.parametrize(
    "address", [None, "", "anonymous", "14155550101", "+0123456789", 14155550101, "+1415555010a"]
)
def test_a_missing_or_invalid_caller_is_not_found_and_not_logged(
    stack, monkeypatch, lambda_context, address, capsys
):
    seed_last_agent(stack)
    route = cold_start("route", monkeypatch)

    assert route.lambda_handler(connect_event(address), lambda_context) == {"found": "false"}
    out = capsys.readouterr().out
    assert "not E.164" in out
    if address:
        assert str(address) not in out


@pytest.mark.parametrize("path", sorted(EVENTS.glob("connect-*.json")), ids=lambda p: p.name)
def test_every_result_is_a_flat_map_of_strings(stack, route, lambda_context, path: Path):
    seed_last_agent(stack)
    result = route.lambda_handler(json.loads(path.read_text()), lambda_context)
    assert all(isinstance(v, str) for v in result.values())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3)
    ),
    max_leaves=8,
)


def hostile_events():
    """Any JSON as the event, or the contact flow's event with any JSON at one of the levels on
    the way to the caller's number."""

    def at(path: tuple[str, ...]):
        def put(value):
            event = connect_event("+14155550101")
            parent = event
            for name in path[:-1]:
                parent = parent[name]
            parent[path[-1]] = value
            return event

        return JSON.filter(lambda v: not isinstance(v, str) or path[-1] != "Address").map(put)

    levels = [
        ("Details",),
        ("Details", "ContactData"),
        ("Details", "ContactData", "CustomerEndpoint"),
        ("Details", "ContactData", "CustomerEndpoint", "Address"),
    ]
    return JSON | st.one_of([at(path) for path in levels])


@pytest.mark.parametrize(
    "event", [[], ["Details"], "x", 7, None, {"Details": "x"}, {"Details": {"ContactData": []}}]
)
def test_a_malformed_connect_event_is_not_found(stack, route, lambda_context, event):
    seed_last_agent(stack)
    assert route.lambda_handler(event, lambda_context) == {"found": "false"}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(event=hostile_events())
def test_any_hostile_event_shape_is_answered_not_found(stack, route, lambda_context, event):
    seed_last_agent(stack)
    assert route.lambda_handler(event, lambda_context) == {"found": "false"}


# Anything but an id (formats.CONTACT_ID): st.text() draws "0" or "ab" now and then, which are
# ids and are logged as such.
HOSTILE_CONTACT_IDS = (JSON | st.text(min_size=65)).filter(
    lambda value: not (isinstance(value, str) and formats.CONTACT_ID.fullmatch(value))
)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(contact_id=HOSTILE_CONTACT_IDS)
def test_a_hostile_contact_id_neither_stops_the_route_nor_reaches_the_log(
    stack, monkeypatch, lambda_context, capsys, contact_id
):
    seed_last_agent(stack)
    route = cold_start("route", monkeypatch)
    event = connect_event("+14155550101")
    event["Details"]["ContactData"]["ContactId"] = contact_id
    capsys.readouterr()

    assert route.lambda_handler(event, lambda_context)["agent_id"] == "agent-7"
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert logged and all(line.get("connect_contact_id") is None for line in logged)
