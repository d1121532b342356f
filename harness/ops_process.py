"""`python -m ops` as an operator runs it against the local stack: a separate process with the
local stack's endpoint and dummy credentials."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

from harness import ROOT
from harness.stack import StackClient

DASHBOARD_START_SECONDS = 30


def environment(stack: StackClient) -> dict[str, str]:
    """This process's environment without its AWS settings, pointed at the local stack."""
    assert stack.local, "ops runs against the local stack here"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return env | stack.local.client_environment()


@contextlib.contextmanager
def dashboard(stack: StackClient) -> Iterator[str]:
    """`python -m ops dashboard` on a port of its own choosing while the block runs; its page's
    URL, as the command prints it once it listens (suites run at once: a port picked here could
    be taken by another suite's page before this one binds it)."""
    process = subprocess.Popen(  # noqa: S603 (this interpreter, fixed arguments)
        [sys.executable, "-m", "ops", "--stack", stack.name, "dashboard", "--port", "0"],
        cwd=ROOT,
        env=environment(stack),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = _served_url(process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()


def _served_url(process: subprocess.Popen) -> str:
    """The URL in the `dashboard of stack <name> at <url> (Ctrl-C stops)` line."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(DASHBOARD_START_SECONDS)
    line = lines[0] if lines else ""
    if " at http://" not in line:
        process.terminate()  # its stderr ends with it
        raise AssertionError(f"ops dashboard did not start: {line!r} {process.stderr.read()}")
    return line.split(" at ", 1)[1].split()[0]
