"""What the model-based search found once the contacts' retention has passed (test_model.py's
the_contacts_retention_passes), as the run that shows it."""

from datetime import UTC, datetime

from shared import idempotency, ingest, model

from tests.unit.model.design import Remembered, check_after_retention, check_final_state
from tests.unit.model.pipeline import SURVEY_DUE, Pipeline
from tests.unit.support import moto_stack


def test_a_contact_redriven_after_its_claims_expired_is_not_mailed_again(
    aws_env, monkeypatch, capsys
):
    """A survey is published and mailed. 400 days on the contact has expired, but DynamoDB's TTL
    has not deleted it yet (TTL deletes within days), while the notifier's and the mail sender's
    claims (400 days after the notification, which came after the contact ended) have expired
    too. `ops contact redrive` reads the notifier's expired record as "claimed, never recorded"
    and asks for --resend; with it, the survey reaches the mail sender again, whose own claim
    has expired: the customer gets a second e-mail, which docs/design.md rules out even under
    --resend."""
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        pipeline = Pipeline(stack, monkeypatch)
        pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
        pipeline.drain()
        check_final_state(pipeline)
        remembered = Remembered.of(pipeline)
        pipeline.time_passes(idempotency.ONCE_PER_NOTIFICATION_SECONDS + 3600)

        pipeline.contact_redrive("c-1", resend=True)
        pipeline.drain()
        pipeline.ttl_deletes_every_expired_item()

        check_after_retention(pipeline, remembered)
        capsys.readouterr()


def test_a_contact_redriven_past_what_the_table_remembers_issues_no_gift_card(
    aws_env, monkeypatch, capsys
):
    """A call is stored as handled (its first copy: a survey, no gift card), then corrected to
    abandoned (a later copy: no gift card either, by design). Past the 399 days after which the
    ingest refuses any copy of it, but before its 400 days' expiry, `ops contact redrive` refuses
    it as the ingest would. (It sent the stored copy as the interaction's first: GoodwillFunction
    issued the gift card and it was published, an effect of the old export after its retention;
    found by test_model.py's search: the_contacts_retention_passes, "the first day's contacts
    expired", then a contact of the second day redriven.)"""
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        pipeline = Pipeline(stack, monkeypatch)
        pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
        pipeline.drain()
        abandoned = SURVEY_DUE | {"disposition": "ABANDONED", "updated_at": "2026-11-29T11:01:00Z"}
        pipeline.upload("incoming/a.jsonl", [abandoned])
        pipeline.drain()
        check_final_state(pipeline)
        remembered = Remembered.of(pipeline)
        ended = datetime.fromisoformat(SURVEY_DUE["ended_at"]).astimezone(UTC)
        half_a_day_to_expiry = (ended + model.CONTACT_RETENTION).timestamp() - 12 * 3600
        pipeline.time_passes(half_a_day_to_expiry - pipeline.clock.time())

        assert not pipeline.contact_redrive("c-1", resend=False)
        assert pipeline.operator["contact redrive refused"] == 1
        pipeline.drain()
        pipeline.ttl_deletes_every_expired_item()

        check_after_retention(pipeline, remembered)
        capsys.readouterr()
