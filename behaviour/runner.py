"""Every case against one endpoint, several at once (they mostly wait: visibility timeouts,
retries), each in a ``Session`` of its own."""

from __future__ import annotations

import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from behaviour.case import CASES, Case, Unsupported
from behaviour.session import Session

PASS, FAIL, UNSUPPORTED = "pass", "fail", "unsupported"
# Cases at once: each waits on the target most of its time.
WORKERS = 10


@dataclass(frozen=True)
class Outcome:
    status: str  # PASS, FAIL or UNSUPPORTED
    detail: str  # why, for FAIL and UNSUPPORTED
    seconds: float


def run_case(endpoint: str, one: Case) -> Outcome:
    started = time.monotonic()
    try:
        one.run(Session(endpoint, one.name))
    except Unsupported as unsupported:
        return Outcome(UNSUPPORTED, str(unsupported), time.monotonic() - started)
    except Exception as error:
        where = traceback.extract_tb(error.__traceback__)[-1]
        detail = f"{where.name}:{where.lineno}: {type(error).__name__}: {error}"
        return Outcome(FAIL, detail[:400], time.monotonic() - started)
    return Outcome(PASS, "", time.monotonic() - started)


def run_all(endpoint: str, cases: list[Case] | None = None) -> dict[str, Outcome]:
    """Every case's outcome by name, in the order the cases are registered."""
    import behaviour.cases  # noqa: F401, PLC0415 - registers the cases

    chosen = CASES if cases is None else cases
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(lambda one: run_case(endpoint, one), chosen))
    return {one.name: outcome for one, outcome in zip(chosen, outcomes, strict=True)}
