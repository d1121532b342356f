"""The real SAM CLI here: a container engine, the python3.13 base image (a stand-in built offline
where no registry answers), and `sam local invoke` / `start-lambda` against a stack."""

from pathlib import Path

ARCHITECTURE = "arm64"  # template.yaml's Globals
WORK = Path(__file__).resolve().parent.parent / ".samlocal"  # engine log, qemu, image build
