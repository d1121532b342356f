"""The targets: this project's local stack and the rival emulators a user would pick instead
that run without Docker, each installed from a hash lock (behaviour/targets/<name>.txt) into an
environment of its own (.tools/behaviour/<name>, `make behaviour-tools`)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from emulator.process import LocalStackProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".tools" / "behaviour"
LOCKS = Path(__file__).resolve().parent / "targets"
PORTS = range(4960, 4990)
READY_TIMEOUT = 90.0


@dataclass(frozen=True)
class Target:
    name: str
    package: str  # the PyPI package, pinned in LOCKS/<name>.txt; "" for this stack
    command: tuple[str, ...]  # argv after the environment's bin/, {port} filled in
    port_variable: str = ""  # an environment variable naming the port, where the CLI has none

    @property
    def version(self) -> str:
        if not self.package:
            return _local_version()
        lock = (LOCKS / f"{self.name}.txt").read_text()
        return re.search(rf"^{re.escape(self.package)}==(\S+)", lock, re.MULTILINE).group(1)


LOCAL = Target("local", "", ())
RIVALS = (
    Target("ministack", "ministack", ("ministack",), port_variable="GATEWAY_PORT"),
    Target("moto", "moto", ("moto_server", "-p", "{port}")),
)
TARGETS = (LOCAL, *RIVALS)
# What this stack does not do yet, by case: the reason (docs/local-stack.md, "Behaviour suite").
KNOWN_GAPS = {
    "pipe_batch_size_bounds_each_invocation": (
        "CreatePipe refuses a Lambda function target (event buses, SNS topics and state "
        "machines only)"
    ),
    "pipe_stream_retries_then_dead_letter_queue": (
        "CreatePipe refuses a Lambda function target (event buses, SNS topics and state "
        "machines only)"
    ),
}


def _local_version() -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH, fixed arguments
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    from importlib.metadata import version  # noqa: PLC0415

    return f"{commit or 'working tree'} (moto {version('moto')})"


@contextlib.contextmanager
def running(target: Target, log_dir: Path) -> Iterator[str]:
    """``target`` started on a free port and ready; its endpoint; stopped at the end."""
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port(PORTS)
    if target is LOCAL:
        local = LocalStackProcess(
            port, up_args=["--no-deploy"], log_path=log_dir / "local.log", tail_lines=100
        )
        local.start(READY_TIMEOUT, PORTS)
        try:
            yield local.endpoint
        finally:
            local.stop()
        return
    binary = TOOLS / target.name / "bin"
    if not (binary / target.command[0]).exists():
        raise FileNotFoundError(f"{binary / target.command[0]}: run `make behaviour-tools`")
    argv = [str(binary / target.command[0]), *(a.format(port=port) for a in target.command[1:])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if target.port_variable:
        env[target.port_variable] = str(port)
    with (log_dir / f"{target.name}.log").open("w") as log:
        process = subprocess.Popen(  # noqa: S603 - our pinned install, fixed arguments
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=log_dir
        )
        try:
            endpoint = f"http://127.0.0.1:{port}"
            _wait_listening(endpoint, process)
            yield endpoint
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def _wait_listening(endpoint: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode} before it listened")
        try:
            urllib.request.urlopen(endpoint, timeout=2)  # noqa: S310 - our own endpoint
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"not listening on {endpoint} after {READY_TIMEOUT:.0f} s")
