"""Debian 13 (trixie) packages of any architecture, fetched and unpacked without installing them.

A private apt root (its own sources, lists and an empty dpkg status) resolves the packages and
their dependencies and downloads them; unpacking extracts their files only. Maintainer scripts
never run: for a foreign architecture they would run under emulation, for minutes.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from samlocal.commands import run

SUITE = "trixie"
MIRROR = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


def download(packages: tuple[str, ...], architecture: str, apt_root: Path) -> list[Path]:
    """``packages`` and everything they depend on (recommends left out), as .deb files."""
    apt_root = apt_root.resolve()
    for sub in ("etc/apt/preferences.d", "var/lib/apt/lists/partial", "var/lib/dpkg"):
        (apt_root / sub).mkdir(parents=True, exist_ok=True)
    (apt_root / "var/lib/dpkg/status").touch()
    (apt_root / "etc/apt/sources.list").write_text(
        f"deb [arch={architecture} signed-by={KEYRING}] {MIRROR} {SUITE} main\n"
    )
    archives = apt_root / "archives"
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    options = [
        f"-oDir={apt_root}",
        f"-oDir::State::status={apt_root}/var/lib/dpkg/status",
        f"-oDir::Cache::archives={archives}",
        f"-oAPT::Architecture={architecture}",
        f"-oAPT::Architectures::={architecture}",
        "-oAPT::Install-Recommends=false",
        "-oDebug::NoLocking=1",
    ]
    run(["apt-get", *options, "update", "-qq"])
    run(["apt-get", *options, "install", "-y", "-qq", "--download-only", *packages])
    return sorted(archives.glob("*.deb"))


def unpack(debs: list[Path], root: Path) -> None:
    """Extract the files of ``debs`` under ``root``, keeping links to directories that exist
    (merged /usr: /bin, /sbin and /lib link into /usr)."""
    for deb in debs:
        contents = run(["dpkg-deb", "--fsys-tarfile", str(deb)], binary=True)
        with tarfile.open(fileobj=io.BytesIO(contents)) as archive:
            for member in archive.getmembers():
                if member.isdir() and (root / member.name).is_symlink():
                    continue
                archive.extract(member, root, filter="fully_trusted")
