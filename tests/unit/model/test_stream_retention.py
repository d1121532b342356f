"""What the model-based search found past the stream's 24 hours (test_model.py's a_day_passes and
the runbook's `ops contact redrive` of a batch `ops stream replay` refuses), as the run that
shows it."""

from shared import ingest

from tests.unit.model.design import check_final_state
from tests.unit.model.pipeline import Pipeline
from tests.unit.support import moto_stack

ABANDONED = {
    "contact_id": "c-1",
    "caller": "+15550000001",
    "started_at": "2026-11-28T09:00:00Z",
    "ended_at": "2026-11-28T10:00:00Z",
    "updated_at": "2026-11-29T11:00:00Z",
    "disposition": "ABANDONED",
    "wait_seconds": 5,
}


def test_a_gift_card_whose_change_outlived_the_stream_is_issued_by_the_runbook(
    aws_env, monkeypatch, capsys
):
    """An abandoned contact is stored (its first copy: a gift card is due) and GoodwillFunction's
    batch with its INSERT is given up to StreamFailureQueue. A correction moves its end: the
    item now holds a later copy, due a gift card too. A day later `ops stream replay` refuses the
    batch (past retention) and the operator follows docs/operations.md: `ops contact redrive` of
    its contact, then the failure record deleted. The redrive sends the stored copy, a later one
    (a MODIFY: no gift card can follow), so the interaction every copy of which is due never
    gets its gift card."""
    monkeypatch.setattr(ingest, "CONTACTS_PER_WRITE", 2)
    with moto_stack(monkeypatch) as stack:
        pipeline = Pipeline(stack, monkeypatch)
        pipeline.upload("incoming/a.jsonl", [ABANDONED])
        pipeline.flow_up_to("GoodwillFunction")
        assert pipeline.deliver_stream("GoodwillFunction", 10, None, twice=False, give_up=True)
        moved = ABANDONED | {
            "ended_at": "2026-11-28T10:03:00Z",
            "updated_at": "2026-11-29T11:01:00Z",
        }
        pipeline.upload("incoming/a.jsonl", [moved])
        pipeline.a_day_passes()

        pipeline.drain()

        assert pipeline.operator["stream batch past retention, its contacts redriven"] == 1
        check_final_state(pipeline)
        capsys.readouterr()
