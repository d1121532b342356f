"""The harness's own logic, without a stack: what rows must produce, EMF metrics read from logs,
files built in each format."""

import io
import json
import random
from datetime import UTC, datetime, timedelta

from shared import files, keys

from harness import connect_records as ctr
from harness import expected
from harness.builders import contact, file_body, new_caller
from harness.metrics import FunctionMetrics


def test_the_newest_contact_with_an_agent_is_the_last_agent_in_any_order():
    caller = new_caller()
    old = contact(caller, minutes=0, agent_id="agent-old")
    new = contact(caller, minutes=30, agent_id="agent-new")
    abandoned_later = contact(caller, minutes=60, agent_id=None, disposition="ABANDONED")
    for rows in ([old, new, abandoned_later], [abandoned_later, new, old]):
        assert expected.last_agents(rows) == {
            caller: {
                "agent_id": "agent-new",
                "contact_id": new["contact_id"],
                "ended_at": "2026-11-02T09:30:00.000Z",
            }
        }


def test_each_due_notification_is_expected_once():
    caller = new_caller()
    survey = contact(caller, disposition="RESOLVED", email="a@example.com", survey_opt_in=True)
    gift = contact(caller, disposition="ABANDONED", agent_id=None)
    neither = contact(caller, disposition="RESOLVED", survey_opt_in=False)
    due = expected.notifications([survey, gift, neither, survey], goodwill_wait_seconds=600)
    assert due == {(keys.SURVEY, survey["contact_id"]): 1, (keys.GIFT_CARD, gift["contact_id"]): 1}


def test_emf_metrics_are_summed_per_function_and_read_incrementally(tmp_path):
    def emf(**values):
        return json.dumps(
            {
                "_aws": {
                    "Timestamp": 0,
                    "CloudWatchMetrics": [
                        {
                            "Namespace": "ContactCenter",
                            "Dimensions": [["service"]],
                            "Metrics": [{"Name": name, "Unit": "Count"} for name in values],
                        }
                    ],
                },
                "service": "x",
                **values,
            }
        )

    notifier = tmp_path / "NotifierFunction.log"
    notifier.write_text(emf(DuplicatesSuppressed=[1.0, 1.0]) + "\nSTART RequestId: 1\n")
    (tmp_path / "SurveyFunction.log").write_text(emf(DuplicatesSuppressed=1.0) + "\n")
    metrics = FunctionMetrics(tmp_path)
    assert metrics.read() == 3
    with notifier.open("a") as log:  # a line written in two parts
        log.write(emf(DuplicatesSuppressed=[1.0])[:20])
    assert metrics.read() == 3
    with notifier.open("a") as log:
        log.write(emf(DuplicatesSuppressed=[1.0])[20:] + "\n")
        # the last line of a worker killed mid-write: not a metric, and no reason to stop reading
        log.write(emf(DuplicatesSuppressed=[5.0])[:30] + "\n")
    metrics.read()
    assert metrics.by_function("DuplicatesSuppressed") == {
        "NotifierFunction": 3,
        "SurveyFunction": 1,
    }
    assert metrics.by_function("LastAgentStale") == {}


def test_files_in_every_format_read_back_as_their_rows():
    rows = [contact(new_caller(), survey_opt_in=True, email="a@example.com") for _ in range(3)]
    for name in ("a.jsonl", "a.jsonl.gz", "a.csv", "a.csv.gz"):
        read = list(files.read_rows(name, io.BytesIO(file_body(name, rows))))
        assert [r.fields["contact_id"] for r in read] == [r["contact_id"] for r in rows], name
        assert all(r.fields["survey_opt_in"] in (True, "true") for r in read), name


def test_contact_records_are_expected_per_interaction_and_by_their_own_version():
    rng = random.Random(7)
    at = datetime.now(UTC) - timedelta(hours=3)
    caller = new_caller()
    legs = ctr.interaction(rng, caller=caller, started=at, kind="transferred_twice")
    for leg in legs:
        leg["Attributes"].update(survey_opt_in="true", email="a@example.com")
        if leg["Queue"]:
            leg["Queue"]["Duration"] = 5
    newer = ctr.redelivered(legs[-1], seconds=60)
    newer["Attributes"]["email"] = "b@example.com"
    older = ctr.redelivered(legs[-1], seconds=-60)
    older["Attributes"]["email"] = "c@example.com"
    rows = [*legs, newer, older, "a broken line"]
    assert expected.notifications(rows, 600) == {(keys.SURVEY, legs[0]["ContactId"]): 1}
    stored = expected.stored(rows)
    assert set(stored) == {leg["ContactId"] for leg in legs}
    assert stored[legs[-1]["ContactId"]]["email"] == "b@example.com"
    assert expected.last_agents(rows)[caller]["contact_id"] == legs[-1]["ContactId"]
    assert expected.rejected(rows) == 1
