"""Faults inside a handler's AWS calls, in process (the local stack has its own, server-side:
emulator/core/faults.py). A handler module's calls go through its module-level boto3 clients (the
Powertools persistence layers are built on them), so hooks on those clients see every call.

- `record_calls(module, crash_after=k)`: the k-th call (or, with an operation's IAM name, the
  first call of it) takes effect, then the execution environment dies before the function sees
  the response (`Crash`, a BaseException: no handler runs, nothing is
  cleaned up, as when Lambda's process is killed). Any later call of that module fails too.
- `CallLog.meanwhile`: after the k-th call takes effect, something else runs (another
  invocation, overlapping this one) before the function sees the response.
- `throttle(module, operation, times)`: the next `times` such calls fail with the service's
  throttling error, as after boto3 has spent its own retries.
"""

from collections.abc import Callable
from types import ModuleType

from botocore.awsrequest import AWSResponse
from botocore.client import BaseClient

THROTTLING = {
    "dynamodb": "ProvisionedThroughputExceededException",
    "sqs": "RequestThrottled",
    "sns": "ThrottlingException",
    "s3": "SlowDown",
    "email": "TooManyRequestsException",  # SES (API v2)
}


class Crash(BaseException):
    """The execution environment died."""


def clients(module: ModuleType) -> list[BaseClient]:
    return [value for value in vars(module).values() if isinstance(value, BaseClient)]


def operation_name(client: BaseClient, model) -> str:
    """IAM's name of a call: "<service>:<Operation>"."""
    return f"{client.meta.service_model.endpoint_prefix}:{model.name}"


class CallLog:
    """The calls a module made (IAM names, in order), and the crash, if one is armed."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.crash_after: int | str | None = None  # the k-th call, or an operation's first
        self.crashed = False
        # (k, what runs after the k-th call, before the function goes on), once
        self.meanwhile: tuple[int, Callable[[], object]] | None = None


def record_calls(module: ModuleType, crash_after: int | str | None = None) -> CallLog:
    """Log every AWS call of the module; with `crash_after` k, the k-th call (with an operation's
    IAM name, its first call) takes effect and then the environment dies (Crash), and every call
    after it fails the same way."""
    log = CallLog()
    log.crash_after = crash_after

    for client in clients(module):

        def before(model, _client=client, **kwargs):
            if log.crashed:
                raise Crash(f"{operation_name(_client, model)} after the crash")

        def after(model, _client=client, **kwargs):
            log.calls.append(operation_name(_client, model))
            if log.meanwhile is not None and len(log.calls) == log.meanwhile[0]:
                run, log.meanwhile = log.meanwhile[1], None
                run()
            if log.crash_after in (len(log.calls), log.calls[-1]):
                log.crashed = True
                raise Crash(f"after call {len(log.calls)}: {log.calls[-1]}")

        client.meta.events.register("before-call", before)
        client.meta.events.register("after-call", after)
    return log


class Throttle:
    """Calls of one operation that still fail, until `left` reaches 0 or it is cleared."""

    def __init__(self, left: int):
        self.left = left

    def clear(self) -> None:
        self.left = 0


def throttle(module: ModuleType, operation: str, times: int) -> Throttle:
    """The module's next `times` calls of `operation` ("dynamodb:UpdateItem") fail with the
    service's throttling error."""
    service, name = operation.split(":")
    state = Throttle(times)
    for client in clients(module):
        if client.meta.service_model.endpoint_prefix != service:
            continue

        def refuse(model, **kwargs):
            if model.name != name or state.left <= 0:
                return None
            state.left -= 1
            error = {"Error": {"Code": THROTTLING[service], "Message": "Rate exceeded"}}
            return AWSResponse(f"https://{service}.amazonaws.com/", 400, {}, None), error

        client.meta.events.register("before-call", refuse)
    return state
