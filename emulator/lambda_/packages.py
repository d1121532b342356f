"""What Lambda's python runtime puts beside a function: the packages of runtime-requirements.txt.

A worker runs the interpreter without its site-packages (``-S``), so it imports only what Lambda
would give it: the function's code, its layers (``/opt/python`` semantics) and these packages
(the runtime interface client and the runtime's boto3), then the standard library. A package the
layer lacks fails to import here as on AWS (``Runtime.ImportModuleError``), instead of being
found in the development environment.

The packages are installed once per content of the requirements file, for this interpreter,
under ``.emulator/lambda-runtime/`` (with uv, which runs the project; PyPI or uv's cache).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).resolve().with_name("runtime-requirements.txt")
CACHE = ROOT / ".emulator" / "lambda-runtime"


def layer_path(layer_dir: Path) -> list[Path]:
    """A layer's importable directories, as Lambda puts /opt/python on the path."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = layer_dir / "lib" / version / "site-packages"
    return [site, layer_dir] if site.is_dir() else [layer_dir]


def packages_dir() -> Path:
    """The runtime's packages, installed for this interpreter (once per requirements content)."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes() + sys.version.encode()).hexdigest()[:12]
    target = CACHE / f"python{sys.version_info.major}.{sys.version_info.minor}-{digest}"
    if target.is_dir():
        return target
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError(f"uv not found: it installs {REQUIREMENTS} for the function workers")
    staging = CACHE / f".{target.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    result = subprocess.run(  # noqa: S603 - uv, fixed arguments
        [uv, "pip", "install", "--quiet", "--no-deps", "--python", sys.executable,
         "--target", str(staging), "-r", str(REQUIREMENTS)],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"cannot install {REQUIREMENTS}:\n{result.stderr}")
    try:
        staging.rename(target)
    except OSError:  # another process installed it first
        shutil.rmtree(staging, ignore_errors=True)
    return target
