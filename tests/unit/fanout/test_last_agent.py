"""LastAgentFunction: the caller's last agent is the newest of the caller's contacts that reached
an agent: it moves forward whatever the delivery order, and a corrected export that replaces or
removes the contact it names makes it the newest remaining one."""

import itertools

import pytest
from boto3.dynamodb.types import TypeSerializer
from shared import keys, rules

from tests.unit.fanout.builders import contact, failed_ids, stream_event, stream_record
from tests.unit.fanout.helpers import cold_start

serializer = TypeSerializer()
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
    ids=["abandoned", "abandoned-with-agent", "no-agent", "remove-of-another", "last-agent-item"],
)
def test_records_that_set_no_last_agent_are_skipped(stack, last_agent, lambda_context, record):
    assert failed_ids(last_agent.lambda_handler(stream_event(record), lambda_context)) == []
    assert stored_last_agent(stack) is None


# ---- corrections: a newer export of a contact replaced or removed the item LAST_AGENT names ----


def store(stack, *items: dict) -> None:
    """CONTACT items as the ingest leaves them in the table."""
    for item in items:
        stack.dynamodb.put_item(
            TableName=stack.contacts_table,
            Item={name: serializer.serialize(value) for name, value in item.items()},
        )


def remove(stack, item: dict) -> None:
    stack.dynamodb.delete_item(
        TableName=stack.contacts_table, Key={"pk": {"S": item["pk"]}, "sk": {"S": item["sk"]}}
    )


def test_a_correction_that_moves_the_last_contact_earlier_falls_back_to_the_newest_one(
    stack, last_agent, lambda_context
):
    store(stack, EARLY, MIDDLE, LATE)
    run(last_agent, lambda_context, EARLY, MIDDLE, LATE)
    moved = contact("c-late", CALLER, "2026-11-29T08:00:00Z", agent_id="agent-late")
    remove(stack, LATE)
    store(stack, moved)  # the ingest's transaction: the old item out, the corrected one in

    removal = stream_record(LATE, event_name="REMOVE", old_image=LATE)
    for records in ([removal, stream_record(moved)], [stream_record(moved), removal]):
        handler_response = last_agent.lambda_handler(stream_event(*records), lambda_context)
        assert failed_ids(handler_response) == []
        assert stored_last_agent(stack)["contact_id"] == "c-middle"


def test_a_correction_of_the_last_contacts_agent_updates_it(stack, last_agent, lambda_context):
    store(stack, LATE)
    run(last_agent, lambda_context, LATE)
    fixed = LATE | {"agent_id": "agent-fixed"}
    store(stack, fixed)
    record = stream_record(fixed, event_name="MODIFY", old_image=LATE)
    assert failed_ids(last_agent.lambda_handler(stream_event(record), lambda_context)) == []
    assert stored_last_agent(stack)["agent_id"] == "agent-fixed"


def test_a_correction_to_abandoned_falls_back_and_a_last_removal_removes_it(
    stack, last_agent, lambda_context, capsys
):
    store(stack, EARLY, LATE)
    run(last_agent, lambda_context, EARLY, LATE)
    abandoned = LATE | {"disposition": rules.ABANDONED}
    store(stack, abandoned)
    modify = stream_record(abandoned, event_name="MODIFY", old_image=LATE)
    assert failed_ids(last_agent.lambda_handler(stream_event(modify), lambda_context)) == []
    assert stored_last_agent(stack)["contact_id"] == "c-early"

    remove(stack, EARLY)
    removal = stream_record(EARLY, event_name="REMOVE", old_image=EARLY)
    assert failed_ids(last_agent.lambda_handler(stream_event(removal), lambda_context)) == []
    assert stored_last_agent(stack) is None
    assert '"LastAgentCorrected":[1.0]' in capsys.readouterr().out.replace(" ", "")


def test_a_correction_of_a_contact_that_is_not_the_last_changes_nothing(
    stack, last_agent, lambda_context
):
    store(stack, EARLY, LATE)
    run(last_agent, lambda_context, EARLY, LATE)
    remove(stack, EARLY)
    removal = stream_record(EARLY, event_name="REMOVE", old_image=EARLY)
    assert failed_ids(last_agent.lambda_handler(stream_event(removal), lambda_context)) == []
    assert stored_last_agent(stack)["contact_id"] == "c-late"
