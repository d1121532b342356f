"""Function runtime of the local stack: warm worker processes speaking the Lambda Runtime API.

Each worker is a process running ``python -m awslambdaric <handler>`` (the AWS Python runtime
interface client, the same code the managed python3.13 runtime runs) against a tiny Runtime API
server of its own in this process; it is forked from the function's fork server (forkserver.py,
which has imported the runtime's boto3), or started on its own when the server cannot fork.
That gives, without re-implementing them, the context object AWS hands to handlers
(deadline-based ``get_remaining_time_in_millis``, ``aws_request_id``, ``invoked_function_arn``,
...), the AWS error shape (``errorMessage``, ``errorType``, ``stackTrace``, ``requestId``) and
init errors (``Runtime.ImportModuleError``, ...).

What this module adds, as the Lambda service does: one invocation at a time per worker (a pool of
workers per function for concurrency), timeouts (the worker is killed, the invocation fails with
``Sandbox.Timedout`` and the next one starts cold), a runtime that exits mid-invocation
(``Runtime.ExitError``), and injected crashes (``Emulator.InjectedCrash``, see faults.py).

Public interface (used by the ESM engine, the moto Invoke patch and the server's fault
middleware; keep it stable): ``InvokeResult``, ``Runtime.invoke(function_name, event)``, and the
caller registry: when the runtime points its workers at a local endpoint, every worker (execution
environment) gets an access key id of its own (``AKIA`` + 16 characters, which moto takes as an
unknown key of its default account 123456789012), and ``Runtime.caller(access_key_id)`` says whose
it is (``(logical_id, worker)`` or None) while ``Runtime.kill(access_key_id)`` ends that worker as
a crash would (SIGKILL of its process group, waited for).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from emulator.core.faults import Faults
from emulator.lambda_.packages import layer_path, packages_dir

INIT_TIMEOUT_SECONDS = 10.0  # AWS: the init phase has its own 10 s limit
DEFAULT_MAX_CONCURRENCY = 10
# The account's concurrent executions (AWS: a Regional quota, 10 on a new account). Locally the
# quota stands for the machine: every invocation's SDK calls go to one moto process, which serves
# them on one core, so more invocations at once only lengthen each (its calls queue behind the
# others') until functions time out, are retried and start cold: less work done, not more.
DEFAULT_ACCOUNT_CONCURRENCY = max(4, 2 * (os.cpu_count() or 1))
_API = "/2018-06-01/runtime"
# Environment variables a worker inherits from the host: enough to run, nothing of the caller's
# own configuration (functions see only what the template gives them, as on AWS).
_HOST_ENV = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR", "LANG", "LC_ALL")
# Worker access key ids: "AKIA" + a random prefix per runtime (so that two processes' runtimes
# pointing at one endpoint never share a key) + a worker number; 20 characters like AWS's.
_KEY_PREFIX_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_KEY_NUMBER_WIDTH = 8
_FORKSERVER = Path(__file__).with_name("forkserver.py")


@dataclass
class InvokeResult:
    ok: bool  # False on unhandled error, timeout, injected crash
    payload: Any  # parsed JSON response when ok (may be None)
    error: dict | None  # {"errorType","errorMessage",...} when not ok
    request_id: str = ""
    logical_id: str = ""
    duration_ms: float = 0.0
    raw: bytes = b""  # the response or error document exactly as the runtime posted it


@dataclass
class FunctionSpec:
    """A function as the Lambda service knows it after deployment."""

    logical_id: str
    function_name: str  # physical name
    handler: str
    code_dir: Path
    layer_dirs: list[Path] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # template variables, resolved
    timeout: float = 3.0
    memory_size: int = 128
    region: str = "us-east-1"
    account_id: str = "123456789012"
    runtime: str = "python3.13"

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{self.function_name}"


class _Invocation:
    def __init__(self, body: bytes, timeout: float, arn: str) -> None:
        self.request_id = str(uuid.uuid4())
        self.body = body
        self.timeout = timeout
        self.arn = arn
        self.deadline = 0.0  # epoch seconds, set when the runtime picks it up
        self.started = threading.Event()
        self.done = threading.Event()
        self.outcome: str = ""  # "response" | "error"
        self.document = b""


class _ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms stalls
    server: _RuntimeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path != f"{_API}/invocation/next":
            self._reply(404, b'{"errorType":"InvalidRequest"}')
            return
        inv = self.server.worker.next_invocation()
        if inv is None:  # worker stopping: leave the runtime blocked until it is killed
            self.close_connection = True
            return
        self._reply(
            200,
            inv.body,
            {
                "Lambda-Runtime-Aws-Request-Id": inv.request_id,
                "Lambda-Runtime-Deadline-Ms": str(int(inv.deadline * 1000)),
                "Lambda-Runtime-Invoked-Function-Arn": inv.arn,
                "Lambda-Runtime-Trace-Id": f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}",
            },
        )

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = self.path.removeprefix(_API).strip("/").split("/")
        if parts == ["init", "error"]:
            self.server.worker.init_failed(body)
            self._reply(202, b'{"status":"OK"}')
        elif len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
            if self.server.worker.complete(parts[1], parts[2], body):
                self._reply(202, b'{"status":"OK"}')
            else:
                self._reply(400, b'{"errorType":"InvalidRequestID"}')
        else:
            self._reply(404, b'{"errorType":"InvalidRequest"}')


class _RuntimeApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker
        super().__init__(("127.0.0.1", 0), _ApiHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a killed runtime resets its connection: expected, not worth a traceback


class _LogSink:
    """One log file per function (all its workers), optionally echoed with a prefix."""

    def __init__(
        self,
        path: Path | None,
        echo: bool,
        prefix: str,
        stream: Any = None,
        on_line: Any = None,  # callable(line), for each line written
    ) -> None:
        self._on_line = on_line
        self._lock = threading.Lock()
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("ab", buffering=0)
        self._echo = echo
        self._prefix = prefix.encode()
        self._stream = stream

    def write(self, line: bytes) -> None:
        with self._lock:
            if self._file is not None:
                self._file.write(line)
            if self._echo:
                out = self._stream or sys.stderr
                out.buffer.write(self._prefix + line)
                out.flush()
        if self._on_line is not None:
            self._on_line(line)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class _Worker:
    """One execution environment: a runtime process plus its Runtime API server."""

    def __init__(
        self,
        spec: FunctionSpec,
        env: dict[str, str],
        sink: _LogSink,
        access_key_id: str | None = None,
    ) -> None:
        """Prepares the environment; ``start()`` runs the runtime process."""
        self.spec = spec
        self.access_key_id = access_key_id  # its own, when it talks to a local endpoint
        # crash_invocations: the AWS call the running invocation crashes after, and calls made
        self.crash_after_call: int | None = None
        self.calls = 0
        self._pending: queue.Queue[_Invocation | None] = queue.Queue(maxsize=1)
        self._current: _Invocation | None = None
        self._lock = threading.Lock()
        self.init_error: bytes | None = None
        self.dead = False
        self.on_stop: list[Any] = []  # callables(worker), run once when the worker stops
        self._env = dict(env)
        self._sink = sink
        self.proc: subprocess.Popen[bytes] | _ForkedProcess | None = None
        self._reader: threading.Thread | None = None  # the runtime's output into the sink
        self.server = _RuntimeApiServer(self)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def start(self, forkserver: _ForkServer | None = None) -> None:
        """Run the runtime: forked from ``forkserver`` when there is one that still forks,
        else a process of its own."""
        env = self._env
        env["AWS_LAMBDA_RUNTIME_API"] = f"127.0.0.1:{self.server.server_address[1]}"
        env["AWS_LAMBDA_LOG_STREAM_NAME"] = (
            time.strftime("%Y/%m/%d/", time.gmtime()) + f"[$LATEST]{uuid.uuid4().hex}"
        )
        if forkserver is not None:
            with contextlib.suppress(OSError):
                self.proc = forkserver.fork(env)
        if self.proc is None:
            self.proc = subprocess.Popen(  # noqa: S603 - our interpreter, fixed module
                # -S: no site-packages; only what Lambda gives a function (see packages.py)
                [sys.executable, "-S", "-m", "awslambdaric", self.spec.handler],
                cwd=self.spec.code_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._reader = threading.Thread(target=self._pump, args=(self._sink,), daemon=True)
        self._reader.start()

    def _pump(self, sink: _LogSink) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            # A process killed between a line's text and its newline (print writes them apart)
            # ends on a part line: CloudWatch keeps it as an event of its own, so end it here
            # rather than glue the next worker's first line to it in the function's log.
            sink.write(line if line.endswith(b"\n") else line + b"\n")

    # --- called by the Runtime API server -------------------------------------------------
    def next_invocation(self) -> _Invocation | None:
        inv = self._pending.get()
        if inv is None:
            return None
        with self._lock:
            inv.deadline = time.time() + inv.timeout
            self._current = inv
        inv.started.set()
        return inv

    def complete(self, request_id: str, outcome: str, body: bytes) -> bool:
        with self._lock:
            inv = self._current
            if inv is None or inv.request_id != request_id:
                return False
            self._current = None
        inv.outcome = outcome
        inv.document = body
        inv.done.set()
        return True

    def init_failed(self, body: bytes) -> None:
        self.init_error = body

    # --- called by Runtime -------------------------------------------------------------------
    def alive(self) -> bool:
        return (
            not self.dead
            and self.proc is not None
            and self.proc.poll() is None
            and self.init_error is None
        )

    def run(self, inv: _Invocation) -> tuple[str, bytes]:
        """Run one invocation; returns (outcome, document). Outcomes other than "response" and
        "error" leave the worker dead."""
        assert self.proc is not None
        self._pending.put(inv)
        init_deadline = time.monotonic() + INIT_TIMEOUT_SECONDS
        while not inv.done.wait(0.02):
            if inv.started.is_set():
                if time.time() > inv.deadline:
                    self.stop()
                    return "timeout", b""
            elif self.init_error is not None or time.monotonic() > init_deadline:
                self.stop()
                return "init_error", self.init_error or b""
            if self.proc.poll() is not None and not inv.done.wait(0.2):
                code = self.proc.returncode
                self.stop()
                if self.init_error is not None:
                    return "init_error", self.init_error
                return "exit", _exit_status(code).encode()
        return inv.outcome, inv.document

    def stop(self) -> None:
        """Kill the runtime (SIGKILL of its process group, waited for); idempotent."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=5)
        for callback in self.on_stop:
            with contextlib.suppress(Exception):
                callback(self)
        with contextlib.suppress(queue.Full):
            self._pending.put_nowait(None)
        # serve_forever notices shutdown within its poll interval: do not make the caller wait.
        threading.Thread(target=self._close_server, daemon=True).start()

    def drain(self, timeout: float = 5.0) -> None:
        """Wait until what the stopped runtime wrote is logged (its pipe read to the end): a
        runtime closed right after an answer (`python -m emulator invoke`) keeps its last lines."""
        if self._reader is not None:
            self._reader.join(timeout)

    def _close_server(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _ForkServer:
    """A function's fork server (forkserver.py): a process that has imported the runtime's boto3
    and forks the function's workers, each ~0.5 s of CPU cheaper to start than a process of its
    own. Its workers die with it."""

    def __init__(self, spec: FunctionSpec, env: dict[str, str]) -> None:
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(  # noqa: S603 - our interpreter, our script
                [sys.executable, "-S", str(_FORKSERVER), str(theirs.fileno())],
                cwd=spec.code_dir,
                env=env,
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._requests = itertools.count(1)
        self._cond = threading.Condition()
        self._forked: dict[int, int | None] = {}  # request -> pid, None while it is forking
        self._running: set[int] = set()
        self._exit_codes: dict[int, int] = {}
        self._closing = False
        self.ended = False
        threading.Thread(target=self._read, daemon=True).start()

    def fork(self, env: dict[str, str]) -> _ForkedProcess:
        """A worker with this environment, its output on the returned process's ``stdout``.
        OSError when the server has ended or does not answer within the init timeout."""
        request = next(self._requests)
        with self._cond:
            if self.ended or self._closing:
                raise OSError("the fork server has ended")
            self._forked[request] = None
        read_fd, write_fd = os.pipe()
        try:
            message = json.dumps({"request": request, "env": env}).encode()
            socket.send_fds(self._control, [message], [write_fd])
            with self._cond:
                self._cond.wait_for(
                    lambda: self._forked[request] is not None or self.ended, INIT_TIMEOUT_SECONDS
                )
                pid = self._forked.pop(request)
            if pid is None:
                raise OSError("the fork server did not fork")
        except OSError:
            with self._cond:
                self._forked.pop(request, None)
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        return _ForkedProcess(pid, os.fdopen(read_fd, "rb"), self)

    def exit_code(self, pid: int, timeout: float | None = 0) -> int | None:
        """The worker's exit code (as Popen's returncode) once it has ended, waiting up to
        ``timeout`` seconds (None: for ever); None while it runs."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exit_codes, timeout)
            return self._exit_codes.pop(pid, None)

    def _read(self) -> None:
        while True:
            try:
                message = self._control.recv(1 << 16)
            except OSError:
                message = b""
            if not message:
                break
            answer = json.loads(message)
            with self._cond:
                if "pid" in answer:
                    if answer["request"] in self._forked:
                        self._forked[answer["request"]] = answer["pid"]
                        self._running.add(answer["pid"])
                    else:  # forked after its caller gave up waiting
                        with contextlib.suppress(OSError):
                            os.killpg(answer["pid"], signal.SIGKILL)
                else:
                    self._running.discard(answer["exited"])
                    self._exit_codes[answer["exited"]] = answer["code"]
                last = self._closing and not self._running
                self._cond.notify_all()
            if last:
                self._shut_down()
        with self._cond:
            self.ended = True
            for pid in self._running:  # PR_SET_PDEATHSIG: they are killed with the server
                self._exit_codes.setdefault(pid, -signal.SIGKILL)
            self._running.clear()
            self._cond.notify_all()

    def close(self) -> None:
        """Fork no more. The server ends once its last worker has: at once when none runs (a
        stack update retires a pool whose workers may still be finishing an invocation)."""
        with self._cond:
            self._closing = True
            idle = not self._running
        if idle:
            self._shut_down()

    def _shut_down(self) -> None:
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _ForkedProcess:
    """A worker forked by a fork server: the part of Popen's interface a _Worker uses."""

    def __init__(self, pid: int, stdout: Any, server: _ForkServer) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._server = server

    def poll(self) -> int | None:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid, timeout)
            if self.returncode is None and timeout != 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode


class _AccountSlots:
    """The account's concurrent executions, handed to waiting invocations in the order they
    came: a released slot goes straight to the longest waiting one. (A semaphore lets the thread
    that just released a slot take it back before a waiter wakes: under load one mapping's busy
    lanes kept every slot and the other functions' invocations starved.)"""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._lock = threading.Lock()
        self._waiting: deque[threading.Lock] = deque()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the invocation that hands its slot over

    def __exit__(self, *_: object) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


class _Pool:
    def __init__(self, runtime: Runtime, spec: FunctionSpec) -> None:
        self.runtime = runtime
        self.spec = spec
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.busy = 0
        self.closed = False
        self.sink = runtime._sink_for(spec)
        self._forkserver: _ForkServer | None = None
        self._forkserver_lock = threading.Lock()

    def acquire(self) -> _Worker:
        with self.cond:
            while True:
                while self.idle:
                    worker = self.idle.pop()
                    if worker.alive():
                        self.busy += 1
                        return worker
                    worker.stop()
                if self.busy < self.runtime.max_concurrency:
                    self.busy += 1
                    break
                self.cond.wait()
        try:
            return self.runtime._new_worker(self.spec, self.sink, self.forkserver())
        except BaseException:
            self.release(None)
            raise

    def forkserver(self) -> _ForkServer | None:
        """The function's fork server, started with its first worker (again if it ended); None
        when it cannot start."""
        with self._forkserver_lock:
            if self._forkserver is None or self._forkserver.ended:
                if self._forkserver is not None:
                    self._forkserver.close()
                try:
                    self._forkserver = _ForkServer(self.spec, self.runtime.environment(self.spec))
                except OSError:
                    self._forkserver = None
            return self._forkserver

    def release(self, worker: _Worker | None) -> None:
        with self.cond:
            self.busy -= 1
            retired = self.closed
            if worker is not None and worker.alive() and not retired:
                self.idle.append(worker)
            self.cond.notify()
        if worker is not None and retired:  # the function changed: this environment is old
            worker.stop()

    def warm(self) -> None:
        with self.cond:
            if self.idle or self.busy:
                return
            self.busy += 1
        worker = None
        try:
            worker = self.runtime._new_worker(self.spec, self.sink, self.forkserver())
        finally:
            self.release(worker)

    def close(self) -> None:
        """Stop the idle workers; a busy one stops when its invocation ends."""
        with self.cond:
            self.closed = True
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.stop()
        with self._forkserver_lock:
            if self._forkserver is not None:
                self._forkserver.close()
        self.sink.close()


def _exit_status(code: int | None) -> str:
    """As Lambda words it: "exit status 3", or "signal: killed" for a process killed by SIGKILL."""
    if code is None:
        return "unknown"
    if code < 0:
        if -code == signal.SIGKILL:
            return "signal: killed"
        try:
            return f"signal: {signal.Signals(-code).name}"
        except ValueError:
            return f"signal: {-code}"
    return f"exit status {code}"


def _error(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {"errorType": error_type, "errorMessage": message, "requestId": request_id}


class Runtime:
    """The Lambda service's invoke path for the functions of one stack. Thread-safe."""

    def __init__(
        self,
        functions: Iterable[FunctionSpec] = (),
        *,
        endpoint_url: str | None = None,
        faults: Faults | None = None,
        log_dir: Path | None = Path(".emulator/logs"),
        echo: bool = False,
        echo_prefix: bool = True,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        account_concurrency: int = DEFAULT_ACCOUNT_CONCURRENCY,
        aws_env: dict[str, str] | None = None,
        ca_bundle: Path | None = None,
    ) -> None:
        """``endpoint_url``: where the functions' AWS SDK calls go (with dummy credentials),
        an https one trusted by its authority's PEM file ``ca_bundle``; None keeps the AWS_*
        settings of ``aws_env`` (default: this process's environment).
        ``max_concurrency``: workers per function; ``account_concurrency``: invocations running
        at once over all functions (an invoke beyond it waits for one to end before its own
        timeout starts, as an event source mapping's poller waits out a throttle)."""
        self.endpoint_url = endpoint_url
        self.ca_bundle = ca_bundle
        self.faults = faults or Faults()
        self.log_dir = log_dir
        self.echo = echo
        self.echo_prefix = echo_prefix
        self.max_concurrency = max_concurrency
        self._account_slots = _AccountSlots(account_concurrency)
        self._aws_env = dict(os.environ if aws_env is None else aws_env)
        self._specs: dict[str, FunctionSpec] = {}
        self._names: dict[str, str] = {}
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._workers: set[_Worker] = set()
        # access key id -> (logical id, worker): who is calling the local endpoint
        self._callers: dict[str, tuple[str, _Worker]] = {}
        self._key_prefix = "AKIA" + "".join(
            secrets.choice(_KEY_PREFIX_ALPHABET) for _ in range(16 - _KEY_NUMBER_WIDTH)
        )
        self._key_numbers = itertools.count(1)
        # Told of every invocation and every line a function prints (the local stack's metrics,
        # emulator/monitoring): observer.invoked(spec, result), observer.logged(spec, line).
        self.observers: list[Any] = []
        for spec in functions:
            self.register(spec)

    # --- registry ----------------------------------------------------------------------------
    def register(self, spec: FunctionSpec) -> None:
        """``spec`` served by its names; a changed spec of a registered function (a stack update)
        retires its idle workers, so the next invocation starts one with the new code."""
        with self._lock:
            retired = None
            if self._specs.get(spec.logical_id) not in (None, spec):
                retired = self._pools.pop(spec.logical_id, None)
            self._specs[spec.logical_id] = spec
            for name in (spec.logical_id, spec.function_name, spec.arn):
                self._names[name] = spec.logical_id
        if retired is not None:
            retired.close()

    @property
    def functions(self) -> list[FunctionSpec]:
        return list(self._specs.values())

    def runnable(self, function_name: str) -> bool:
        """Registered: its code is on the runtime (a stack's functions register once deployed)."""
        return self.resolve(function_name) is not None

    def resolve(self, function_name: str) -> FunctionSpec | None:
        """Physical name, logical id, ARN or qualified ARN (``:$LATEST``) -> spec."""
        name = function_name
        if name.startswith("arn:") and name.count(":") == 7:
            name = name.rsplit(":", 1)[0]
        logical_id = self._names.get(name)
        return self._specs.get(logical_id) if logical_id else None

    # --- callers -----------------------------------------------------------------------------
    def caller(self, access_key_id: str) -> tuple[str, _Worker] | None:
        """``(logical_id, worker)`` of the live worker that signs with ``access_key_id``, else
        None (anything that is not a worker of this runtime: tests, the ESM engine, the deployer,
        another process's workers). Thread-safe and cheap (one dict lookup)."""
        with self._lock:
            return self._callers.get(access_key_id)

    def kill(self, access_key_id: str) -> bool:
        """Kill the worker signing with ``access_key_id`` as a crash would: SIGKILL of its
        process group, waited for; its invocation (if any) then fails with Runtime.ExitError and
        the next one starts cold. False when no live worker has that key."""
        found = self.caller(access_key_id)
        if found is None:
            return False
        found[1].stop()
        return True

    def _new_access_key(self) -> str:
        number = next(self._key_numbers) % 10**_KEY_NUMBER_WIDTH
        return f"{self._key_prefix}{number:0{_KEY_NUMBER_WIDTH}d}"

    def _forget(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
            entry = self._callers.get(worker.access_key_id or "")
            if entry is not None and entry[1] is worker:
                del self._callers[worker.access_key_id or ""]

    # --- environment ---------------------------------------------------------------------------
    def environment(self, spec: FunctionSpec, access_key_id: str | None = None) -> dict[str, str]:
        """The process environment of ``spec``'s workers, as the python3.13 runtime sets it
        (``access_key_id``: the worker's own key, with a local endpoint)."""
        env = {k: os.environ[k] for k in _HOST_ENV if k in os.environ}
        if self.endpoint_url:
            env.update(
                AWS_ENDPOINT_URL=self.endpoint_url,
                AWS_ACCESS_KEY_ID=access_key_id or "testing",
                AWS_SECRET_ACCESS_KEY="testing",  # noqa: S106 - dummy credentials
                AWS_SESSION_TOKEN="testing",  # noqa: S106
            )
            if self.ca_bundle is not None:
                env["AWS_CA_BUNDLE"] = str(self.ca_bundle)
        else:
            env.update({k: v for k, v in self._aws_env.items() if k.startswith("AWS_")})
        layers = [str(path) for layer in spec.layer_dirs for path in layer_path(layer)]
        runtime_packages = str(packages_dir())
        env.update(
            AWS_REGION=spec.region,
            AWS_DEFAULT_REGION=spec.region,
            AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
            AWS_LAMBDA_FUNCTION_NAME=spec.function_name,
            AWS_LAMBDA_FUNCTION_MEMORY_SIZE=str(spec.memory_size),
            AWS_LAMBDA_FUNCTION_VERSION="$LATEST",
            AWS_LAMBDA_LOG_GROUP_NAME=f"/aws/lambda/{spec.function_name}",
            AWS_LAMBDA_INITIALIZATION_TYPE="on-demand",
            AWS_EXECUTION_ENV=f"AWS_Lambda_{spec.runtime}",
            AWS_SAM_LOCAL="true",  # as `sam local invoke` sets it (Powertools Tracer stays off)
            _HANDLER=spec.handler,
            LAMBDA_TASK_ROOT=str(spec.code_dir),
            LAMBDA_RUNTIME_DIR=runtime_packages,
            # Lambda's module search path: the code, the layers, the runtime's packages.
            PYTHONPATH=os.pathsep.join([str(spec.code_dir), *layers, runtime_packages]),
            PYTHONUNBUFFERED="1",
            TZ=":UTC",
            LANG="en_US.UTF-8",
        )
        env.update({k: str(v) for k, v in spec.environment.items()})
        return env

    # --- workers ---------------------------------------------------------------------------
    def _sink_for(self, spec: FunctionSpec) -> _LogSink:
        path = self.log_dir / f"{spec.logical_id}.log" if self.log_dir else None
        prefix = f"[{spec.logical_id}] " if self.echo_prefix else ""

        def logged(line: bytes) -> None:
            for observer in self.observers:
                observer.logged(spec, line)

        return _LogSink(path, self.echo, prefix, on_line=logged)

    def _pool(self, spec: FunctionSpec) -> _Pool:
        with self._lock:
            if self._closed:
                raise RuntimeError("runtime is closed")
            pool = self._pools.get(spec.logical_id)
            if pool is None:
                pool = self._pools[spec.logical_id] = _Pool(self, spec)
            return pool

    def _new_worker(
        self, spec: FunctionSpec, sink: _LogSink, forkserver: _ForkServer | None = None
    ) -> _Worker:
        key = self._new_access_key() if self.endpoint_url else None
        try:
            worker = _Worker(spec, self.environment(spec, key), sink, access_key_id=key)
        except OSError as exc:
            raise RuntimeError(f"cannot start a worker for {spec.logical_id}: {exc}") from exc
        worker.on_stop.append(self._forget)
        with self._lock:
            self._workers.add(worker)
            if key is not None:  # known before the process runs: its init's calls count too
                self._callers[key] = (spec.logical_id, worker)
            closed = self._closed
        if closed:
            worker.stop()
            raise RuntimeError("runtime is closed")
        try:
            worker.start(forkserver)
        except OSError as exc:
            worker.stop()
            raise RuntimeError(f"cannot start a worker for {spec.logical_id}: {exc}") from exc
        return worker

    def warm(self, names: Iterable[str] | None = None) -> None:
        """Start one worker per function now (its init runs in the background); nothing once the
        runtime is closed (the stack stopped while it warmed)."""
        for name in names or list(self._specs):
            spec = self.resolve(name)
            if spec is None:
                continue
            try:
                self._pool(spec).warm()
            except RuntimeError:
                if self._closed:
                    return
                raise

    # --- invoke ------------------------------------------------------------------------------
    def invoke(self, function_name: str, event: Any) -> InvokeResult:
        """Invoke synchronously (RequestResponse); ``event`` is JSON-serialisable or bytes."""
        spec = self.resolve(function_name)
        if spec is None:
            return InvokeResult(
                False,
                None,
                _error("ResourceNotFoundException", f"Function not found: {function_name}", ""),
            )
        body = event if isinstance(event, bytes) else json.dumps(event).encode()
        with self._account_slots:
            result = self._invoke(spec, body)
        for observer in self.observers:
            observer.invoked(spec, result)
        return result

    def _invoke(self, spec: FunctionSpec, body: bytes) -> InvokeResult:
        inv = _Invocation(body, spec.timeout, spec.arn)
        if self.faults.take_failure(spec.logical_id):
            error = _error(
                "Emulator.InjectedFailure",
                f"RequestId: {inv.request_id} Error: injected failure (fail_invocations): the "
                "function did not run",
                inv.request_id,
            )
            return InvokeResult(
                False, None, error, inv.request_id, spec.logical_id, raw=json.dumps(error).encode()
            )
        started = time.perf_counter()
        try:
            pool = self._pool(spec)
            worker = pool.acquire()
        except RuntimeError as exc:  # closed (shutting down) or the worker could not start
            error = _error("Emulator.RuntimeUnavailable", str(exc), inv.request_id)
            return InvokeResult(False, None, error, inv.request_id, spec.logical_id)
        try:
            worker.calls = 0
            worker.crash_after_call = self.faults.draw_invocation_crash(spec.logical_id)
            outcome, document = worker.run(inv)
            worker.crash_after_call = None
            crash = self.faults.take_crash(spec.logical_id)
            if crash:
                worker.stop()  # a crashed environment does not come back warm
        finally:
            pool.release(worker)
            if worker.dead:
                self._forget(worker)
        duration = (time.perf_counter() - started) * 1000
        result = self._result(spec, inv, outcome, document)
        if crash and result.ok:
            error = _error(
                "Emulator.InjectedCrash",
                f"RequestId: {inv.request_id} Error: injected crash after the function ran "
                "(its side effects happened; the invocation reports failure)",
                inv.request_id,
            )
            result = InvokeResult(False, None, error, raw=json.dumps(error).encode())
        result.request_id = inv.request_id
        result.logical_id = spec.logical_id
        result.duration_ms = duration
        return result

    def _result(
        self, spec: FunctionSpec, inv: _Invocation, outcome: str, document: bytes
    ) -> InvokeResult:
        rid = inv.request_id
        if outcome == "response":
            try:
                payload = json.loads(document) if document else None
            except ValueError:
                payload = document.decode("utf-8", "replace")
            return InvokeResult(True, payload, None, raw=document)
        if outcome in ("error", "init_error") and document:
            try:
                error = json.loads(document)
            except ValueError:
                error = _error("Runtime.Unknown", document.decode("utf-8", "replace"), rid)
            if isinstance(error, dict):
                error["requestId"] = rid
            else:
                error = _error("Runtime.Unknown", str(error), rid)
        elif outcome == "timeout":
            error = _error(
                "Sandbox.Timedout",
                f"RequestId: {rid} Error: Task timed out after {spec.timeout:.2f} seconds",
                rid,
            )
        elif outcome == "init_error":
            error = _error(
                "Runtime.InitError",
                f"RequestId: {rid} Error: init did not complete within {INIT_TIMEOUT_SECONDS} s",
                rid,
            )
        else:
            error = _error(
                "Runtime.ExitError",
                f"RequestId: {rid} Error: Runtime exited with error: "
                f"{document.decode() or 'unknown'}",
                rid,
            )
        return InvokeResult(False, None, error, raw=json.dumps(error).encode())

    def close(self) -> None:
        """Kill every worker (idempotent)."""
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
            workers = list(self._workers)
        for worker in workers:
            worker.stop()
        for worker in workers:  # before the pools close their log files
            worker.drain()
        for pool in pools:
            pool.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
