"""Fixtures of the delivery tests: a moto server with the local stack's patches (one a module),
the AWS side on it, the scripted runtime, the fault switches and the engine, started in process
as `up` runs it (what else they share: support.py)."""

import logging
import socket
import time
import urllib.request

import pytest
from moto.server import ThreadedMotoServer

from emulator.core.faults import Faults
from emulator.delivery.engine import EventSourceMappingEngine
from emulator.process import REGION
from emulator.services import moto_patches
from tests.unit.emulator.delivery.support import Aws, FakeRuntime


def _free_port() -> int:
    for port in range(4700, 4800):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 4700-4799")


@pytest.fixture(scope="module")
def endpoint():
    moto_patches.install()  # the local stack's patches: moto's own ESM delivery switched off
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        moto_patches.uninstall()  # other test modules use plain moto in this process


@pytest.fixture
def aws(endpoint):
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    return Aws(endpoint)


@pytest.fixture
def runtime():
    return FakeRuntime()


@pytest.fixture
def faults():
    return Faults()


@pytest.fixture
def engine(endpoint, aws, runtime, faults):
    engines = []

    def start() -> EventSourceMappingEngine:
        # In process, as `up` runs it: the pollers read moto's backends and wait on wake-ups.
        esm = EventSourceMappingEngine(
            runtime,
            faults,
            region=REGION,
            endpoint_url=endpoint,
            refresh_interval=0.2,
            retry_delay=0.05,
        )
        esm.start()
        engines.append(esm)
        return esm

    yield start
    for esm in engines:
        started = time.monotonic()
        esm.stop()
        # promptly: well inside the pollers' 20 s idle wait, with room for a loaded machine
        assert time.monotonic() - started < 10, "stop() must return promptly"
