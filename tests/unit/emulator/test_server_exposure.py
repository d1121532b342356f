"""Who can reach the local stack (issue 21, item 12): it listens on loopback (and on the one
address `up --host` names, for containers), serves only requests addressed to a local name, and
lets no web page of another origin read its answers (moto's global CORS is off)."""

import http.client
import json
from collections.abc import Iterator

import pytest

from emulator.server import EmulatorServer

CONTAINERS_ADDRESS = "127.0.0.2"  # stands for the docker bridge's gateway: a second local address


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    running = EmulatorServer(0, host=CONTAINERS_ADDRESS)
    running.start()
    yield running
    running.stop()


def request(server, method: str, path: str, headers: dict, address: str = "127.0.0.1"):
    port = server.get_host_and_port()[1]
    connection = http.client.HTTPConnection(address, port, timeout=10)
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


LIST_QUEUES = "/?Action=ListQueues&Version=2012-11-05"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "[::1]", "host.docker.internal", CONTAINERS_ADDRESS, "b.localhost"],
)
def test_a_request_to_a_local_name_is_served(server, host):
    port = server.get_host_and_port()[1]
    status, _, _ = request(server, "GET", "/_emulator/status", {"Host": f"{host}:{port}"})
    assert status == 200


@pytest.mark.parametrize("host", ["attacker.example", "127.0.0.1.attacker.example", "localhost.x"])
def test_a_request_to_any_other_name_is_refused(server, host):
    """A page on attacker.example that resolves to 127.0.0.1 (DNS rebinding) reaches no API."""
    for path in ("/_emulator/status", LIST_QUEUES, "/moto-api/data.json"):
        status, _, body = request(server, "GET", path, {"Host": host})
        assert status == 403, path
        assert json.loads(body) == {"message": f"Host {host!r} is not a local name of this stack"}


def test_no_origin_is_allowed_to_read_an_answer(server):
    origin = {"Origin": "https://attacker.example", "Host": "localhost"}
    _, headers, _ = request(server, "GET", LIST_QUEUES, origin)
    preflight = origin | {"Access-Control-Request-Method": "POST"}
    _, preflight_headers, _ = request(server, "OPTIONS", "/", preflight)
    for answer in (headers, preflight_headers):
        assert not {name.lower() for name in answer} & {
            "access-control-allow-origin",
            "access-control-allow-credentials",
        }, answer


def test_containers_reach_it_on_the_named_address_only(server):
    port = server.get_host_and_port()[1]
    status, _, _ = request(
        server, "GET", "/_emulator/status", {"Host": f"{CONTAINERS_ADDRESS}:{port}"},
        address=CONTAINERS_ADDRESS,
    )  # fmt: skip
    assert status == 200
    assert server.endpoint_url == f"http://127.0.0.1:{port}"  # the workers' and the tests' own
    with pytest.raises(OSError):  # not on every interface: another local address is not bound
        request(server, "GET", "/_emulator/status", {"Host": "localhost"}, address="127.0.0.3")


@pytest.mark.parametrize("everywhere", ["0.0.0.0", "::"])
def test_every_interface_is_refused(everywhere):
    server = EmulatorServer(0, host=everywhere)
    with pytest.raises(OSError, match="will not listen on every interface"):
        server.start()
