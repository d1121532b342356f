"""The base image `sam local` builds its invoke images from, built offline where none can be pulled.

SAM CLI builds each function's invoke image FROM public.ecr.aws/lambda/python:3.13-<arch>. Where
that image is not on the machine and no registry answers, a stand-in is built under the same tag:

- Debian 13 (trixie) packages of the architecture: python3.13 and what it links, libstdc++ (for
  awslambdaric's native client), a shell and
  coreutils (SAM's Dockerfile runs `mv` and `chmod`), unpacked without running their maintainer
  scripts, which under emulation take minutes;
- the packages the local stack's workers get (emulator/lambda_/runtime-requirements.txt:
  awslambdaric, the runtime's boto3) from PyPI's wheels for the architecture, in /var/runtime;
- the Runtime Interface Emulator that ships in the aws-sam-cli wheel, at /usr/local/bin;
- Lambda's layout: /var/task, /opt, /var/lang/bin/python3.13, /var/runtime/bootstrap (runs
  awslambdaric on $_HANDLER with Lambda's module search path) and /lambda-entrypoint.sh (the RIE
  when run outside Lambda, else the bootstrap).

Everything Python is byte-compiled on the host first (CPython 3.13 bytecode is the same on every
architecture): under emulation compiling on import costs seconds per cold start. The stand-in is
labelled with a hash of its recipe (this file and the runtime's requirements): a changed recipe
builds it again; an image without the label (the real one, pulled) is used as it is.
How it differs from AWS's image: docs/local-run.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from emulator.lambda_.packages import REQUIREMENTS
from samlocal import debian
from samlocal.commands import CommandError, run

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("python3.13", "libstdc++6", "dash", "coreutils", "tzdata")
PULL_TIMEOUT_SECONDS = 120.0
RECIPE_LABEL = "local.stand-in-recipe"
# Lambda's python3.13 module search path: function code, layers, then the runtime's packages.
LAMBDA_PYTHONPATH = (
    "/var/task:/opt/python/lib/python3.13/site-packages:/opt/python"
    ":/var/lang/lib/python3.13/site-packages:/var/runtime"
)


@dataclass(frozen=True)
class Architecture:
    name: str  # Lambda's
    debian: str
    wheel_platform: str  # uv's --python-platform
    docker_platform: str

    @property
    def image(self) -> str:
        return f"public.ecr.aws/lambda/python:3.13-{self.name}"


ARCHITECTURES = {
    "arm64": Architecture("arm64", "arm64", "aarch64-manylinux_2_28", "linux/arm64"),
    "x86_64": Architecture("x86_64", "amd64", "x86_64-manylinux_2_28", "linux/amd64"),
}

BOOTSTRAP = f"""\
#!/bin/sh
# The python3.13 runtime: the runtime interface client on the function's handler.
export PYTHONPATH="{LAMBDA_PYTHONPATH}${{PYTHONPATH:+:$PYTHONPATH}}"
exec /var/lang/bin/python3.13 -m awslambdaric "${{_HANDLER:-$1}}"
"""
ENTRYPOINT = """\
#!/bin/sh
# As in Lambda's base images: outside Lambda, the Runtime Interface Emulator runs the bootstrap.
if [ -z "${AWS_LAMBDA_RUNTIME_API}" ]; then
  exec /usr/local/bin/aws-lambda-rie /var/runtime/bootstrap "$@"
fi
exec /var/runtime/bootstrap "$@"
"""
ETC_FILES = {
    "etc/passwd": (
        "root:x:0:0:root:/root:/bin/sh\nsbx_user1051:x:993:990::/home/sbx_user1051:/sbin/nologin\n"
    ),
    "etc/group": "root:x:0:\nsbx_user1051:x:990:\n",
}


class ImageError(CommandError):
    """The base image is missing and could not be built."""


def recipe_hash() -> str:
    recipe = [Path(__file__), Path(debian.__file__), REQUIREMENTS]
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in recipe))
    return digest.hexdigest()[:16]


def _label(image: str) -> str | None:
    """The image's recipe label ('' for an image without one); None when it is not here."""
    label_of = f'{{{{index .Config.Labels "{RECIPE_LABEL}"}}}}'
    probe = subprocess.run(
        ["docker", "image", "inspect", "--format", label_of, image],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return None
    label = probe.stdout.strip()
    return "" if label == "<no value>" else label


def ensure(architecture: str, work_dir: Path, log=print) -> str:
    """The base image's tag, present locally: as found, pulled, or built as a stand-in."""
    arch = ARCHITECTURES[architecture]
    label = _label(arch.image)
    if label == "" or label == recipe_hash():
        return arch.image
    if label is None:
        try:
            subprocess.run(
                ["docker", "pull", "--platform", arch.docker_platform, arch.image],
                capture_output=True,
                check=True,
                timeout=PULL_TIMEOUT_SECONDS,
            )
            return arch.image
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            log(f"{arch.image}: no registry answers; building a stand-in from Debian packages")
    else:
        log(f"{arch.image}: the stand-in's recipe changed; building it again")
    build(arch, work_dir)
    return arch.image


def _unpack_packages(arch: Architecture, work_dir: Path, rootfs: Path) -> None:
    # Debian 13 is merged-/usr: /bin, /sbin and /lib are links into /usr.
    for link in ("bin", "sbin", "lib"):
        (rootfs / "usr" / link).mkdir(parents=True, exist_ok=True)
        (rootfs / link).symlink_to(f"usr/{link}")
    debian.unpack(debian.download(PACKAGES, arch.debian, work_dir / "apt"), rootfs)


def _rie(arch: Architecture) -> Path:
    sam = shutil.which("sam")
    if sam is None:
        raise ImageError("sam (aws-sam-cli) not on PATH: `make setup` installs it under .tools")
    sam_python = Path(sam).resolve().parent / "python"
    found = run(
        [str(sam_python), "-c", "import samcli, os; print(os.path.dirname(samcli.__file__))"]
    )
    rie = Path(found.strip()) / "local" / "rapid" / f"aws-lambda-rie-{arch.name}"
    if not rie.is_file():
        raise ImageError(
            f"{rie}: the aws-sam-cli wheel has no Runtime Interface Emulator for {arch.name}"
        )
    return rie


def _write(rootfs: Path, relative: str, text: str, mode: int = 0o644) -> None:
    path = rootfs / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _lay_out(arch: Architecture, rootfs: Path) -> None:
    for directory in (
        "var/task",
        "opt",
        "var/lang/lib/python3.13/site-packages",
        "var/lang/bin",
        "tmp",
    ):
        (rootfs / directory).mkdir(parents=True, exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)
    for name in ("python3.13", "python3", "python"):
        (rootfs / "var/lang/bin" / name).symlink_to("/usr/bin/python3.13")
    run(
        [
            "uv", "pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:",
            "--python-version", "3.13", "--python-platform", arch.wheel_platform,
            "--target", str(rootfs / "var/runtime"), "-r", str(REQUIREMENTS),
        ]
    )  # fmt: skip
    _write(rootfs, "var/runtime/bootstrap", BOOTSTRAP, 0o755)
    _write(rootfs, "lambda-entrypoint.sh", ENTRYPOINT, 0o755)
    rie = rootfs / "usr/local/bin/aws-lambda-rie"
    rie.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_rie(arch), rie)
    rie.chmod(0o755)
    for relative, text in ETC_FILES.items():
        _write(rootfs, relative, text)
    # The host's CPython 3.13 writes the bytecode the image's 3.13 reads; the image never changes,
    # so unchecked pycs (no source check at import).
    for tree in ("usr/lib/python3.13", "var/runtime"):
        subprocess.run(
            [
                sys.executable, "-m", "compileall", "-q", "-j", "0",
                "--invalidation-mode", "unchecked-hash",
                "-s", str(rootfs), "-p", "/", str(rootfs / tree),
            ],
            check=False,  # test files with deliberate syntax errors do not compile
            capture_output=True,
        )  # fmt: skip


DOCKERFILE = """\
FROM scratch
ADD rootfs.tar /
ENV LANG=en_US.UTF-8 TZ=:/etc/localtime \\
    PATH=/var/lang/bin:/usr/local/bin:/usr/bin:/bin \\
    LAMBDA_TASK_ROOT=/var/task LAMBDA_RUNTIME_DIR=/var/runtime
WORKDIR /var/task
ENTRYPOINT ["/lambda-entrypoint.sh"]
"""


def build(arch: Architecture, work_dir: Path) -> None:
    """Build the stand-in base image for ``arch`` and tag it as the real one."""
    if work_dir.exists():
        shutil.rmtree(work_dir)
    rootfs = work_dir / "rootfs"
    rootfs.mkdir(parents=True)
    _unpack_packages(arch, work_dir, rootfs)
    _lay_out(arch, rootfs)
    context = work_dir / "context"
    context.mkdir()
    with tarfile.open(context / "rootfs.tar", "w") as archive:
        for entry in sorted(rootfs.iterdir()):
            archive.add(entry, arcname=entry.name)
    (context / "Dockerfile").write_text(
        DOCKERFILE + f'LABEL {RECIPE_LABEL}="{recipe_hash()}"\n'
        f'LABEL org.opencontainers.image.description="stand-in for {arch.image}: Debian '
        f'{debian.SUITE} + awslambdaric, not Amazon Linux"\n'
    )
    run(
        ["docker", "build", "--platform", arch.docker_platform, "--tag", arch.image, str(context)],
        env={**os.environ, "DOCKER_BUILDKIT": "0"},  # the classic builder: no buildx needed
    )
    shutil.rmtree(work_dir)


def main() -> None:
    print(ensure(sys.argv[1] if len(sys.argv) > 1 else "arm64", ROOT / ".samlocal" / "base-image"))


if __name__ == "__main__":
    main()
