"""The behaviour suite's own parts: every case cites the AWS documentation, a case's outcome
says whether the target failed it or does not serve it, the table lands in its section, and
`make behaviour` fails on what the local stack newly fails."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from behaviour import cases as _cases  # noqa: F401 - registers the cases
from behaviour.__main__ import local_problems
from behaviour.case import CASES, Case, Unsupported
from behaviour.runner import FAIL, PASS, UNSUPPORTED, Outcome, run_case
from behaviour.session import _Client
from behaviour.table import END, START, markdown, publish
from behaviour.targets import KNOWN_GAPS


def test_every_case_cites_an_aws_documentation_page() -> None:
    assert len({c.name for c in CASES}) == len(CASES) >= 15
    for one in CASES:
        assert one.cites.startswith("https://docs.aws.amazon.com/"), one.name


def test_a_case_that_is_not_served_is_unsupported_and_a_wrong_answer_fails() -> None:
    def not_served(session) -> None:
        raise Unsupported("pipes CreatePipe: NotImplemented")

    def wrong(session) -> None:
        raise AssertionError("got two deliveries")

    assert run_case("http://unused", Case("a", "g", not_served)).status == UNSUPPORTED
    failed = run_case("http://unused", Case("b", "g", wrong))
    assert failed.status == FAIL and "got two deliveries" in failed.detail
    assert run_case("http://unused", Case("c", "g", lambda session: None)).status == PASS


class _Refusing:
    """A boto3 client's stand-in that answers one error, as a target would."""

    class meta:
        class service_model:
            service_name = "pipes"

    def __init__(self, code: str, status: int) -> None:
        self.error = ClientError(
            {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "CreatePipe"
        )

    def create_pipe(self, **_: object) -> None:
        raise self.error


@pytest.mark.parametrize(("code", "status"), [("NotImplemented", 501), ("InvalidAction", 400)])
def test_an_operation_the_target_does_not_implement_raises_unsupported(code, status) -> None:
    with pytest.raises(Unsupported, match="pipes create_pipe"):
        _Client(_Refusing(code, status)).create_pipe(Name="p")


@pytest.mark.parametrize(
    ("code", "status"), [("ValidationException", 400), ("ResourceNotFoundException", 404)]
)
def test_an_error_of_a_served_operation_is_the_case_s_failure(code, status) -> None:
    with pytest.raises(ClientError):
        _Client(_Refusing(code, status)).create_pipe(Name="p")


def test_the_table_has_a_row_per_case_and_a_column_per_target(tmp_path) -> None:
    cases = CASES[:2]
    results = {
        "local": {c.name: Outcome(PASS, "", 1.0) for c in cases},
        "rival": {
            cases[0].name: Outcome(FAIL, "x", 1.0),
            cases[1].name: Outcome(UNSUPPORTED, "", 0),
        },
    }
    table = markdown(cases, results, {"local": "abc", "rival": "1.0"}, "2026-12-07")
    lines = table.splitlines()
    assert "| case | local abc | rival 1.0 |" in lines
    assert f"| [{cases[0].name}]({cases[0].cites}) ({cases[0].group}) | pass | fail |" in lines
    assert lines[-1] == "| passed | 2 of 2 | 0 of 2 |"
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{START}\nold\n{END}\nafter\n")
    publish(doc, table)
    assert doc.read_text() == f"before\n{START}\n{table}\n{END}\nafter\n"


def test_make_behaviour_fails_on_a_new_failure_and_on_a_closed_gap_not_on_a_known_one() -> None:
    [gap, *_] = KNOWN_GAPS
    other = next(c.name for c in CASES if c.name not in KNOWN_GAPS)
    assert local_problems({gap: Outcome(FAIL, "x", 1.0), other: Outcome(PASS, "", 1.0)}) == []
    assert local_problems({other: Outcome(FAIL, "x", 1.0)}) == [f"the local stack fails {other}"]
    assert local_problems({gap: Outcome(PASS, "", 1.0)}) == [
        f"the local stack passes {gap}: take it out of KNOWN_GAPS"
    ]
