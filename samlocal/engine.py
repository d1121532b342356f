"""A container engine for `sam local`: the running one, or one this module installs and starts.

SAM CLI needs a Docker API. Where none answers and the machine is Debian with root (CI, these
development machines), Debian's `docker.io` is installed and `dockerd` started (and stopped
again when done). The functions are arm64: on another host architecture their images run under
qemu registered with binfmt_misc, set up here as well (see ensure_emulation).

`dockerd` runs with `--userland-proxy=false`: with the proxy, a published port accepts
connections before the emulated runtime in the container listens, SAM's first connect succeeds
against the proxy, and SAM reports "No response from invoke container" at once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from samlocal import debian
from samlocal.commands import CommandError, run

START_TIMEOUT_SECONDS = 60.0
BRIDGE_TIMEOUT_SECONDS = 10.0  # for the default bridge's gateway once the daemon answers
QEMU_MIN_VERSION = (8, 0)
# binfmt_misc entries: the ELF header of the architecture's executables (magic, mask), as qemu's.
_QEMU = {
    "arm64": (
        "qemu-aarch64",
        "7f454c460201010000000000000000000200b700",
        "ffffffffffffff00fffffffffffffffffeffffff",
    ),
    "x86_64": (
        "qemu-x86_64",
        "7f454c4602010100000000000000000002003e00",
        "ffffffffffffff00fffffffffffffffffeffffff",
    ),
}
_HOST = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "x86_64", "amd64": "x86_64"}
_BINFMT = Path("/proc/sys/fs/binfmt_misc")


class EngineError(CommandError):
    """No container engine, and none could be installed or started here."""


def _answers() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _install_docker() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise EngineError(
            "no container engine answers: start Docker (or run this as root on Debian)"
        )
    os.environ.setdefault("DEBIAN_FRONTEND", "noninteractive")
    run(["apt-get", "update", "-qq"])
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker.io"])


def ensure_emulation(architecture: str, work_dir: Path) -> None:
    """Make images of ``architecture`` run on this host: qemu registered with binfmt_misc.

    Debian 12's qemu (7.2) runs this runtime's cold start 3.5 times slower than Debian 13's
    (10.0; measured: boto3 import and one client, 19.8 s against 5.8 s), so an older registered
    qemu is replaced by Debian 13's, fetched as a package and registered with the fix-binary
    flag (the kernel holds the file open, so containers need no copy of it)."""
    if _HOST.get(platform.machine().lower()) == architecture:
        return
    name, magic, mask = _QEMU[architecture]
    entry = _BINFMT / name
    if entry.exists() and _qemu_version(entry) >= QEMU_MIN_VERSION:
        return
    if os.geteuid() != 0:
        raise EngineError(
            f"{architecture} images need qemu {QEMU_MIN_VERSION[0]}+ registered with binfmt_misc"
            f" ({name}); run this as root once, or register it yourself"
        )
    if not (_BINFMT / "register").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(_BINFMT)])
    host_arch = run(["dpkg", "--print-architecture"]).strip()
    unpacked = work_dir / "qemu"
    debian.unpack(debian.download(("qemu-user",), host_arch, work_dir / "apt"), unpacked)
    interpreter = (unpacked / "usr" / "bin" / name).resolve()
    if entry.exists():
        entry.write_text("-1")  # unregister the older one
    (_BINFMT / "register").write_text(
        f":{name}:M::{_escaped(magic)}:{_escaped(mask)}:{interpreter}:PF"
    )


def _escaped(hex_bytes: str) -> str:
    return "".join(f"\\x{hex_bytes[i : i + 2]}" for i in range(0, len(hex_bytes), 2))


def _qemu_version(entry: Path) -> tuple[int, ...]:
    lines = entry.read_text().splitlines()
    interpreter = next(
        (line.split(" ", 1)[1] for line in lines if line.startswith("interpreter ")), ""
    )
    try:
        probe = subprocess.run(
            [str(Path(interpreter).resolve()), "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return ()
    found = re.search(r"version (\d+)\.(\d+)", probe.stdout)
    return (int(found[1]), int(found[2])) if found else ()


def start(log_path: Path) -> subprocess.Popen[bytes] | None:
    """Make sure an engine answers; returns the daemon this call started (None: one answered)."""
    if _answers():
        return None
    if shutil.which("dockerd") is None:
        _install_docker()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        daemon = subprocess.Popen(
            ["dockerd", "--userland-proxy=false"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not _answers():
        if daemon.poll() is not None:
            raise EngineError(f"dockerd exited with {daemon.returncode}: see {log_path}")
        if time.monotonic() > deadline:
            stop(daemon)
            raise EngineError(f"dockerd did not answer within {START_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.5)
    return daemon


def stop(daemon: subprocess.Popen[bytes]) -> None:
    """Stop a daemon ``start`` started (and the containerd it runs)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(daemon.pid, signal.SIGTERM)
    try:
        daemon.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()


@contextlib.contextmanager
def running(log_path: Path) -> Iterator[None]:
    """An engine answering for the duration; one this call started is stopped at the end."""
    daemon = start(log_path)
    try:
        yield
    finally:
        if daemon is not None:
            stop(daemon)


def _bridge_gateways() -> list[str]:
    """The default bridge's IPv4 gateways. A daemon started for the first time on a machine was
    seen answering `network inspect` with the bridge's subnet and no gateway yet: asked again for
    a few seconds, then the subnet's first address, the one Docker gives the bridge."""
    deadline = time.monotonic() + BRIDGE_TIMEOUT_SECONDS
    while True:
        inspected = run(
            [
                "docker", "network", "inspect", "bridge",
                "--format", "{{range .IPAM.Config}}{{.Gateway}}|{{.Subnet}} {{end}}",
            ]
        )  # fmt: skip
        configs = [entry.partition("|") for entry in inspected.split()]
        gateways = [gateway for gateway, _, _ in configs if "." in gateway]  # IPv4
        if gateways:
            return gateways
        if time.monotonic() > deadline:
            subnets = [subnet for _, _, subnet in configs if "." in subnet]
            return [str(ipaddress.ip_network(subnet)[1]) for subnet in subnets]
        time.sleep(0.5)


def host_address_for_containers() -> str:
    """Where the local stack listens for SAM's containers besides loopback: the host's address on
    Docker's default bridge, which `--add-host host.docker.internal:host-gateway` gives them
    (not every interface: nothing else on the network reaches the stack). Where that gateway is
    not an address of this machine (Docker Desktop: it is the VM's), containers reach the
    host's loopback through host.docker.internal, and loopback it is."""
    gateways = _bridge_gateways()
    if not gateways:
        raise EngineError("Docker's bridge network has no IPv4 gateway or subnet")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((gateways[0], 0))
        except OSError:
            return "127.0.0.1"
    return gateways[0]
