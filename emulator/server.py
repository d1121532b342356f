"""The local AWS endpoint: moto's server in this process, plus the emulator's control endpoints.

- Every AWS API moto serves, on http://127.0.0.1:<port> (EMULATOR_PORT, default 4566).
- moto patched in-process (services/moto_patches.py): Lambda Invoke runs the function on our
  Runtime, moto's own event-source-mapping delivery is off, S3 events carry AWS's fields.
- Control endpoints on the same port (docs/local-stack.md):
  GET/POST /_emulator/faults, POST /_emulator/faults/reset, GET /_emulator/status,
  GET /_emulator/iam.
- IAM (emulator/iam/access.py): each call of a function worker is decided against that function's
  role, recorded, and refused with the service's AccessDenied unless its role allows it.
- Call faults (``crash_after_call``, ``throttle``: emulator/core/faults.py) injected into the AWS
  calls of function workers, which the middleware recognises by their own access key ids
  (Runtime.caller); calls of anything else are never faulted.

One server per process: moto's backends (and the patches) are process-global.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from moto.awslambda.models import lambda_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from emulator.core import calls
from emulator.core.faults import Faults
from emulator.lambda_.workers import Runtime
from emulator.services import context, moto_patches

if TYPE_CHECKING:
    from emulator.delivery.engine import EventSourceMappingEngine
    from emulator.iam.access import Access

DEFAULT_PORT = 4566
CONTROL_PREFIX = "/_emulator/"
fault_log = logging.getLogger("emulator.faults")


class _SkipUnsupportedTypeWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No Moto CloudFormation support for")


class ControlApp:
    """WSGI middleware: /_emulator/* here, everything else to moto."""

    def __init__(self, app: Callable[..., Iterable[bytes]], server: EmulatorServer) -> None:
        self.app = app
        self.server = server

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(CONTROL_PREFIX):
            checked = self.server.access is not None or self.server.faults.call_faults_active
            if checked and self.server.runtime is not None:
                return self._aws_call(environ, start_response)
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET")
        name = path[len(CONTROL_PREFIX) :].strip("/")
        status, body = 404, {"message": f"no such control endpoint: {path}"}
        if name == "faults" and method == "GET":
            status, body = 200, self.server.faults.snapshot()
        elif name == "faults" and method in ("POST", "PUT"):
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
                raw = environ["wsgi.input"].read(length) if length else b"{}"
                status, body = 200, self.server.faults.update(json.loads(raw or b"{}"))
            except ValueError as exc:
                status, body = 400, {"message": str(exc)}
        elif name == "faults/reset" and method == "POST":
            status, body = 200, self.server.faults.reset()
        elif name == "status" and method == "GET":
            status, body = 200, self.server.status()
        elif name == "iam" and method == "GET":
            if self.server.access is not None:  # else 404: no IAM checks on this server
                status, body = 200, self.server.access.snapshot()
        elif name in ("faults", "faults/reset", "status", "iam"):
            status, body = 405, {"message": f"{method} not allowed on {path}"}
        payload = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        start_response(
            f"{status} {reason[status]}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
        )
        return [payload]

    def _aws_call(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """An AWS request while IAM checks or a call fault are on: checked against the role and
        faulted only when a function worker (its own access key id) makes it."""
        runtime = self.server.runtime
        signed = calls.credential(environ)
        caller = runtime.caller(signed[0]) if signed is not None and runtime is not None else None
        if caller is None:
            return self.app(environ, start_response)
        key, service = signed  # type: ignore[misc]
        logical_id = caller[0]
        if self.server.access is not None:
            denied = self.server.access.check(logical_id, environ, service)
            if denied is not None:  # not applied, as AWS refuses before the service acts
                status, headers, body = denied
                start_response(status, headers)
                return [body]
            if not self.server.faults.call_faults_active:
                return self.app(environ, start_response)
        try:
            operation = calls.operation(environ, service)
        except Exception:  # an odd request is moto's to answer, never a fault
            operation = None
        fault = None
        if operation is not None:
            fault = self.server.faults.take_call_fault(logical_id, operation)
        worker = caller[1]
        if fault is None and worker.crash_after_call is not None:
            worker.calls += 1  # one call at a time: an invocation runs its calls in sequence
            if worker.calls == worker.crash_after_call:
                fault = "crash"
        if fault is None:
            return self.app(environ, start_response)
        fault_log.warning("faults: injected %s fn=%s op=%s", fault, logical_id, operation)
        self.server.faults.count(fault)
        if fault == "throttle":  # not applied: the service's own throttling error
            status, headers, body = calls.throttle_response(environ, service)
            start_response(status, headers)
            return [body]
        # crash: moto applies the call, then the worker dies before the response goes back.
        captured: list[Any] = []
        chunks: list[bytes] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured[:] = [status, headers]
            return chunks.append

        result = self.app(environ, capture)
        try:
            chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        assert runtime is not None
        runtime.kill(key)
        start_response(*captured)
        return chunks


class EmulatorServer(ThreadedMotoServer):
    """ThreadedMotoServer bound to 127.0.0.1 with the patches and the control endpoints."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        *,
        host: str = "127.0.0.1",
        faults: Faults | None = None,
        runtime: Runtime | None = None,
        region: str = "us-east-1",
    ) -> None:
        super().__init__(ip_address=host, port=port, verbose=False)
        self.faults = faults or Faults()
        self.runtime = runtime
        self.region = region
        self.stack_name: str | None = None
        self.ready = False
        self.engine: EventSourceMappingEngine | None = None  # once `up` started it
        self.access: Access | None = None  # IAM checks of workers' calls, once deployed
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def endpoint_url(self) -> str:
        host, port = self.get_host_and_port()
        if host == "0.0.0.0":  # noqa: S104 - listening on every address; this one is local
            host = "127.0.0.1"
        return f"http://{host}:{port}"

    def _server_entry(self) -> None:
        try:
            app = ControlApp(DomainDispatcherApplication(create_backend_app), self)
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
        except BaseException as exc:  # e.g. the port is taken: report it from start()
            self._error = exc
            self._server_ready_event.set()
            return
        self._server_ready_event.set()
        self._server.serve_forever()

    def start(self) -> None:
        # moto warns about every type its CloudFormation skips (AWS::SQS::QueuePolicy: no policy
        # enforcement locally, see docs/local-stack.md) and werkzeug logs every request.
        warnings.filterwarnings("ignore", message="Tried to parse AWS::", category=UserWarning)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        logging.getLogger("moto").addFilter(_SkipUnsupportedTypeWarning())
        moto_patches.install()
        context.set_runtime(self.runtime)
        context.set_faults(self.faults)
        super().start()
        if self._error is not None:
            reason = "address in use" if isinstance(self._error, SystemExit) else self._error
            raise OSError(f"cannot serve on {self._ip_address}:{self._port}: {reason}")

    def set_runtime(self, runtime: Runtime | None) -> None:
        self.runtime = runtime
        context.set_runtime(runtime)

    def stop(self) -> None:
        if self._server is not None:
            super().stop()
            self._server.server_close()
            self._server = None
        context.release(self.runtime, self.faults)

    def status(self) -> dict[str, Any]:
        mappings = []
        try:
            backend = lambda_backends[DEFAULT_ACCOUNT_ID][self.region]
            for esm in backend._event_source_mappings.values():
                config = esm.get_configuration()
                mappings.append(
                    {
                        "UUID": config.get("UUID"),
                        "EventSourceArn": config.get("EventSourceArn"),
                        "FunctionArn": config.get("FunctionArn"),
                        "State": config.get("State"),
                    }
                )
        except Exception as exc:  # status must always answer
            mappings = [{"error": str(exc)}]
        enabled = idle = deliveries = None
        if self.engine is not None:
            try:  # in process, no AWS call: cheap enough to poll
                enabled = self.engine.all_enabled()
                # idle: nothing queued, in flight, buffered or unread on any source: settled
                idle = self.engine.idle()
                deliveries = self.engine.stats()
            except Exception:
                enabled = idle = False
        return {
            "ready": self.ready,
            "stack_name": self.stack_name,
            "endpoint": self.endpoint_url,
            "mappings": mappings,
            "mappings_enabled": enabled,
            "idle": idle,
            "deliveries": deliveries,
            "faults": self.faults.snapshot(),
        }
