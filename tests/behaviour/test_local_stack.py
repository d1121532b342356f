"""The behaviour suite (behaviour/) against this project's local stack, empty (`up
--no-deploy`): every case must pass, as AWS behaves. The rivals' columns of the table are
`make behaviour`'s, not this module's: they need their own installs.

The cases run at once (behaviour.runner), once for the module; each test reports one case.
A case the stack is known to fail (behaviour.targets.KNOWN_GAPS) is marked xfail(strict): it
fails here until the stack does what AWS does, and then its entry must go (docs/local-stack.md,
"Behaviour suite")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from behaviour import cases as _cases  # noqa: F401 - registers the cases
from behaviour.case import CASES
from behaviour.runner import PASS, Outcome, run_all
from behaviour.targets import KNOWN_GAPS
from tests.session_stack import empty_stack

PORTS = range(4990, 5020)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> Iterator[dict[str, Outcome]]:
    with empty_stack(tmp_path_factory.mktemp("stack"), PORTS) as local:
        yield run_all(local.endpoint)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            c.name,
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[c.name])]
            if c.name in KNOWN_GAPS
            else [],
        )
        for c in CASES
    ],
)
def test_case_passes(outcomes: dict[str, Outcome], name: str) -> None:
    outcome = outcomes[name]
    assert outcome.status == PASS, f"{outcome.status}: {outcome.detail}"
