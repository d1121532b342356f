"""A case: a function of a ``Session`` (one endpoint's clients and helpers), registered with
``@case``. It passes by returning, fails by raising (AssertionError: the behaviour differs from
AWS's), and is unsupported when the target does not serve one of the APIs it calls
(``Unsupported``, raised by ``Session`` from the target's answer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from behaviour.session import Session


class Unsupported(Exception):
    """The target does not serve an API the case needs (what it answered is the message)."""


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    run: Callable[[Session], None]

    @property
    def cites(self) -> str:
        """The first AWS documentation URL of the case's docstring."""
        doc = self.run.__doc__ or ""
        return next(w for w in doc.split() if w.startswith("https://docs.aws.amazon.com/"))


CASES: list[Case] = []


def case(group: str) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    def register(run: Callable[[Session], None]) -> Callable[[Session], None]:
        if "https://docs.aws.amazon.com/" not in (run.__doc__ or ""):
            raise ValueError(f"case {run.__name__} cites no AWS documentation")
        CASES.append(Case(run.__name__, group, run))
        return run

    return register
