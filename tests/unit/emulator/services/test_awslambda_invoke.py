"""Lambda Invoke's limits (emulator/services/awslambda.py), moto in process through
boto3, the function run by a scripted runtime (no worker process): request payload limits (HTTP 413
RequestEntityTooLargeException before anything runs), the response size limit
(Function.ResponseSizeTooLarge), and asynchronous invocations retried twice, then given up."""

import json
import logging
import threading
import time
from collections.abc import Callable

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.lambda_.workers import InvokeResult
from emulator.process import REGION
from emulator.services import awslambda, context
from tests.unit.emulator.support import create_function

FUNCTION = "worker"
REQUEST_LIMIT = 6_291_456  # 6 MB, RequestResponse
ASYNC_REQUEST_LIMIT = 1_048_576  # 1 MB, Event
RESPONSE_LIMIT = 6_291_556  # what Lambda enforces and names in Function.ResponseSizeTooLarge
RETRY_DELAYS = (0.02, 0.04)  # AWS: about 1 and 2 minutes; locally ASYNC_RETRY_DELAYS seconds


class FakeRuntime:
    """Knows one function; ``behaviour(event, attempt)`` returns the function's response (bytes,
    as the runtime posted it) or raises to make the invocation fail (an Unhandled error)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[tuple[str, bytes, float]] = []
        self.behaviour: Callable[[bytes, int], bytes] = lambda event, attempt: b"null"
        self.called = threading.Condition(self.lock)

    def resolve(self, function_name: str) -> object | None:
        return object() if function_name == FUNCTION else None

    def invoke(self, function_name: str, event: bytes) -> InvokeResult:
        with self.lock:
            attempt = len(self.calls)
            self.calls.append((function_name, event, time.monotonic()))
            self.called.notify_all()
        try:
            raw = self.behaviour(event, attempt)
        except Exception as error:
            document = {"errorType": type(error).__name__, "errorMessage": str(error)}
            return InvokeResult(False, None, document, raw=json.dumps(document).encode())
        return InvokeResult(True, json.loads(raw), None, raw=raw)

    def wait_for_calls(self, count: int, timeout: float = 30.0) -> None:
        with self.lock:
            if not self.called.wait_for(lambda: len(self.calls) >= count, timeout):
                raise AssertionError(f"{len(self.calls)} invocations, expected {count}")


pytestmark = pytest.mark.usefixtures("moto_patched")


@pytest.fixture(scope="module")
def lam(module_credentials):
    return boto3.client("lambda", region_name=REGION), boto3.client("iam", region_name=REGION)


@pytest.fixture
def runtime(monkeypatch):
    fake = FakeRuntime()
    monkeypatch.setattr(awslambda, "ASYNC_RETRY_DELAYS", RETRY_DELAYS)
    context.set_runtime(fake)
    yield fake
    context.set_runtime(None)


@pytest.fixture
def client(lam, runtime):
    lambda_client, iam = lam
    with mock_aws():
        create_function(lambda_client, iam, FUNCTION)
        yield lambda_client


def json_of_size(size: int) -> bytes:
    """A JSON document of exactly ``size`` bytes."""
    document = b'{"data":"' + b"x" * (size - 11) + b'"}'
    assert len(document) == size
    return document


def refused_as_too_large(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    response = caught.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert response["Error"]["Code"] == "RequestEntityTooLargeException"
    return response["Error"]["Message"]


# --- request payload limits ----------------------------------------------------------------------


def test_a_request_payload_over_6_mb_is_refused_before_anything_runs(client, runtime):
    message = refused_as_too_large(
        lambda: client.invoke(FunctionName=FUNCTION, Payload=json_of_size(REQUEST_LIMIT + 1))
    )
    assert str(REQUEST_LIMIT) in message
    assert runtime.calls == []


def test_a_request_payload_of_exactly_6_mb_runs(client, runtime):
    response = client.invoke(FunctionName=FUNCTION, Payload=json_of_size(REQUEST_LIMIT))
    assert response["StatusCode"] == 200
    assert "FunctionError" not in response
    assert len(runtime.calls) == 1
    assert len(runtime.calls[0][1]) == REQUEST_LIMIT


def test_an_event_payload_over_1_mb_is_refused_before_anything_runs(client, runtime):
    message = refused_as_too_large(
        lambda: client.invoke(
            FunctionName=FUNCTION,
            InvocationType="Event",
            Payload=json_of_size(ASYNC_REQUEST_LIMIT + 1),
        )
    )
    assert "Event" in message
    assert str(ASYNC_REQUEST_LIMIT) in message
    # An accepted Event after it runs; had the refused one been started in the background too,
    # it would have run first.
    client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"after": 1}')
    runtime.wait_for_calls(1)
    assert [event for _, event, _ in runtime.calls] == [b'{"after": 1}']


def test_an_event_payload_of_exactly_1_mb_is_accepted(client, runtime):
    response = client.invoke(
        FunctionName=FUNCTION, InvocationType="Event", Payload=json_of_size(ASYNC_REQUEST_LIMIT)
    )
    assert response["StatusCode"] == 202
    runtime.wait_for_calls(1)
    assert len(runtime.calls[0][1]) == ASYNC_REQUEST_LIMIT


def test_a_request_response_payload_over_1_mb_is_not_held_to_the_event_limit(client, runtime):
    response = client.invoke(FunctionName=FUNCTION, Payload=json_of_size(ASYNC_REQUEST_LIMIT + 1))
    assert response["StatusCode"] == 200
    assert len(runtime.calls) == 1


# --- response size limit -------------------------------------------------------------------------


def test_a_response_over_the_limit_is_a_response_size_too_large_function_error(client, runtime):
    runtime.behaviour = lambda event, attempt: json_of_size(RESPONSE_LIMIT + 1)

    response = client.invoke(FunctionName=FUNCTION, Payload=b"{}")

    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    error = json.loads(response["Payload"].read())
    assert error == {
        "errorType": "Function.ResponseSizeTooLarge",
        "errorMessage": "Response payload size exceeded maximum allowed payload size "
        f"({RESPONSE_LIMIT} bytes).",
    }
    assert len(runtime.calls) == 1


@pytest.mark.parametrize("size", [6_100_000, RESPONSE_LIMIT], ids=["6.1MB", "limit"])
def test_a_response_up_to_the_limit_is_returned_whole(client, runtime, size):
    # moto's own Invoke handler fails any response over 6,000,000 bytes: below Lambda's limit.
    body = json_of_size(size)
    runtime.behaviour = lambda event, attempt: body

    response = client.invoke(FunctionName=FUNCTION, Payload=b"{}")

    assert response["StatusCode"] == 200
    assert "FunctionError" not in response
    assert response["Payload"].read() == body


def test_a_small_response_is_returned_as_the_function_gave_it(client, runtime):
    runtime.behaviour = lambda event, attempt: b'{"ok": true}'
    response = client.invoke(FunctionName=FUNCTION, Payload=b'{"n": 1}')
    assert "FunctionError" not in response
    assert response["Payload"].read() == b'{"ok": true}'
    assert runtime.calls[0][1] == b'{"n": 1}'


# --- asynchronous retries ------------------------------------------------------------------------


def failing(event: bytes, attempt: int) -> bytes:
    raise RuntimeError(f"attempt {attempt} failed")


def wait_for_log(caplog, fragment: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(fragment in r.getMessage() for r in caplog.records):
        if time.monotonic() > deadline:
            raise AssertionError(f"no log record with {fragment!r}")
        time.sleep(0.01)


def test_a_failing_async_invocation_is_retried_twice_then_given_up(client, runtime, caplog):
    caplog.set_level(logging.INFO, logger="emulator.moto")
    runtime.behaviour = failing

    response = client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b'{"n": 1}')

    assert response["StatusCode"] == 202  # accepted; the failure is not the caller's
    wait_for_log(caplog, f"async invoke of {FUNCTION} failed after 2 retries")
    assert len(runtime.calls) == 3
    assert {event for _, event, _ in runtime.calls} == {b'{"n": 1}'}  # the same event each time
    started = [at for _, _, at in runtime.calls]
    assert started[1] - started[0] >= RETRY_DELAYS[0]
    assert started[2] - started[1] >= RETRY_DELAYS[1]
    assert len(runtime.calls) == 3  # given up: that line is logged once the attempts ended


def test_an_async_invocation_that_succeeds_on_a_retry_is_not_retried_again(client, runtime, caplog):
    caplog.set_level(logging.INFO, logger="emulator.moto")
    runtime.behaviour = lambda event, attempt: failing(event, attempt) if attempt == 0 else b"null"

    client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")

    wait_for_log(caplog, f"async invoke of {FUNCTION} succeeded on retry 1")
    assert len(runtime.calls) == 2  # that line is logged once the attempts ended


def test_async_retries_follow_the_functions_event_invoke_config(client, runtime, caplog):
    caplog.set_level(logging.INFO, logger="emulator.moto")
    runtime.behaviour = failing
    client.put_function_event_invoke_config(FunctionName=FUNCTION, MaximumRetryAttempts=0)

    client.invoke(FunctionName=FUNCTION, InvocationType="Event", Payload=b"{}")

    wait_for_log(caplog, f"async invoke of {FUNCTION} failed after 0 retries")
    assert len(runtime.calls) == 1
