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
