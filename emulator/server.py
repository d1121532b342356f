"""The local AWS endpoint: moto's server in this process, plus the emulator's control endpoints.

- Every AWS API moto serves, on http://127.0.0.1:<port> (EMULATOR_PORT, default 4566), and with
  ``up --host <address>`` on that address too (``make sam-local``: the docker bridge's gateway,
  where containers reach the host), never on every interface.
- With ``up --tls``, https://127.0.0.1:<port> with a certificate of the stack's own authority
  (emulator/core/tls.py), plain HTTP still answered on the same port as AWS's endpoints answer
  it: each request's ``aws:SecureTransport`` is its connection's (emulator/iam/resources.py).
- Only requests to a local name are served (``Host``: localhost, 127.0.0.1, [::1],
  host.docker.internal, the ``--host`` address; subdomains of the names): a web page on another
  name that resolves here (DNS rebinding) is refused. moto's global CORS is off, so no page of
  another origin may read a response (moto would reflect any ``Origin``), and a page of another
  site may not change state either (emulator/browsers.py): its request (an ``Origin`` not the
  stack's own, ``Sec-Fetch-Site: cross-site`` or ``same-site``) is refused with 403 unless it is
  a GET, HEAD or OPTIONS outside /moto-api and /_emulator. SDKs send neither header.
- The hot services' calls (DynamoDB, DynamoDB Streams, SQS, SNS) go from the front door
  (emulator/front_door.py) straight to moto's handlers; the rest through moto's dispatcher.
- moto patched in-process (services/moto_patches.py): Lambda Invoke runs the function on our
  Runtime, moto's own event-source-mapping delivery is off, S3 events carry AWS's fields.
- Control endpoints on the same port (docs/local-stack.md):
  GET/POST /_emulator/faults, POST /_emulator/faults/reset, GET /_emulator/status,
  GET /_emulator/iam, GET /_emulator/inbox (every e-mail SES accepted: services/ses.py),
  POST /_emulator/reset (empties the deployed stack's data: services/reset.py, and the inbox),
  POST /_emulator/age-deduplication (the FIFO topics' and queues' deduplication intervals moved
  on: services/sns.py, services/sqs.py).
- IAM (emulator/iam/access.py): each call of a function worker is decided against that function's
  role, recorded, and refused with the service's AccessDenied unless its role allows it.
- Call faults (``crash_after_call``, ``throttle``: emulator/core/faults.py) injected into the AWS
  calls of function workers, which the middleware recognises by their own access key ids
  (Runtime.caller); calls of anything else are never faulted.

One server per process: moto's backends (and the patches) are process-global.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from moto.awslambda.models import lambda_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server import werkzeug_app
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer
from werkzeug.wsgi import LimitedStream

from emulator import browsers
from emulator.core import calls, tls
from emulator.core.faults import Faults
from emulator.front_door import FrontDoor
from emulator.iam import authorizations, resources
from emulator.lambda_.workers import Runtime
from emulator.monitoring.monitor import Monitor
from emulator.services import context, moto_patches, reset, ses, sns, sqs

if TYPE_CHECKING:
    from emulator.delivery.engine import EventSourceMappingEngine
    from emulator.iam.access import Access

DEFAULT_PORT = 4566
CONTROL_PREFIX = "/_emulator/"
LOOPBACK = "127.0.0.1"
# The names a request may address the local stack by (its Host header), besides `--host`.
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "host.docker.internal"})
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - refused, named to say so
fault_log = logging.getLogger("emulator.faults")
log = logging.getLogger("emulator.server")
_werkzeug_log = logging.getLogger("werkzeug")


class _SkipUnsupportedTypeWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No Moto CloudFormation support for")


def _iam(server: EmulatorServer, _environ: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if server.access is None:  # no IAM checks on this server
        return 404, {"message": "no IAM checks on this server: no record"}
    return 200, server.access.snapshot()


# (name, method) -> the endpoint's status and JSON answer.
CONTROL_ENDPOINTS: dict[
    tuple[str, str], Callable[[EmulatorServer, dict[str, Any]], tuple[int, dict[str, Any]]]
] = {
    ("faults", "GET"): lambda server, _: (200, server.faults.snapshot()),
    ("faults", "POST"): lambda server, environ: (200, server.faults.update(_json_body(environ))),
    ("faults", "PUT"): lambda server, environ: (200, server.faults.update(_json_body(environ))),
    ("faults/reset", "POST"): lambda server, _: (200, server.faults.reset()),
    ("status", "GET"): lambda server, _: (200, server.status()),
    ("iam", "GET"): _iam,
    ("inbox", "GET"): lambda server, _: (200, {"messages": ses.inbox()}),
    ("reset", "POST"): lambda server, _: server.reset(),
    ("age-deduplication", "POST"): lambda server, environ: server.age_deduplication(
        _json_body(environ)
    ),
}


class ControlApp:
    """WSGI middleware: /_emulator/* here, everything else to moto."""

    def __init__(self, app: Callable[..., Iterable[bytes]], server: EmulatorServer) -> None:
        self.app = app
        self.server = server

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        keys = authorizations.s3_encryption_keys(environ)
        if keys:  # a put's encryption headers, for the bucket policy moto asks (iam/resources.py)
            token = resources.request_keys.set(keys)
            try:
                return self._serve(environ, start_response)
            finally:
                resources.request_keys.reset(token)
        return self._serve(environ, start_response)

    def _serve(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if self.server.certificates is None:  # plain HTTP alone: stands for AWS's HTTPS
            return self._route(environ, start_response)
        secure = "true" if environ.get("wsgi.url_scheme") == "https" else "false"
        token = resources.transport.set(secure)
        try:
            return self._route(environ, start_response)
        finally:
            resources.transport.reset(token)

    def _route(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        refused = self._refused(environ, start_response)
        if refused is not None:
            return refused
        path = environ.get("PATH_INFO", "")
        if not path.startswith(CONTROL_PREFIX):
            checked = self.server.access is not None or self.server.faults.call_faults_active
            if checked and self.server.runtime is not None:
                return self._aws_call(environ, start_response)
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET")
        name = path[len(CONTROL_PREFIX) :].strip("/")
        try:
            status, body = self._control(name, method, environ)
        except ValueError as exc:  # a body that is not JSON, or a switch's invalid value
            status, body = 400, {"message": str(exc)}
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            405: "Method Not Allowed",
            409: "Conflict",
        }
        return _json_response(start_response, f"{status} {reason[status]}", body)

    def _control(
        self, name: str, method: str, environ: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """A control endpoint's status and JSON answer."""
        serve = CONTROL_ENDPOINTS.get((name, method))
        if serve is not None:
            return serve(self.server, environ)
        if any(endpoint == name for endpoint, _ in CONTROL_ENDPOINTS):
            return 405, {"message": f"{method} not allowed on /_emulator/{name}"}
        return 404, {"message": f"no such control endpoint: /_emulator/{name}"}

    def _refused(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> list[bytes] | None:
        """The 403 of a request for a name not the stack's (DNS rebinding) or of a web page of
        another site that would change state (emulator/browsers.py); None: served."""
        name = host_name(environ)
        if not self.server.serves_name(name):
            return _json_response(
                start_response,
                "403 Forbidden",
                {"message": f"Host {name!r} is not a local name of this stack"},
            )
        reason = browsers.refusal(environ)
        if reason is None:
            return None
        return _cross_site_response(environ, start_response, reason)

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


def _json_body(environ: dict[str, Any]) -> Any:
    """A control request's JSON body ({} when empty); ValueError when it is not JSON."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b"{}"
    return json.loads(raw or b"{}")


def _json_response(start_response: Callable[..., Any], status: str, body: Any) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    )
    return [payload]


def _cross_site_response(
    environ: dict[str, Any], start_response: Callable[..., Any], message: str
) -> list[bytes]:
    """403 for a web page's request (emulator/browsers.py): the control endpoints' JSON message;
    to an AWS path the service's own AccessDenied (S3's for an unsigned request, which moto
    takes for S3's: what a browser's form or text/plain POST is), always with status 403."""
    path = environ.get("PATH_INFO", "")
    if path.startswith(browsers.CONTROL_PATHS):
        return _json_response(start_response, "403 Forbidden", {"message": message})
    signed = calls.credential(environ)
    _, headers, body = calls.access_denied_response(
        environ, "s3" if signed is None else signed[1].lower(), message
    )
    start_response("403 Forbidden", headers)
    return [body]


def host_name(environ: dict[str, Any]) -> str:
    """The name a request addresses (its Host header without the port), lower case."""
    host = (environ.get("HTTP_HOST") or "").strip().lower()
    if host.startswith("["):  # [::1]:4566
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


_MAX_HEADER_LINE = 65536  # http.client's limits, as http.server applied them
_MAX_HEADERS = 100


class _HeadersTooLarge(Exception):
    pass


class _Headers:
    """A request's headers, read as http.server's handlers and werkzeug read them (``get``,
    ``get_all``, ``items``, ``keys``, ``in``: names in any case, the first value of a repeated
    name) without the email parser http.server builds them with (~0.1 ms of every request)."""

    __slots__ = ("_first", "_items")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        self._first: dict[str, str] = {}
        for name, value in items:
            self._first.setdefault(name.lower(), value)

    @classmethod
    def read(cls, rfile: Any) -> _Headers:
        """Header lines up to the empty one: a value without the blanks after its colon; a line
        starting with a blank (obsolete folding) joins the value before with a space (RFC 9112
        5.2)."""
        items: list[tuple[str, str]] = []
        while True:
            line = rfile.readline(_MAX_HEADER_LINE + 1)
            if len(line) > _MAX_HEADER_LINE:
                raise _HeadersTooLarge("Line too long")
            if line in (b"\r\n", b"\n", b""):
                return cls(items)
            text = line.decode("iso-8859-1").rstrip("\r\n")
            if text[:1] in (" ", "\t") and items:
                name, value = items[-1]
                items[-1] = (name, f"{value} {text.strip(' \t')}")
                continue
            if len(items) >= _MAX_HEADERS:
                raise _HeadersTooLarge("Too many headers")
            name, _, value = text.partition(":")
            items.append((name, value.lstrip(" \t")))

    def get(self, name: str, default: Any = None) -> Any:
        return self._first.get(name.lower(), default)

    def get_all(self, name: str, default: Any = None) -> Any:
        wanted = name.lower()
        return [value for key, value in self._items if key.lower() == wanted] or default

    def items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def keys(self) -> list[str]:
        return [name for name, _ in self._items]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def __getitem__(self, name: str) -> str | None:
        return self._first.get(name.lower())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._items)


class _RequestHandler(MotoRequestHandler):
    """moto's request handler over HTTP/1.1 with keep-alive. werkzeug's development server
    answers `Connection: close` to every request (it cannot tell where a request's body ends),
    so every AWS call cost a TCP connection, a thread and, over TLS, a handshake. Here a body is
    bounded by its Content-Length (or its chunked encoding), what the app left of it is read past
    before the connection's next request, and the answer is sent with its length."""

    protocol_version = "HTTP/1.1"
    # the answer's headers and body go in two writes: without TCP_NODELAY the second waits for
    # the client's delayed ACK of the first (40 ms per call)
    disable_nagle_algorithm = True

    # what a request is answered in until its own version is read: a refused one still gets a
    # status line (http.server answers a request it cannot read as HTTP/0.9: the body alone)
    default_request_version = "HTTP/1.1"
    _date: tuple[int, str] = (0, "")  # the Date header of the current second

    def parse_request(self) -> bool:
        """http.server's request line and header checks, with the headers read by _Headers;
        False, answered, when the request is refused. HTTP/0.9 (two words), which no AWS client
        speaks, is refused."""
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3:
            if words:
                self.send_error(
                    HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})"
                )
            return False
        command, path, version = words
        numbers = version[5:].split(".") if version.startswith("HTTP/") else []
        if len(numbers) != 2 or not all(n.isdigit() and len(n) <= 10 for n in numbers):
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
            return False
        number = (int(numbers[0]), int(numbers[1]))
        if number >= (2, 0):
            self.send_error(
                HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version})"
            )
            return False
        self.request_version = version
        self.close_connection = number < (1, 1)
        # a path starting with // would read as a host to a client redirected there
        self.command, self.path = command, "/" + path.lstrip("/") if path.startswith("//") else path
        try:
            self.headers = _Headers.read(self.rfile)  # type: ignore[assignment]
        except _HeadersTooLarge as error:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(error))
            return False
        connection = self.headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        if self.headers.get("Expect", "").lower() == "100-continue" and number >= (1, 1):
            return self.handle_expect_100()
        return True

    def date_time_string(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return super().date_time_string(timestamp)
        second = int(time.time())
        if self._date[0] != second:  # formatted once a second, not for every answer
            _RequestHandler._date = (second, super().date_time_string(second))
        return self._date[1]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # werkzeug formats each request's line (the path decoded, the date) before its logger,
        # silenced by EmulatorServer.start, drops it
        if _werkzeug_log.isEnabledFor(logging.INFO):
            super().log_request(code, size)

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        if isinstance(self.connection, ssl.SSLSocket):  # werkzeug asks the server, not the socket
            environ["wsgi.url_scheme"] = "https"
        if not environ.get("wsgi.input_terminated"):  # not chunked: its length bounds it
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"] = LimitedStream(self.rfile, max(length, 0))
        return environ

    def run_wsgi(self) -> None:
        # (an `Expect: 100-continue` was answered by http.server's parse_request already)
        environ = self.make_environ()
        body = environ["wsgi.input"]  # drained below, whatever the app puts in the environ
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            started[:] = [status, headers]
            return chunks.append

        try:
            result = self.server.app(environ, start_response)
            try:
                chunks.extend(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
            failed = not started
        except Exception:
            log.exception("error on %s %s", self.command, self.path)
            failed = True
        if failed:  # the app raised (or never started its answer): a 500, and the connection ends
            started[:] = ["500 Internal Server Error", [("Content-Type", "text/plain")]]
            chunks[:] = [b"Internal Server Error"]
            self.close_connection = True
        self._answer(started[0], started[1], b"".join(chunks))
        while body.read(1 << 16):  # the body's unread rest
            pass

    def _answer(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        # a HEAD answer keeps the app's Content-Length (the object's); no body on HEAD, 1xx,
        # 204 or 304; every other answer is as long as its body
        bodiless = self.command == "HEAD" or int(code) < 200 or int(code) in (204, 304)
        for name, value in headers:
            if name.lower() in ("connection", "transfer-encoding"):
                continue
            if name.lower() == "content-length" and self.command != "HEAD":
                continue
            self.send_header(name, value)
        if not bodiless:
            self.send_header("Content-Length", str(len(body)))
        if self.close_connection:  # the client asked, or the app failed
            self.send_header("Connection", "close")
        self.end_headers()
        if not bodiless:
            self.wfile.write(body)


class _Listener(ThreadedWSGIServer):
    """werkzeug's threaded server; given a TLS context, it answers TLS and plain HTTP on one
    port, each connection by its first byte, as an AWS endpoint reached over HTTP still answers
    (and a policy's aws:SecureTransport decides)."""

    tls_context: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        # in the connection's own thread: a slow handshake holds up no other client
        try:
            secured = self.tls_context is not None and tls.starts_tls(request)
            if secured:
                request = self.tls_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):  # a client that gave up, or does not trust the CA
            return
        try:
            super().finish_request(request, client_address)
        finally:
            if secured:
                with contextlib.suppress(OSError):
                    request.close()


def _listener(host: str, port: int, app: Any, tls_context: ssl.SSLContext | None) -> _Listener:
    listener = _Listener(host, port, app, handler=_RequestHandler)
    listener.tls_context = tls_context
    return listener


class EmulatorServer(ThreadedMotoServer):
    """ThreadedMotoServer bound to 127.0.0.1 (and ``host``, when another address) with the
    patches and the control endpoints."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        *,
        host: str = "127.0.0.1",
        faults: Faults | None = None,
        runtime: Runtime | None = None,
        region: str = "us-east-1",
        metrics_time_factor: float | None = None,
        certificates: tls.Certificates | None = None,
    ) -> None:
        """``metrics_time_factor``: CloudWatch's metrics and alarms run (monitoring/), that many
        CloudWatch seconds per real second; None: no metrics. ``certificates``: served over TLS
        (and plain HTTP) with these; None: plain HTTP alone."""
        super().__init__(ip_address=LOOPBACK, port=port, verbose=False)
        self.also_on = None if host in (LOOPBACK, "localhost") else host
        self.names = LOCAL_NAMES | {host.lower()}
        self._also_server: BaseWSGIServer | None = None
        self.faults = faults or Faults()
        self.runtime = runtime
        self.region = region
        self.stack_name: str | None = None  # the stack served (serve)
        self.ready = False  # what clients wait for (mark_ready)
        self.engine: EventSourceMappingEngine | None = None  # once `up` started it
        self.access: Access | None = None  # IAM checks of workers' calls, once deployed
        self.monitor = None if metrics_time_factor is None else Monitor(region, metrics_time_factor)
        self.certificates = certificates
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @property
    def endpoint_url(self) -> str:
        host, port = self.get_host_and_port()
        return f"{'http' if self.certificates is None else 'https'}://{host}:{port}"

    def serves_name(self, name: str) -> bool:
        """Whether a request for ``name`` (its Host) is this stack's: a local name or a
        subdomain of one (S3's virtual-hosted style: <bucket>.localhost)."""
        return name in self.names or any(name.endswith(f".{local}") for local in self.names)

    def _server_entry(self) -> None:
        try:
            app = ControlApp(FrontDoor(DomainDispatcherApplication(create_backend_app)), self)
            context = None if self.certificates is None else self.certificates.server_context()
            self._server = _listener(self._ip_address, self._port, app, context)
            if self.also_on is not None:  # the same app and port, on the containers' address
                port = self._server.server_address[1]
                self._also_server = _listener(self.also_on, port, app, context)
                threading.Thread(target=self._also_server.serve_forever, daemon=True).start()
        except BaseException as exc:  # e.g. the port is taken: report it from start()
            if self._server is not None:  # bound, never served: nothing to shut down
                self._server.server_close()
                self._server = None
            self._error = exc
            self._server_ready_event.set()
            return
        self._server_ready_event.set()
        self._server.serve_forever()

    def start(self) -> None:
        # moto warns about every type its CloudFormation skips (AWS::SQS::QueuePolicy: no policy
        # enforcement locally, see docs/local-stack.md) and werkzeug logs every request.
        warnings.filterwarnings("ignore", message="Tried to parse AWS::", category=UserWarning)
        _werkzeug_log.setLevel(logging.ERROR)
        logging.getLogger("moto").addFilter(_SkipUnsupportedTypeWarning())
        # moto's ASL interpreter logs each failing state's whole definition (kilobytes per failed
        # execution); the failure is the execution's answer (error, cause) and counts in
        # AWS/States ExecutionsFailed, as on AWS.
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
        if self.also_on in EVERY_INTERFACE:
            raise OSError(
                f"will not listen on every interface ({self.also_on!r}): give the address "
                "containers reach the host by (make sam-local uses the docker bridge's gateway)"
            )
        # moto's Flask app answers every Origin with Access-Control-Allow-Origin (flask_cors):
        # any web page the developer opens could read and write the local data.
        werkzeug_app.DISABLE_GLOBAL_CORS = True
        moto_patches.install()
        context.set_runtime(self.runtime)
        context.set_faults(self.faults)
        super().start()
        if self._error is not None:
            reason = "address in use" if isinstance(self._error, SystemExit) else self._error
            where = " and ".join(filter(None, (self._ip_address, self.also_on)))
            raise OSError(f"cannot serve on {where}:{self._port}: {reason}")
        if self.monitor is not None:
            if self.runtime is not None:
                self.runtime.observers.append(self.monitor.metrics)
            self.monitor.start()

    def serve(self, stack_name: str, access: Access | None) -> None:
        """``stack_name`` deployed: the stack served (what /_emulator/reset empties), its
        functions' calls checked by ``access`` (None: not checked)."""
        self.stack_name = stack_name
        self.access = access

    def stack_deleted(self, stack_name: str) -> None:
        """No stack served once the one served is deleted; its IAM record stays, for the run's
        report."""
        if self.stack_name == stack_name:
            self.stack_name = None

    def attach_engine(self, engine: EventSourceMappingEngine) -> None:
        """The mapping engine started: status reports its mappings from now on."""
        self.engine = engine

    def mark_ready(self) -> None:
        """The stack deployed and its mappings enabled: status answers ready."""
        self.ready = True

    def stop(self) -> None:
        if self.monitor is not None:
            self.monitor.stop()
        if self._also_server is not None:
            self._also_server.shutdown()
            self._also_server.server_close()
            self._also_server = None
        if self._server is not None:
            super().stop()
            self._server.server_close()
            self._server = None
        context.release(self.runtime, self.faults)

    def reset(self) -> tuple[int, dict[str, Any]]:
        """POST /_emulator/reset: the deployed stack's data emptied, its resources kept."""
        if self.stack_name is None:
            return 409, {"message": "no stack deployed yet: nothing to reset"}
        emptied = reset.reset_stack(self.stack_name, self.region)
        return 200, {"emptied": {**emptied, "e-mails": ses.reset()}}

    def age_deduplication(self, request: Any) -> tuple[int, dict[str, Any]]:
        """POST /_emulator/age-deduplication {"seconds": N}: SNS FIFO topics' and SQS FIFO
        queues' deduplication intervals N seconds further on (services/sns.py, services/sqs.py)."""
        seconds = request.get("seconds") if isinstance(request, dict) else None
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
            return 400, {"message": "seconds must be a number > 0"}
        return 200, {
            "sns": sns.age_deduplication(seconds, self.region, DEFAULT_ACCOUNT_ID),
            "sqs": sqs.age_deduplication(seconds, self.region, DEFAULT_ACCOUNT_ID),
        }

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
