"""What the model-based search found past SNS's 5-minute deduplication, each as the run that
shows it: the operator's command, the time that passes, what the subscriber receives."""

from shared import ingest

from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import SURVEY_DUE, Pipeline
from tests.unit.support import moto_stack


def test_purging_a_young_claim_never_recorded_does_not_send_the_survey_twice(
    aws_env, monkeypatch, capsys
):
    """The notifier publishes the survey and its save of the record is throttled: the claim
    stays INPROGRESS, a minute old. A purge of that claim without --resend would let the
    message's next delivery, an hour later (a backlog, a DLQ redrive), publish it again outside
    SNS's deduplication: the customer would get it twice without the operator saying so."""
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        pipeline = Pipeline(stack, monkeypatch)
        pipeline.upload("incoming/a.jsonl", [SURVEY_DUE])
        pipeline.throttle("NotifierFunction", "dynamodb:UpdateItem", times=1)
        pipeline.settle()
        assert sum(pipeline.received_by_subscriber().values()) == 1
        pipeline.time_passes(60)

        pipeline.idempotency_purge("SURVEY#c-1", resend=False)
        pipeline.time_passes(3600)
        pipeline.drain()

        check_final_state(pipeline)
        capsys.readouterr()
