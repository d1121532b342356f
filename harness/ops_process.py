"""`python -m ops` as an operator runs it against the local stack: a separate process (ops imports
the harness, not the other way round) with the local stack's endpoint and dummy credentials."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

from emulator.process import free_port
from harness import ROOT
from harness.polling import eventually
from harness.stack import StackClient

# Where `dashboard` serves its page (ops dashboard --port), beside the local stacks' 4800-4999.
DASHBOARD_PORTS = range(4700, 4800)
DASHBOARD_START_SECONDS = 30


def environment(stack: StackClient) -> dict[str, str]:
    """This process's environment without its AWS settings, pointed at the local stack."""
    assert stack.local, "ops runs against the local stack here"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return env | stack.local.client_environment()


@contextlib.contextmanager
def dashboard(stack: StackClient) -> Iterator[str]:
    """`python -m ops dashboard` on a free port while the block runs; its page's URL."""
    port = free_port(DASHBOARD_PORTS)
    process = subprocess.Popen(  # noqa: S603 (this interpreter, fixed arguments)
        [sys.executable, "-m", "ops", "--stack", stack.name, "dashboard", "--port", str(port)],
        cwd=ROOT,
        env=environment(stack),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def listening() -> bool:
        assert process.poll() is None, f"ops dashboard exited: {process.stderr.read()}"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return True
        return False

    try:
        eventually(listening, timeout=DASHBOARD_START_SECONDS, interval=0.2)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stderr.close()
