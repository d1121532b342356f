"""`ops contact redrive` (ops/contacts.py) in process: the change it sends is the stored contact
shaped as the stream gives it, and what could reach the customer is said before anything moves
(its delivery to each fan-out mode's readers: tests/integration/test_contact_redrive.py)."""

from datetime import UTC, datetime, timedelta

import pytest
from boto3.dynamodb.types import TypeSerializer
from shared import idempotency, keys, model
from shared.aws import table

from ops import contacts, records
from ops.errors import OpsError

SURVEY_DUE = {
    "contact_id": "c-7",
    "caller": "+15551234567",
    "agent_id": "agent-1",
    "started_at": "2026-11-29T09:00:00Z",
    "ended_at": "2026-11-29T09:05:00Z",
    "updated_at": "2026-11-29T09:06:00Z",
    "disposition": "RESOLVED",
    "wait_seconds": 5,
    "email": "a@example.com",
    "survey_opt_in": True,
}


def store(ops_stack, row: dict) -> dict:
    contact = model.parse_contact(
        row, text_values=False, ingested_at=datetime(2026, 11, 30, tzinfo=UTC)
    )
    item = contact.to_item(600)
    write = table.ContactWrite(item, keys.contact_version(item), 1)
    table.write_contacts(ops_stack.dynamodb, ops_stack.contacts_table, [write])
    return item


def test_any_copy_is_sent_as_the_insert_of_its_interactions_first_copy(ops_stack):
    store(ops_stack, SURVEY_DUE)
    first = contacts.stream_record(ops_stack, contacts.current_item(ops_stack, "c-7"))
    assert first["eventName"] == "INSERT" and "OldImage" not in first["dynamodb"]
    assert first["dynamodb"]["NewImage"]["first_export"] == {"BOOL": True}
    assert first["eventSourceARN"].startswith("arn:aws:dynamodb:")

    # A correction replaced the first copy, perhaps before the consumers got its INSERT (a batch
    # past the stream's 24 hours): the later copy goes as the first, so what it makes due may
    # still start, under the interaction's ids, which the consumers dedupe.
    store(ops_stack, SURVEY_DUE | {"agent_id": "agent-2", "updated_at": "2026-11-29T10:00:00Z"})
    item = contacts.current_item(ops_stack, "c-7")
    assert item["first_export"] == {"BOOL": False}
    later = contacts.stream_record(ops_stack, item)
    assert later["eventName"] == "INSERT" and "OldImage" not in later["dynamodb"]
    assert later["dynamodb"]["NewImage"]["first_export"] == {"BOOL": True}
    assert later["dynamodb"]["NewImage"]["agent_id"] == {"S": "agent-2"}
    data, text, _ = contacts.redrive(ops_stack, "c-7", dry_run=True, resend=False, confirm=None)
    assert data["notifications"] == {"SURVEY#c-7": contacts.UNSENT}
    assert "a later copy, sent as the first" in text


def test_a_contact_past_its_retention_is_refused_though_ttl_has_not_deleted_it(ops_stack):
    """DynamoDB's TTL deletes within days of `expires_at`; by then the notifier's and the mail
    sender's records of the contact's notifications may have expired, so a redrive could mail
    the customer again."""
    item = store(ops_stack, SURVEY_DUE)
    expired = item | {"expires_at": int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()) - 1}
    ops_stack.dynamodb.put_item(
        TableName=ops_stack.contacts_table,
        Item={name: TypeSerializer().serialize(value) for name, value in expired.items()},
    )
    with pytest.raises(OpsError, match="c-7 expired at 2026-11-30T23:59:59Z"):
        contacts.redrive(ops_stack, "c-7", dry_run=True, resend=False, confirm=None)


def test_a_dry_run_says_which_notifications_could_follow_and_sends_nothing(ops_stack):
    store(ops_stack, SURVEY_DUE)
    data, text, ok = contacts.redrive(ops_stack, "c-7", dry_run=True, resend=False, confirm=None)
    assert data["notifications"] == {"SURVEY#c-7": contacts.UNSENT} and ok
    assert "dry run: nothing sent" in text and SURVEY_DUE["email"] not in text


def test_a_notification_claimed_and_never_recorded_is_refused_without_resend(ops_stack):
    store(ops_stack, SURVEY_DUE)
    layer = records.persistence(ops_stack, records.CLAIMS["NotifierFunction"])
    layer.save_inprogress({"notification_id": "SURVEY#c-7"}, remaining_time_in_millis=1000)
    with pytest.raises(OpsError, match="never recorded"):
        contacts.redrive(ops_stack, "c-7", dry_run=False, resend=False, confirm=None)


def test_the_operator_is_asked_before_an_unsent_notification_goes(ops_stack):
    store(ops_stack, SURVEY_DUE)
    asked = []

    def refuse(question: str) -> bool:
        asked.append(question)
        return False

    with pytest.raises(OpsError, match="not confirmed"):
        contacts.redrive(ops_stack, "c-7", dry_run=False, resend=False, confirm=refuse)
    assert "SURVEY#c-7" in asked[0]


@pytest.mark.parametrize(
    ("contact_id", "message"), [("a b", "not a contact id"), ("c-9", "no contact")]
)
def test_an_unknown_contact_is_refused(ops_stack, contact_id, message):
    with pytest.raises(OpsError, match=message):
        contacts.current_item(ops_stack, contact_id)


def test_a_contact_stored_before_contacts_expired_is_redriven(ops_stack):
    item = store(ops_stack, SURVEY_DUE)
    unexpiring = {name: value for name, value in item.items() if name != "expires_at"}
    ops_stack.dynamodb.put_item(
        TableName=ops_stack.contacts_table,
        Item={name: TypeSerializer().serialize(value) for name, value in unexpiring.items()},
    )
    assert "expires_at" not in contacts.current_item(ops_stack, "c-7")


def test_a_notification_whose_record_expired_is_refused_even_with_resend(stack, ops_stack):
    """A correction that moved a contact's end later keeps it current past its notification's
    400 days: the notifier's record has expired, and nothing would stop a second e-mail."""
    store(ops_stack, SURVEY_DUE)
    layer = records.persistence(ops_stack, records.CLAIMS["NotifierFunction"])
    layer.save_success({"notification_id": "SURVEY#c-7"}, result={"published": True})
    stack.age_idempotency_records(idempotency.ONCE_PER_NOTIFICATION_SECONDS + 1)
    with pytest.raises(OpsError, match="SURVEY#c-7 has expired"):
        contacts.redrive(ops_stack, "c-7", dry_run=False, resend=True, confirm=None)
    data, _, _ = contacts.redrive(ops_stack, "c-7", dry_run=True, resend=False, confirm=None)
    assert data["notifications"] == {"SURVEY#c-7": contacts.FORGOTTEN}


def test_a_contact_that_ended_past_what_the_table_remembers_is_refused(ops_stack):
    """The ingest refuses a copy of a contact that ended more than 399 days before it arrives;
    a redrive of one still stored, in its last day, would start after the retention what a
    correction made due (a gift card for a call corrected to abandoned: the model's search)."""
    item = store(ops_stack, SURVEY_DUE)
    ended = datetime.now(UTC) - model.REMEMBERED - timedelta(hours=1)
    old = item | {"ended_at": keys.utc_timestamp(ended)}
    ops_stack.dynamodb.put_item(
        TableName=ops_stack.contacts_table,
        Item={name: TypeSerializer().serialize(value) for name, value in old.items()},
    )
    with pytest.raises(OpsError, match="more than 399 days ago: past what the table remembers"):
        contacts.redrive(ops_stack, "c-7", dry_run=True, resend=False, confirm=None)
