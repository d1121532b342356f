"""`python -m emulator up` as a child process, for the clients that start their own local stack.

The demo (`python -m harness.demo`), the integration fixtures (tests/integration/conftest.py) and
the end-to-end benchmark (bench/throughput.py) all start the stack this way: this interpreter,
`-m emulator up --port N [--config-file F] [up_args ...]` (the template's parameters among them),
cwd the repository root, an environment
without the developer's AWS profile or endpoint. The child's output is read in a thread: a bounded
tail is kept (for error messages), each line optionally echoed and written to a log file, the
`ready` line sets `ready` (a `tls AWS_CA_BUNDLE=<file>` line before it, with `--tls`: the
endpoint is https and its clients trust that file), and every failed invocation the ESM engine logs
(`esm <mapping> fn=<function> records=N outcome=<not ok> ... <ms>ms`, a warning) is recorded.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# The local stack's region and account (moto's DEFAULT_ACCOUNT_ID): the tooling's one copy.
REGION = "us-east-1"
ACCOUNT = "123456789012"
# The engine logs every invocation that did not end ok (emulator.delivery.mappings.log_invocation).
FAILED_INVOCATION = re.compile(
    r"esm \S+ fn=(?P<function>\S+) records=\d+ outcome=(?P<outcome>(?!ok\b)\w+).*? (?P<ms>\d+)ms"
)

# What `up` says when its port is bound already (emulator/server.py), and how many ports
# ``start`` tries when it may pick another.
PORT_TAKEN = re.compile(r"address (already )?in use", re.IGNORECASE)
PORT_ATTEMPTS = 3
# `tls AWS_CA_BUNDLE=<file>` before `ready <endpoint> stack=<name> functions=...`
# (emulator/cli/up.py)
TLS_LINE = "tls AWS_CA_BUNDLE="
READY_STACK = re.compile(r" stack=(\S+)")


class FailedInvocation(NamedTuple):
    function: str  # physical function name
    outcome: str  # error, timeout, partial, malformed, crash ...
    ms: int


def describe_failures(failures: Iterable[FailedInvocation]) -> str:
    """Invocations that did not end ok, by function and outcome, with their median time."""
    groups: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for function, outcome, millis in failures:
        groups[(function, outcome)].append(millis)
    return (
        ", ".join(
            f"{function} {outcome} x{len(times)} (median {statistics.median(times):.0f} ms)"
            for (function, outcome), times in sorted(groups.items())
        )
        or "none"
    )


def sam_cli_environment(endpoint: str, region: str = REGION) -> dict[str, str]:
    """The environment SAM CLI runs in against an emulator at ``endpoint``: this process's,
    without its own AWS settings, with dummy credentials and no telemetry."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",  # noqa: S106 (an emulator's dummy credentials)
        AWS_REGION=region,
        AWS_DEFAULT_REGION=region,
        SAM_CLI_TELEMETRY="0",
    )
    return env


def free_port(ports: Iterable[int]) -> int:
    """A port of ``ports`` nothing is bound to, picked at random so parallel runs rarely clash."""
    candidates = list(ports)
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {min(candidates)}-{max(candidates)}")


class LocalStackProcess:
    """`python -m emulator up --port N` in the background, its output kept in a bounded tail."""

    def __init__(
        self,
        port: int,
        *,
        config_file: str | Path | None = None,
        up_args: Iterable[str] = (),
        echo: Callable[[str], None] | None = None,
        log_path: Path | None = None,
        tail_lines: int = 200,
        region: str = REGION,
    ):
        self.port = port
        self.ca_bundle: str | None = None  # served over TLS (`up --tls`): what clients trust
        self.config_file = config_file
        self.up_args = list(up_args)  # more `up` flags, e.g. ["--duplicate-rate", "0.05"]
        self.echo = echo
        self.log_path = log_path
        self.region = region
        self.ready = threading.Event()
        self.process: subprocess.Popen[str] | None = None
        self.failed_invocations: list[FailedInvocation] = []
        self.stack_name: str | None = None  # the stack it deployed, from its `ready` line
        self.killed = False  # stop() had to kill it (no exit within the grace after SIGTERM)
        self.stop_seconds: float | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._reader: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"{'http' if self.ca_bundle is None else 'https'}://127.0.0.1:{self.port}"

    def client_environment(self) -> dict[str, str]:
        """What a client's shell sets to reach it: the endpoint, dummy credentials, the region
        and, over TLS, the authority to trust."""
        env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",  # the local stack's dummy credentials
            "AWS_DEFAULT_REGION": self.region,
        }
        if self.ca_bundle is not None:
            env["AWS_CA_BUNDLE"] = self.ca_bundle
        return env

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
            env.pop(name, None)
        env.update(
            PYTHONUNBUFFERED="1",
            EMULATOR_PORT=str(self.port),
            AWS_DEFAULT_REGION=self.region,
            AWS_REGION=self.region,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",  # noqa: S106 (local stack only)
        )
        return env

    def start(self, timeout: float = 90.0, ports: Iterable[int] | None = None) -> None:
        """Start it and wait for `ready`; RuntimeError (the process stopped) if it exits first or
        the deadline passes. ``tail()`` has its last lines. With ``ports`` (the range its port was
        picked from by ``free_port``): when another process bound the port between that probe
        and the stack's own bind (stacks started at once pick at once), it starts again on
        another free port of them, at most ``PORT_ATTEMPTS`` times in all."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once(timeout)
                return
            except RuntimeError:
                port_taken = any(PORT_TAKEN.search(line) for line in self.lines(5))
                if ports is None or not port_taken or attempt == PORT_ATTEMPTS:
                    raise
                self.port = free_port(ports)

    def _start_once(self, timeout: float) -> None:
        argv = [sys.executable, "-m", "emulator", "up", "--port", str(self.port)]
        if self.config_file:
            argv += ["--config-file", str(self.config_file)]
        argv += self.up_args
        self.process = subprocess.Popen(  # noqa: S603 (this interpreter, fixed argv)
            argv,
            cwd=ROOT,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, name="emulator-output", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.process.poll() is not None:
                self._reader.join(2)
                raise RuntimeError(
                    f"the local stack exited with {self.process.returncode} before `ready`"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local stack was not ready within {timeout:.0f} s")

    def _read(self) -> None:
        assert self.process and self.process.stdout
        log = None
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = self.log_path.open("w", encoding="utf-8")
        try:
            for raw in self.process.stdout:
                if log:
                    log.write(raw)
                    log.flush()
                self._line(raw.rstrip("\n"))
        finally:
            if log:
                log.close()

    def _line(self, line: str) -> None:
        self._output.append(line)
        if self.echo:
            self.echo(line)
        if failed := FAILED_INVOCATION.search(line):
            self.failed_invocations.append(
                FailedInvocation(failed["function"], failed["outcome"], int(failed["ms"]))
            )
        if line.startswith(TLS_LINE):
            self.ca_bundle = line.removeprefix(TLS_LINE)
        if line.startswith("ready"):
            self.stack_name = READY_STACK.search(line)[1]
            self.ready.set()

    def lines(self, count: int | None = None) -> list[str]:
        """The last ``count`` lines of its output (all that are kept with None)."""
        output = list(self._output)
        return output if count is None else output[-count:] if count > 0 else []

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.lines(lines))

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, wait ``grace`` seconds, then kill. Nothing if it is not running."""
        if not self.process or self.process.poll() is not None:
            return
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            self.killed = True
        self.stop_seconds = time.monotonic() - began
        if self._reader:
            self._reader.join(2)

    def control(self, path: str, body: dict | None = None) -> dict:
        """The control endpoint (/_emulator/...): GET without a body, POST with one."""
        request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 only)
            self.endpoint + path,
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        context = None
        if self.ca_bundle is not None:
            context = ssl.create_default_context(cafile=self.ca_bundle)
        with urllib.request.urlopen(request, timeout=10, context=context) as response:  # noqa: S310
            return json.loads(response.read() or b"{}")
