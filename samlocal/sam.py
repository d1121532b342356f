"""The real SAM CLI against the built application: `sam local invoke` and `sam local start-lambda`.

Functions reach a stack (the local one, or a deployed one) as they would when deployed: an
env-vars file holds each function's environment as the stack has it (Lambda
GetFunctionConfiguration), and an invoke image derived from the base image points the AWS SDK at
the stack's endpoint (AWS_ENDPOINT_URL: SAM passes a function only the variables its template
declares, so the endpoint goes in the image, not in the env-vars file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cfnlint.decode import cfn_yaml

from emulator.deploy.rules import chosen, template_conditions
from samlocal.commands import CommandError, run

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".aws-sam" / "build"
INVOKE_TIMEOUT_SECONDS = 300.0
# How containers reach services on the host: the name Docker Desktop gives the host, given on
# Linux too (Docker 20.10+ resolves host-gateway to the host's bridge address).
HOST_FROM_CONTAINERS = "host.docker.internal"
ADD_HOST = ["--add-host", f"{HOST_FROM_CONTAINERS}:host-gateway"]


# Emulated arm64 runs the functions about ten times slower than Lambda's Graviton (an Ingest cold
# start: 12.6 s under qemu 10, 1.2 s natively here), and slower again on a machine busy with other
# work (a 30 s RouteFunction cold start timed out in CI beside the unit tests): the suite invokes a
# copy of the built template with each Timeout this many times longer, and at least the floor
# (capped at Lambda's 900 s).
EMULATION_TIMEOUT_SCALE = 10
EMULATION_TIMEOUT_FLOOR_SECONDS = 180


class SamError(CommandError):
    """A sam command failed."""


def byte_compile_build() -> None:
    """Byte-compile the built functions and layers: SAM mounts the code read-only, so the
    container would otherwise compile every module on every cold start, under emulation."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "checked-hash",
            str(BUILD),
        ],
        check=True,
        capture_output=True,
    )


def emulation_template(scale: int = EMULATION_TIMEOUT_SCALE) -> Path:
    """The built template (as JSON, beside it) with every function's Timeout ``scale`` times, and
    at least the floor (a parameter's or a condition's value as the template's defaults give it)."""
    template = cfn_yaml.load(str(BUILD / "template.yaml"))
    defaults = {
        name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()
    }
    conditions = template_conditions(template, defaults)
    default = template.get("Globals", {}).get("Function", {}).get("Timeout", 3)
    for resource in template["Resources"].values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        properties = resource.setdefault("Properties", {})
        timeout = chosen(properties.get("Timeout", default), conditions)
        if isinstance(timeout, dict):  # {"Ref": parameter}
            timeout = defaults[timeout["Ref"]]
        properties["Timeout"] = min(900, max(int(timeout) * scale, EMULATION_TIMEOUT_FLOOR_SECONDS))
    path = BUILD / "template.emulated.json"
    path.write_text(json.dumps(template, indent=1))
    return path


def endpoint_image(base_image: str, endpoint_url: str) -> str:
    """An invoke image: ``base_image`` with the AWS SDK pointed at ``endpoint_url``."""
    digest = hashlib.sha256(f"{base_image} {endpoint_url}".encode()).hexdigest()[:12]
    tag = f"local/lambda-endpoint:{digest}"
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(
            f"FROM {base_image}\nENV AWS_ENDPOINT_URL={endpoint_url}\n"
        )
        run(
            ["docker", "build", "--quiet", "--tag", tag, context],
            env=_sam_env({"DOCKER_BUILDKIT": "0"}),
        )
    return tag


def env_vars(lambda_client, functions: dict[str, str]) -> dict[str, dict[str, str]]:
    """An env-vars file's content: each function's (logical id -> name) environment as deployed."""
    result = {}
    for logical_id, name in functions.items():
        config = lambda_client.get_function_configuration(FunctionName=name)
        variables = config.get("Environment", {}).get("Variables", {})
        result[logical_id] = {key: str(value) for key, value in variables.items()}
    return result


def _sam_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # SAM gives a container 20 s to open its runtime API's socket, then answers nothing (exit 0,
    # an empty payload): too short for an emulated cold start on a busy machine.
    env = dict(os.environ, SAM_CLI_TELEMETRY="0", SAM_CLI_CONTAINER_CONNECTION_TIMEOUT="120")
    env.pop("AWS_ENDPOINT_URL", None)  # sam itself calls no AWS API here
    env.update(extra or {})
    return env


def invoke(
    logical_id: str,
    event: Path,
    *,
    template: Path,
    env_vars_file: Path | None = None,
    invoke_image: str | None = None,
    credentials: dict[str, str] | None = None,
) -> dict:
    """`sam local invoke` of the built ``logical_id`` with ``event``: the function's response."""
    argv = ["sam", "local", "invoke", logical_id, "--event", str(event), "--skip-pull-image"]
    argv += ["--template", str(template), *ADD_HOST]
    if env_vars_file is not None:
        argv += ["--env-vars", str(env_vars_file)]
    if invoke_image is not None:
        argv += ["--invoke-image", invoke_image]
    stdout = run(argv, env=_sam_env(credentials), cwd=ROOT, timeout=INVOKE_TIMEOUT_SECONDS)
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise SamError(f"`{' '.join(argv)}` printed no response")
    return json.loads(lines[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def start_lambda(
    port: int,
    *,
    template: Path,
    env_vars_file: Path,
    invoke_image: str,
    credentials: dict[str, str],
    log_path: Path,
    timeout: float = 180.0,
) -> Iterator[str]:
    """`sam local start-lambda` keeping containers warm (each function's started at its first
    invoke, reused after); yields its endpoint for a boto3 Lambda client."""
    argv = [
        "sam", "local", "start-lambda", "--port", str(port), "--skip-pull-image",
        "--template", str(template), "--env-vars", str(env_vars_file),
        "--invoke-image", invoke_image, "--warm-containers", "LAZY", *ADD_HOST,
    ]  # fmt: skip
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        server = subprocess.Popen(
            argv, cwd=ROOT, env=_sam_env(credentials), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise SamError(f"sam local start-lambda did not listen: see {log_path}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()  # SAM stops and removes its warm containers on SIGTERM
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
