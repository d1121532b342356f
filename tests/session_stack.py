"""A local stack for a test session: started, waited for, failed clearly, stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from emulator.process import LocalStackProcess
from harness.stack import StackClient

READY_TIMEOUT = 90.0


@contextlib.contextmanager
def running_stack(local: LocalStackProcess) -> Iterator[StackClient]:
    """``local`` started and ready (else the test fails with its output), stopped at the end."""
    try:
        local.start(READY_TIMEOUT)
    except RuntimeError as error:
        pytest.fail(f"{error}:\n{local.tail()}", pytrace=False)
    try:
        yield StackClient.local_stack(local)
    finally:
        local.stop()
