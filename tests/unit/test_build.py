"""`make build` as `make up` and `make run` call it: sam build again only when what it builds
changed (a running stack's .aws-sam/build is not rewritten under it), and two at once do not fail
inside sam build: the second waits for the first and finds its build up to date. The Makefile's
own recipe, in a scratch directory, with a stand-in `sam` that fails as the real one did when two
ran at once ([Errno 17] File exists)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from harness.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
# What the stand-in does: refuse to run beside another (the real one's [Errno 17]), take a
# moment, write the built template, count itself.
FAKE_SAM = """#!/bin/bash
set -eu
mkdir .aws-sam/building 2>/dev/null || { echo "[Errno 17] File exists: .aws-sam/building"; exit 1; }
sleep 1.5
mkdir -p .aws-sam/build && echo built > .aws-sam/build/template.yaml
echo run >> sam-runs
rmdir .aws-sam/building
"""


def scratch(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in (
        "template.yaml",
        "samconfig.toml",
        "functions/survey/app.py",
        "layers/shared/x.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    sam = tmp_path / ".tools" / "bin" / "sam"  # the Makefile puts .tools/bin first on PATH
    sam.parent.mkdir(parents=True)
    sam.write_text(FAKE_SAM)
    sam.chmod(0o755)
    return tmp_path


def make_build(directory: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ["make", "--no-print-directory", "-o", "setup", "build"],
        cwd=directory,
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(build: subprocess.Popen) -> str:
    output, _ = build.communicate(timeout=60)
    assert build.returncode == 0, output
    return output


def test_two_builds_at_once_build_once_and_an_unchanged_source_builds_nothing(tmp_path):
    directory = scratch(tmp_path)
    runs = directory / "sam-runs"

    first = make_build(directory)
    # the first holds the lock and runs sam (the stand-in marks that it is building)
    eventually((directory / ".aws-sam" / "building").exists, timeout=30, interval=0.05)
    second = make_build(directory)
    outputs = [finished(first), finished(second)]
    assert runs.read_text().splitlines() == ["run"]
    assert "another build is running (.aws-sam/build): waiting for it" in outputs[1]
    assert outputs[1].rstrip().endswith("sam build: up to date")

    # a stack's run writes bytecode beside the sources: not a change
    cache = directory / "functions" / "survey" / "__pycache__" / "app.cpython-313.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"")
    assert finished(make_build(directory)).rstrip().endswith("sam build: up to date")
    assert len(runs.read_text().splitlines()) == 1

    later = time.time() + 5
    os.utime(directory / "functions" / "survey" / "app.py", (later, later))
    assert "sam build" in finished(make_build(directory))
    assert len(runs.read_text().splitlines()) == 2
