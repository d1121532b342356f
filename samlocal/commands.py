"""Running the tools samlocal drives (docker, apt-get, dpkg-deb, sam, uv), failing one way."""

from __future__ import annotations

import subprocess
from typing import Any


class CommandError(RuntimeError):
    """A command failed, or something samlocal needs is missing; the message says which and why."""


def run(argv: list[str], *, binary: bool = False, **kwargs: Any) -> Any:
    """``argv``'s standard output (bytes when ``binary``); CommandError with the tail of its
    output when it exits non-zero."""
    result = subprocess.run(argv, capture_output=True, text=not binary, check=False, **kwargs)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        if binary:
            output = output.decode(errors="replace")
        raise CommandError(f"`{' '.join(argv)}` exited {result.returncode}:\n{output[-3000:]}")
    return result.stdout
