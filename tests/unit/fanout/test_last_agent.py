"""LastAgentFunction: the caller's last agent only ever moves forward, whatever the delivery."""

import itertools

import pytest
from shared import keys, rules

from tests.unit.fanout.builders import contact, failed_ids, stream_event, stream_record
from tests.unit.fanout.helpers import cold_start

CALLER = "+14155550101"
EARLY = contact("c-early", CALLER, "2026-11-29T09:00:00Z", agent_id="agent-early")
MIDDLE = contact("c-middle", CALLER, "2026-11-29T10:00:00Z", agent_id="agent-middle")
# Same instant as MIDDLE, written with another offset: ties go to the higher contact_id.
TIE = contact("c-tie", CALLER, "2026-11-29T12:00:00+02:00", agent_id="agent-tie")
LATE = contact("c-late", CALLER, "2026-11-29T11:00:00Z", agent_id="agent-late")


@pytest.fixture
def last_agent(stack, monkeypatch):
    return cold_start("last_agent", monkeypatch)


def stored_last_agent(stack, caller=CALLER):
    item = stack.dynamodb.get_item(
        TableName=stack.contacts_table,
        Key={name: {"S": value} for name, value in keys.last_agent_key(caller).items()},
    ).get("Item")
    return item and {name: value["S"] for name, value in item.items()}


def run(handler, lambda_context, *contacts):
    response = handler.lambda_handler(
        stream_event(*(stream_record(c) for c in contacts)), lambda_context
    )
    assert failed_ids(response) == []


def test_in_order_contacts_leave_the_latest_agent(stack, last_agent, lambda_context):
    run(last_agent, lambda_context, EARLY, MIDDLE, LATE)

    assert stored_last_agent(stack) == {
        "pk": f"CALLER#{CALLER}",
        "sk": "LAST_AGENT",
        "type": "LAST_AGENT",
        "agent_id": "agent-late",
        "contact_id": "c-late",
        "ended_at": "2026-11-29T11:00:00.000Z",
    }


def test_an_older_contact_arriving_later_is_stale_and_succeeds(stack, last_agent, lambda_context):
    run(last_agent, lambda_context, LATE)
    run(last_agent, lambda_context, EARLY)  # separate invocation: stale is success, not a failure

    assert stored_last_agent(stack)["agent_id"] == "agent-late"


def test_a_tie_on_ended_at_goes_to_the_higher_contact_id(stack, last_agent, lambda_context):
    assert TIE["ended_at"] == MIDDLE["ended_at"]
    run(last_agent, lambda_context, TIE, MIDDLE)
    assert stored_last_agent(stack)["contact_id"] == "c-tie"


def test_duplicates_change_nothing(stack, last_agent, lambda_context):
    run(last_agent, lambda_context, LATE, LATE, EARLY, LATE)
    assert stored_last_agent(stack)["contact_id"] == "c-late"


@pytest.mark.parametrize("order", list(itertools.permutations([EARLY, MIDDLE, TIE, LATE])))
def test_every_delivery_order_converges_on_the_rules_newest(
    stack, last_agent, lambda_context, order
):
    run(last_agent, lambda_context, *order)

    newest = max(order, key=lambda c: (c["ended_at"], c["contact_id"]))
    assert all(
        not rules.is_newer(
            (c["ended_at"], c["contact_id"]), (newest["ended_at"], newest["contact_id"])
        )
        for c in order
    )
    assert stored_last_agent(stack)["contact_id"] == newest["contact_id"]


def test_stale_and_updated_outcomes_are_counted(stack, last_agent, lambda_context, capsys):
    run(last_agent, lambda_context, LATE, EARLY)

    out = capsys.readouterr().out
    assert '"LastAgentUpdated":[1.0]' in out.replace(" ", "")
    assert '"LastAgentStale":[1.0]' in out.replace(" ", "")


@pytest.mark.parametrize(
    "record",
    [
        stream_record(contact("c-abandoned", disposition=rules.ABANDONED, agent_id=None)),
        stream_record(contact("c-abandoned-agent", disposition=rules.ABANDONED)),
        stream_record(contact("c-no-agent", agent_id=None)),
        stream_record(contact("c-modified"), event_name="MODIFY", old_image=contact("c-modified")),
        stream_record(contact("c-removed"), event_name="REMOVE", old_image=contact("c-removed")),
        stream_record(
            {
                **keys.last_agent_key(CALLER),
                "type": "LAST_AGENT",
                "agent_id": "a",
                "contact_id": "c",
            }
        ),
    ],
    ids=["abandoned", "abandoned-with-agent", "no-agent", "modify", "remove", "last-agent-item"],
)
def test_records_that_set_no_last_agent_are_skipped(stack, last_agent, lambda_context, record):
    assert failed_ids(last_agent.lambda_handler(stream_event(record), lambda_context)) == []
    assert stored_last_agent(stack) is None
