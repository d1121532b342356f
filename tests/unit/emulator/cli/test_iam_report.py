"""`iam-report`'s verdict does not depend on which local runs happened (issue 21, item 13): a grant
the code uses only on a rare path is explained as such (Metadata.UnusedGrants ``RarePath``)
whether or not the runs read took it, and the report says which runs it read and what each one
covered."""

from emulator.cli import iam_report
from emulator.deploy.translate import load_template
from emulator.iam.access import Access, run_description
from tests.unit.emulator.support import ROOT

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/contacts"
ROLE = {
    "role": "fn-role",
    "policies": {
        "Items": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Items",
                    "Effect": "Allow",
                    "Action": ["dynamodb:PutItem", "dynamodb:DeleteItem"],
                    "Resource": TABLE,
                }
            ],
        }
    },
}


def template(**entry) -> dict:
    function = {"Type": "AWS::Serverless::Function", "Metadata": {"UnusedGrants": [entry]}}
    return {"Resources": {"Fn": function}}


RARE = template(
    Actions=["dynamodb:DeleteItem"],
    RarePath="a correction that leaves a caller no contact with an agent",
    Reason="Used by the code, on that path only.",
)


def record(*actions: str, run: dict | None = None) -> dict:
    """What `up` writes for a run in which Fn made these calls (each allowed by Items)."""
    snapshot = Access({"Fn": ROLE}, run=run).snapshot()
    snapshot["functions"]["Fn"]["calls"] = [
        {
            "action": action,
            "resource": TABLE,
            "context": {},
            "allowed": True,
            "grants": ["Items/Items"],
            "denied_by": None,
            "count": 1,
        }
        for action in actions
    ]
    return snapshot


def verdict(records: list[dict], notes: dict) -> tuple[bool, str]:
    report = iam_report.build(records, notes)
    return report.failed, iam_report.render(report)


def test_a_rare_path_grant_gives_the_same_verdict_whether_or_not_the_runs_took_it():
    not_taken = verdict([record("dynamodb:PutItem")], RARE)
    taken = verdict([record("dynamodb:PutItem", "dynamodb:DeleteItem")], RARE)
    both = verdict([record("dynamodb:PutItem"), record("dynamodb:DeleteItem")], RARE)

    assert (not_taken[0], taken[0], both[0]) == (False, False, False)
    assert "rare path not taken in these runs (Fn): a correction that leaves" in not_taken[1]
    assert "NOT EXPLAINED" not in not_taken[1] + taken[1] + both[1]
    assert "stale explanation" not in taken[1] + both[1]  # used: the explanation is not stale


def test_without_a_rare_path_the_verdict_depends_on_the_runs():
    """What made `make iam-report` fail after runs that never took the path (and why RarePath
    exists): unexplained when not taken, a stale explanation when taken."""
    unexplained = verdict([record("dynamodb:PutItem")], template(Actions=["sqs:*"], Reason="x"))
    assert unexplained[0] and "dynamodb:DeleteItem: NOT EXPLAINED" in unexplained[1]
    plain = template(Actions=["dynamodb:DeleteItem"], Reason="only when a correction...")
    stale = verdict([record("dynamodb:PutItem", "dynamodb:DeleteItem")], plain)
    assert stale[0] and "stale explanation (Fn): dynamodb:DeleteItem" in stale[1]


def test_the_report_says_which_runs_it_read_and_what_each_covered():
    chaos = {"started": "2026-12-01T10:00:00Z", "fan_out": "pipe", "started_by": "python -m chaos"}
    demo = {"started": "2026-12-01T11:00:00Z", "fan_out": "lambda", "started_by": "make run"}
    _, text = verdict(
        [record("dynamodb:PutItem", "dynamodb:DeleteItem", run=chaos), record(run=demo)], RARE
    )
    assert text.splitlines()[:3] == [
        "iam-report: 2 local stack run(s) of the current template and code",
        "  run 1: started 2026-12-01T10:00:00Z, fan-out pipe, by `python -m chaos`; calls: Fn 2",
        "  run 2: started 2026-12-01T11:00:00Z, fan-out lambda, by `make run`; calls: none",
    ]


def test_a_function_of_another_stack_the_run_served_is_not_the_templates():
    """The behaviour suite deploys stacks of its own into an empty local stack: their functions'
    roles (one grants everything) are not the template's, and do not fail its report."""
    other = record("dynamodb:PutItem")
    other["functions"] = {"FnOfAnotherStack": other["functions"]["Fn"]}
    failed, text = verdict([record("dynamodb:PutItem"), other], RARE)
    assert not failed
    assert "FnOfAnotherStack (role" not in text


def test_a_run_describes_itself():
    run = run_description("router")
    assert run["fan_out"] == "router" and run["started"].endswith("Z")
    assert run["started_by"]  # the command line of what started it (here: pytest's parent)


def test_the_last_agents_delete_is_a_rare_path_that_a_test_takes():
    notes = iam_report.explanations(load_template(ROOT / "template.yaml"))
    [delete] = [
        n for n in notes if n.where == "LastAgentFunction" and "dynamodb:DeleteItem" in n.actions
    ]
    assert delete.rare_path and "tests/integration/test_corrections.py" in delete.rare_path
    taken_by = (ROOT / "tests/integration/test_corrections.py").read_text()
    assert "def test_a_correction_that_leaves_a_caller_no_agent_contact" in taken_by


def test_a_failed_report_without_an_integration_run_points_at_make_integration():
    """After `make run` alone the grants only the integration suite's paths use are unused: the
    report says which run is missing instead of leaving a newcomer with NOT EXPLAINED lines."""
    notes = template(Actions=["sqs:*"], Reason="x")
    demo = {"started": "2026-12-01T11:00:00Z", "fan_out": "lambda", "started_by": "make run"}
    suite = demo | {"started_by": "python -m pytest tests/integration"}
    failed, text = verdict([record("dynamodb:PutItem", run=demo)], notes)
    assert failed and text.splitlines()[-1].endswith(
        "Run `make integration`, then `make iam-report` again"
    )
    failed, text = verdict([record("dynamodb:PutItem", run=demo), record(run=suite)], notes)
    assert failed and "make integration" not in text
