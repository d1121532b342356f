"""`python -m samlocal prepare`: everything `sam local invoke` needs here, then the command to run.

Makes sure of qemu for arm64 images, a container engine (a dockerd started here keeps running:
its pid is printed), the base image (pulled, or the stand-in built), the built application
byte-compiled, and the emulation template (timeouts scaled for emulated arm64, see sam.py).
Run `make build` (sam build) first.
"""

from __future__ import annotations

import argparse
import sys

from samlocal import ARCHITECTURE, WORK, base_image, engine, sam
from samlocal.commands import CommandError


def prepare() -> int:
    if not (sam.BUILD / "template.yaml").is_file():
        print("error: no .aws-sam/build: run `make build` first", file=sys.stderr)
        return 2
    try:
        engine.ensure_emulation(ARCHITECTURE, WORK / "emulation")
        daemon = engine.start(WORK / "dockerd.log")
        image = base_image.ensure(ARCHITECTURE, WORK / "base-image")
    except CommandError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    sam.byte_compile_build()
    template = sam.emulation_template()
    if daemon is not None:
        print(f"started dockerd (pid {daemon.pid}, log .samlocal/dockerd.log): kill it to stop")
    print(f"base image: {image}")
    print("try:")
    print(
        f"  sam local invoke IngestFunction -e events/sqs-s3-test-event.json --skip-pull-image"
        f" --template {template.relative_to(sam.ROOT)}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m samlocal", description=__doc__)
    parser.add_argument("command", choices=["prepare"])
    parser.parse_args(argv)
    return prepare()


if __name__ == "__main__":
    sys.exit(main())
