"""Amazon Connect's contact records put into the stack's delivery stream, as Connect streams them,
flow end to end: Firehose -> S3 (contact-records/) -> IngestQueue -> IngestFunction ->
ContactsTable -> the consumers (in the stack's fan-out mode) -> NotificationsTopic, and
RouteFunction answers the caller's last agent. One survey and one gift card per interaction
(the legs of a transferred call are one), whatever Connect delivers again."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from shared import keys

from harness import connect_records as ctr
from harness import expected
from harness.builders import new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import delete_all_versions, wait_for_notifications

pytestmark = pytest.mark.integration

PREFIX = "contact-records/"
OPTED_IN = {"survey_opt_in": "true", "email": "caller@example.com"}


class Delivered:
    """The objects Firehose writes under contact-records/ during a test: removed at the end with
    every version, their processing logs and their keys' newest-version items (an object that
    Firehose on AWS writes after the test, from its buffer, stays for the bucket's lifecycle)."""

    def __init__(self, stack: StackClient):
        self.stack = stack
        self.before = self.versions()

    def versions(self) -> set[tuple[str, str]]:
        found = set()
        paginator = self.stack.s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self.stack.bucket, Prefix=PREFIX):
            found |= {(v["Key"], v["VersionId"]) for v in page.get("Versions", [])}
        return found

    def cleanup(self) -> None:
        mine = self.versions() - self.before
        for key in {key for key, _ in mine}:
            delete_all_versions(self.stack.s3, self.stack.bucket, key)
            delete_all_versions(self.stack.s3, self.stack.bucket, f"rejected/{key}/")
        self.stack.delete_items(
            keys.processing_log_key(self.stack.file_id(key, version)) for key, version in mine
        )
        self.stack.delete_items(keys.object_key(self.stack.bucket, key) for key, _ in mine)


@pytest.fixture
def delivered(stack: StackClient) -> Iterator[Delivered]:
    objects = Delivered(stack)
    try:
        yield objects
    finally:
        objects.cleanup()


def interaction(rng: random.Random, caller: str, kind: str, started: datetime, **attributes):
    """One interaction's legs, the given attributes set on every leg (Connect copies a contact's
    attributes to its next leg), each queue wait short unless it is abandoned: what a leg is due
    comes from its disposition alone."""
    legs = ctr.interaction(rng, caller=caller, started=started, kind=kind)
    for leg in legs:
        leg["Attributes"].update(attributes)
        if kind != "abandoned" and leg["Queue"]:
            leg["Queue"]["Duration"] = 5
    return legs


def agent_of(leg: dict) -> str:
    """The agent RouteFunction names: the user id at the end of the leg's Agent.ARN."""
    return leg["Agent"]["ARN"].rsplit("/", 1)[-1]


def stored_item(stack: StackClient, record: dict) -> dict | None:
    """The CONTACT item of a record's contact, wherever it lives (its caller's partition, or its
    own for a contact without a telephone number)."""
    [item] = expected.stored([record]).values()
    return stack.get_item({"pk": item["pk"], "sk": item["sk"]})


def start() -> datetime:
    return (datetime.now(UTC) - timedelta(hours=6)).replace(microsecond=0)


def test_contact_records_through_firehose_become_one_survey_and_gift_card_per_interaction(
    stack: StackClient, delivered, topic, contact_cleanup
):
    rng = random.Random()
    transferred_caller, abandoned_caller = new_caller(), new_caller()
    contact_cleanup.extend([transferred_caller, abandoned_caller])
    at = start()
    # A call transferred twice (three legs, the last one handled; every leg opted in): one survey.
    legs = interaction(rng, transferred_caller, "transferred_twice", at, **OPTED_IN)
    assert [leg["InitialContactId"] for leg in legs[1:]] == [legs[0]["ContactId"]] * 2
    # A call abandoned in its queue: one gift card.
    [abandoned] = interaction(rng, abandoned_caller, "abandoned", at + timedelta(minutes=1))
    # A chat of the transferred call's caller, after it and with another agent (drawn again
    # when the directory gives the same one, 1 in 40): stored, never the caller's last agent (a
    # chat has no telephone number).
    chat = legs[-1]
    while agent_of(chat) == agent_of(legs[-1]):
        [chat] = interaction(
            rng, transferred_caller, "chat", at + timedelta(hours=2), survey_opt_in="false"
        )
    records = sorted([*legs, abandoned, chat], key=lambda r: r["LastUpdateTimestamp"])

    want = expected.notifications(records, stack.goodwill_wait_seconds)
    survey_id, abandoned_id = legs[0]["ContactId"], abandoned["ContactId"]
    assert want == Counter({(keys.SURVEY, survey_id): 1, (keys.GIFT_CARD, abandoned_id): 1})
    assert stack.put_contact_records(records) >= 1

    counts = wait_for_notifications(stack, topic, want)
    assert counts == want
    [survey] = topic.for_contacts({survey_id})
    assert (survey["kind"], survey["email"]) == (keys.SURVEY, "caller@example.com")
    assert survey["notification_id"] == keys.notification_id(keys.SURVEY, survey_id)
    [gift] = topic.for_contacts({abandoned_id})
    assert (gift["kind"], gift["caller"]) == (keys.GIFT_CARD, abandoned_caller)
    assert stack.get_item(keys.gift_card_key(abandoned_id))

    # Every leg stored once under its caller, in its interaction; the chat in its own partition.
    stored = {i["contact_id"]["S"]: i for i in stack.contacts_of(transferred_caller)}
    assert set(stored) == {leg["ContactId"] for leg in legs}
    assert {i["interaction_id"]["S"] for i in stored.values()} == {survey_id}
    assert [stored[leg["ContactId"]]["disposition"]["S"] for leg in legs] == [
        "TRANSFERRED",
        "TRANSFERRED",
        "RESOLVED",
    ]
    chat_item = eventually(lambda: stored_item(stack, chat), timeout=30)
    assert chat_item["channel"] == {"S": "CHAT"} and "caller" not in chat_item
    [abandoned_item] = stack.contacts_of(abandoned_caller)
    assert abandoned_item["disposition"] == {"S": "ABANDONED"}

    # The caller's last agent is the last leg's agent, not the later chat's.
    assert expected.last_agents(records) == {
        transferred_caller: {
            "agent_id": agent_of(legs[-1]),
            "contact_id": legs[-1]["ContactId"],
            "ended_at": stored[legs[-1]["ContactId"]]["ended_at"]["S"],
        }
    }

    def routed() -> dict:
        answer = stack.route(transferred_caller)
        assert answer["found"] == "true", answer
        return answer

    answer = eventually(routed, timeout=60)
    assert answer["agent_id"] == agent_of(legs[-1]) != agent_of(chat)
    assert answer["contact_id"] == legs[-1]["ContactId"]
    assert stack.route(abandoned_caller) == {"found": "false"}
    stack.delete_items([{"pk": chat_item["pk"]["S"], "sk": chat_item["sk"]["S"]}])
    stack.delete_items([keys.contact_ref_key(chat["ContactId"])])


def test_a_newer_redelivery_corrects_a_contact_and_older_or_equal_copies_change_nothing(
    stack: StackClient, delivered, topic, contact_cleanup
):
    rng = random.Random()
    caller, sentinel_caller = new_caller(), new_caller()
    contact_cleanup.extend([caller, sentinel_caller])
    [handled] = interaction(rng, caller, "handled", start(), **OPTED_IN)
    survey_id = handled["ContactId"]
    stack.put_contact_records([handled])
    want = Counter({(keys.SURVEY, survey_id): 1})
    assert expected.notifications([handled], stack.goodwill_wait_seconds) == want
    assert wait_for_notifications(stack, topic, want) == want

    # update-contact-attributes: Connect delivers the record again, newer, the address changed.
    newer = ctr.redelivered(handled, seconds=3600)
    newer["Attributes"]["email"] = "corrected@example.com"
    stack.put_contact_records([newer])

    def corrected() -> dict:
        [item] = stack.contacts_of(caller)
        assert item["email"] == {"S": "corrected@example.com"}, item
        return item

    item = eventually(corrected, timeout=60)
    assert item["first_export"] == {"BOOL": False}
    assert item["updated_at"]["S"].startswith(newer["LastUpdateTimestamp"].removesuffix("Z"))

    # A late copy older than the one stored, another with its timestamp and other content, and
    # an exact duplicate of it; then a record of another caller: once that is in, so are they
    # (they go in in one call, before it).
    older = ctr.redelivered(handled, seconds=-60)
    older["Attributes"]["email"] = "older@example.com"
    equal = ctr.redelivered(newer, seconds=0)
    equal["Attributes"]["crm_case_status"] = "reopened"  # not a field the contact keeps
    [sentinel] = interaction(rng, sentinel_caller, "abandoned", start())
    stack.put_contact_records([older, equal, newer, sentinel])
    eventually(lambda: stack.contacts_of(sentinel_caller), timeout=60)
    want[(keys.GIFT_CARD, sentinel["ContactId"])] = 1
    assert wait_for_notifications(stack, topic, want) == want  # no second survey

    [after] = stack.contacts_of(caller)
    assert after == item, "an older or equal copy changed the stored contact"
    assert expected.stored([handled, newer, older, equal, newer])[survey_id]["email"] == (
        "corrected@example.com"
    )
