"""Fixtures of the real SAM CLI suite: a container engine, the base image, the built application
byte-compiled, and a local stack listening where containers reach it.

Each is made sure of once per session: the engine that answers (or Debian's, installed and
started here, and stopped at the end), qemu for the arm64 images, the base image (pulled, or the
stand-in built from Debian packages: samlocal/base_image.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.process import LocalStackProcess, free_port
from harness.stack import StackClient
from samlocal import ARCHITECTURE, WORK, base_image, engine, sam
from samlocal.commands import CommandError
from tests.session_stack import running_stack

LOCAL_PORTS = range(4900, 5000)


@pytest.fixture(scope="session")
def invoke_base() -> Iterator[str]:
    """The base image's tag, with an engine running to use it."""
    try:
        engine.ensure_emulation(ARCHITECTURE, WORK / "emulation")
        with engine.running(WORK / "dockerd.log"):
            image = base_image.ensure(ARCHITECTURE, WORK / "base-image")
            sam.byte_compile_build()
            yield image
    except CommandError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def template(invoke_base: str) -> Path:
    return sam.emulation_template()


@pytest.fixture(scope="session")
def stack(invoke_base: str) -> Iterator[StackClient]:
    with running_stack(
        LocalStackProcess(
            free_port(LOCAL_PORTS), up_args=["--host", engine.host_address_for_containers()]
        )
    ) as client:
        yield client


@pytest.fixture(scope="session")
def credentials(stack: StackClient) -> dict[str, str]:
    """What SAM hands the functions (the local stack takes any key)."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": stack.client("lambda").meta.region_name,
    }


@pytest.fixture(scope="session")
def invoke_image(invoke_base: str, stack: StackClient) -> str:
    port = stack.client("lambda").meta.endpoint_url.rsplit(":", 1)[1]
    return sam.endpoint_image(invoke_base, f"http://{sam.HOST_FROM_CONTAINERS}:{port}")


@pytest.fixture(scope="session")
def env_vars_file(stack: StackClient, tmp_path_factory) -> Path:
    resources = stack.client("cloudformation").list_stack_resources(StackName=stack.name)
    functions = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in resources["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::Lambda::Function"
    }
    path = tmp_path_factory.mktemp("sam") / "env-vars.json"
    path.write_text(json.dumps(sam.env_vars(stack.client("lambda"), functions), indent=1))
    return path
