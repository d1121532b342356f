"""A local stack for a test session: started, waited for, failed clearly, stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from emulator.process import LocalStackProcess, free_port
from harness.stack import StackClient

READY_TIMEOUT = 90.0


@contextlib.contextmanager
def running_stack(
    local: LocalStackProcess, ports: Iterable[int] | None = None
) -> Iterator[StackClient]:
    """``local`` started and ready (else the test fails with its output), stopped at the end;
    ``ports``: where it may move when another process took its port first (suites at once)."""
    try:
        local.start(READY_TIMEOUT, ports)
    except RuntimeError as error:
        pytest.fail(f"{error}:\n{local.tail()}", pytrace=False)
    try:
        yield StackClient.local_stack(local)
    finally:
        local.stop()


@contextlib.contextmanager
def empty_stack(log_dir: Path, ports: range) -> Iterator[LocalStackProcess]:
    """A local stack with nothing deployed (`up --no-deploy`) on one of ``ports``, ready (else
    the test fails with its output), stopped at the end; its output in ``log_dir``/stack.log."""
    local = LocalStackProcess(
        free_port(ports), up_args=["--no-deploy"], tail_lines=200, log_path=log_dir / "stack.log"
    )
    try:
        local.start(READY_TIMEOUT, ports)
    except RuntimeError as error:
        pytest.fail(f"{error}:\n{local.tail()}", pytrace=False)
    try:
        yield local
    finally:
        local.stop()
