"""The local stack's connections (emulator/server.py): HTTP/1.1 with keep-alive, as AWS's
endpoints answer, so a client's calls share one connection (werkzeug's development server closed
each after one answer). A request's body ends where its length or chunked encoding says, read to
its end whether the app read it or not, so the next request on the connection is read whole."""

import http.client
import json
import socket
import threading
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

from emulator.server import EmulatorServer, _listener

HOST = {"Host": "localhost"}


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    running = EmulatorServer(0)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def connection(server) -> Iterator[http.client.HTTPConnection]:
    opened = http.client.HTTPConnection("127.0.0.1", server.get_host_and_port()[1], timeout=10)
    yield opened
    opened.close()


def answer(connection, method: str, path: str, body=None, headers=None):
    connection.request(method, path, body=body, headers={**HOST, **(headers or {})})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def test_a_connection_carries_request_after_request(connection):
    for _ in range(3):
        status, headers, body = answer(connection, "GET", "/_emulator/status")
        assert status == 200 and json.loads(body)["ready"] is False
        assert headers.get("Connection", "").lower() != "close"
        assert int(headers["Content-Length"]) == len(body)
    assert connection.sock is not None  # never closed by the server


def test_a_body_the_app_leaves_unread_does_not_spill_into_the_next_request(connection):
    unread = b"GET /_emulator/nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n"  # looks like a request
    status, _, _ = answer(connection, "GET", "/_emulator/status", body=unread)
    assert status == 200
    status, _, body = answer(connection, "GET", "/_emulator/status")
    assert status == 200 and "ready" in json.loads(body)


def test_a_chunked_body_is_read_to_its_end(connection):
    faults = json.dumps({"duplicate_rate": 0.0}).encode()
    chunked = iter([faults[:5], faults[5:]])  # http.client sends an iterable chunked
    status, _, body = answer(connection, "POST", "/_emulator/faults", body=chunked)
    assert status == 200, body
    assert answer(connection, "GET", "/_emulator/status")[0] == 200


def test_a_head_answer_keeps_the_objects_length_and_has_no_body(server):
    s3 = boto3.client(
        "s3",
        endpoint_url=server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),  # a broken connection is not retried away
    )
    s3.create_bucket(Bucket="connections")
    s3.put_object(Bucket="connections", Key="k", Body=b"12345")
    for _ in range(2):  # on the pool's one connection, a stray body would break the GET
        assert s3.head_object(Bucket="connections", Key="k")["ContentLength"] == 5
        assert s3.get_object(Bucket="connections", Key="k")["Body"].read() == b"12345"


def test_an_app_that_fails_answers_500_and_ends_the_connection():
    def failing(environ, start_response):
        raise RuntimeError("a bug in a handler")

    listener = _listener("127.0.0.1", 0, failing, None)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        opened = http.client.HTTPConnection("127.0.0.1", listener.server_address[1], timeout=10)
        status, headers, body = answer(opened, "POST", "/", body=b"unread")
        assert (status, headers["Connection"], body) == (500, "close", b"Internal Server Error")
        assert opened.sock is None  # the client closed it, as the answer said
    finally:
        listener.shutdown()
        listener.server_close()


def test_a_client_expecting_100_continue_gets_it_once_and_then_the_answer(server):
    with socket.create_connection(("127.0.0.1", server.get_host_and_port()[1]), 10) as raw:
        raw.sendall(
            b"POST /_emulator/faults HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        assert raw.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"  # once
        raw.sendall(b"{}")
        answer_bytes = b""
        while b"\r\n\r\n" not in answer_bytes:
            answer_bytes += raw.recv(4096)
        assert answer_bytes.startswith(b"HTTP/1.1 200 ")  # the answer, not a second 100


def raw_answer(server, request: bytes) -> bytes:
    """What the server sends back for ``request`` on a connection of its own, until it closes
    the connection or the first answer is whole."""
    with socket.create_connection(("127.0.0.1", server.get_host_and_port()[1]), 10) as raw:
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
            head, _, body = received.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                None,
            )
            if length is not None and len(body) >= length:
                break
        return received


def test_headers_are_read_in_any_case_and_a_folded_one_as_one_value(server):
    answer_bytes = raw_answer(
        server,
        b"POST /_emulator/faults HTTP/1.1\r\nhOsT: localhost\r\nContent-Type: application/json\r\n"
        b"X-Folded: first\r\n  second\r\nCONTENT-LENGTH: 2\r\n\r\n{}",
    )
    assert answer_bytes.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /_emulator/status HTTP/2.0\r\nHost: localhost\r\n\r\n", b"505"),
        (b"GET /_emulator/status HTTX/1.1\r\nHost: localhost\r\n\r\n", b"400"),
        (b"GET /_emulator/status HTTP/1.x\r\nHost: localhost\r\n\r\n", b"400"),
        (b"GET /_emulator/status extra HTTP/1.1\r\nHost: localhost\r\n\r\n", b"400"),
        (b"GET /_emulator/status\r\n\r\n", b"400"),  # HTTP/0.9: no AWS client speaks it
        (
            b"GET /_emulator/status HTTP/1.1\r\nHost: localhost\r\n"
            + b"".join(b"X-%d: v\r\n" % n for n in range(101))
            + b"\r\n",
            b"431",
        ),
        (b"GET /_emulator/status HTTP/1.1\r\nX-Long: " + b"v" * 70000 + b"\r\n\r\n", b"431"),
    ],
)
def test_a_request_http_does_not_allow_is_refused_and_its_connection_closed(
    server, request_bytes, status
):
    answer_bytes = raw_answer(server, request_bytes)
    assert answer_bytes.split(b" ")[1] == status
    assert b"Connection: close" in answer_bytes


@pytest.mark.parametrize(
    ("version", "connection_header", "closed"),
    [
        (b"HTTP/1.1", b"", False),
        (b"HTTP/1.1", b"Connection: close\r\n", True),
        (b"HTTP/1.0", b"", True),
        (b"HTTP/1.0", b"Connection: keep-alive\r\n", False),
    ],
)
def test_a_connection_stays_open_as_its_version_and_connection_header_say(
    server, version, connection_header, closed
):
    with socket.create_connection(("127.0.0.1", server.get_host_and_port()[1]), 10) as raw:
        request = b"GET /_emulator/status " + version + b"\r\nHost: localhost\r\n"
        raw.sendall(request + connection_header + b"\r\n")
        raw.settimeout(3)
        received = b""
        try:
            while chunk := raw.recv(65536):
                received += chunk
        except TimeoutError:  # still open: nothing more came
            assert not closed
        else:
            assert closed  # the server ended the connection after its answer
        assert received.startswith(version.replace(b"1.0", b"1.1") + b" 200 ")
