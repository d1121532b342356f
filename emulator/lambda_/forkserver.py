"""A function's fork server: one process that has imported the runtime's boto3, from which the
function's workers are forked instead of each starting Python and importing it again.

Run by workers.py as ``python -S forkserver.py <fd>`` in the function's code directory with the
function's environment, so its module search path is the one ``python -S -m awslambdaric`` gets
there (the code, the layers, the runtime's packages). Stdlib only; nothing else of the emulator.

It imports boto3 (and with it botocore and their dependencies, wherever the function's path finds
them) when that boto3 is the runtime's own; otherwise, or when the import fails, it preloads
nothing and only forks. Importing boto3 reads no per-worker setting (credentials, the Runtime
API's address are read later), which is why a forked worker is the worker a fresh process would
be, with ~0.5 s less CPU before its handler's init: awslambdaric itself is not preloaded, its
native client reads the Runtime API's address when imported.

Protocol over the socket ``<fd>`` (SOCK_SEQPACKET, one message per packet):
- in: ``{"request": R, "env": {...}}`` with one file descriptor, the worker's stdout and stderr;
  the worker is forked, in a process group of its own, and ``{"request": R, "pid": N}`` answered;
- out, whenever a worker ends: ``{"exited": N, "code": C}`` (C as Popen's returncode);
- end of input: every worker is killed and the server exits. Workers die with the server too.
"""

import contextlib
import ctypes
import importlib
import importlib.util
import json
import os
import runpy
import select
import signal
import socket
import sys

_PR_SET_PDEATHSIG = 1


def preload() -> None:
    """Import boto3 if the function's path finds the runtime's own; nothing if that fails (each
    worker then meets the error in its own init)."""
    runtime_dir = os.environ.get("LAMBDA_RUNTIME_DIR")
    spec = importlib.util.find_spec("boto3")
    if not runtime_dir or spec is None or not (spec.origin or "").startswith(runtime_dir + os.sep):
        return
    imported = set(sys.modules)
    try:
        importlib.import_module("boto3")
    except Exception:  # any error of the import is the worker's to meet
        for name in set(sys.modules) - imported:
            del sys.modules[name]


def serve(control: socket.socket) -> dict[str, str] | None:
    """Fork workers until the control socket closes. Returns only in a forked worker: its
    environment."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    workers: set[int] = set()
    while True:
        readable, _, _ = select.select([control, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 512)
            _report_exits(control, workers)
        if control not in readable:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 1)
        except OSError:
            message, fds = b"", []
        if not message:
            _stop(workers)
            return None
        request = json.loads(message)
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (wake_r, wake_w):
                os.close(fd)
            control.close()
            _become_worker(fds[0], server)
            return request["env"]
        # Its own process group before the answer (the worker sets it too, whoever runs first):
        # the caller kills the group as soon as it knows the pid.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(fds[0])
        workers.add(pid)
        try:
            control.send(json.dumps({"pid": pid, "request": request["request"]}).encode())
        except OSError:  # the stack went away meanwhile (stopped right after a cold start)
            _stop(workers)
            return None


def _become_worker(output_fd: int, server: int) -> None:
    os.setpgid(0, 0)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the server died before prctl: die as it would have made us
        os._exit(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(devnull)
    os.close(output_fd)


def _report_exits(control: socket.socket, workers: set[int]) -> None:
    while workers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        workers.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        try:
            control.send(json.dumps({"exited": pid, "code": code}).encode())
        except OSError:
            return


def _stop(workers: set[int]) -> None:
    for pid in workers:
        _kill(pid)
    for pid in workers:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def set_by_startup() -> dict[str, str]:
    """What Python's startup added to the environment it was given (PEP 538's LC_CTYPE under
    the C locale): a fresh worker's startup adds the same to its own."""
    with open("/proc/self/environ", "rb") as given:
        names = {entry.split(b"=", 1)[0].decode() for entry in given.read().split(b"\0") if entry}
    return {name: value for name, value in os.environ.items() if name not in names}


def run_worker(env: dict[str, str], startup: dict[str, str]) -> None:
    """What ``python -S -m awslambdaric <handler>`` does, in this forked process."""
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(startup)
    sys.argv = ["-m", env["_HANDLER"]]
    runpy.run_module("awslambdaric", run_name="__main__", alter_sys=True)


def main() -> None:
    sys.path[0] = os.getcwd()  # as `python -m` sets it (the script's own directory is not there)
    control = socket.socket(fileno=int(sys.argv[1]))
    startup = set_by_startup()
    preload()
    env = serve(control)
    if env is not None:
        run_worker(env, startup)


if __name__ == "__main__":
    main()
