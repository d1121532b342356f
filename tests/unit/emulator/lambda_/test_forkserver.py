"""Workers forked from a function's fork server: the worker a fresh `python -S -m awslambdaric`
would be (its path, environment, directory, arguments), with the runtime's boto3 imported
before; a function's own boto3 is never preloaded; the server's end ends its workers."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading

from emulator.lambda_.workers import _FORKSERVER, FunctionSpec, Runtime, _ForkedProcess, _Pool
from harness.polling import eventually
from tests.unit.emulator.lambda_.support import make_function

REPORT = """
import os, sys

def lambda_handler(event, context):
    if "hold_until" in event:  # the test creates this file to let the invocation end
        import time
        while not os.path.exists(event["hold_until"]):
            time.sleep(0.01)
    return {
        "path": sys.path,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "argv": sys.argv,
        "no_site": sys.flags.no_site,
        "main": sys.modules["__main__"].__spec__.name,
        "boto3_preloaded": "boto3" in sys.modules,
        "pid": os.getpid(),
    }
"""
PER_WORKER = ("AWS_ACCESS_KEY_ID", "AWS_LAMBDA_RUNTIME_API", "AWS_LAMBDA_LOG_STREAM_NAME")
PER_INVOCATION = "_X_AMZN_TRACE_ID"


def reporting_function(root, logical_id="Report") -> FunctionSpec:
    spec = make_function(root, logical_id, timeout=30.0)
    (spec.code_dir / "app.py").write_text(REPORT)
    return spec


def ended(pid: int) -> bool:
    """Gone, or a zombie left to whoever reaps orphans (its server, that would have, was killed)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def worker_of(runtime: Runtime, payload: dict):
    return runtime.caller(payload["env"]["AWS_ACCESS_KEY_ID"])[1]


def test_a_forked_worker_is_the_worker_a_fresh_process_is(tmp_path, monkeypatch):
    spec = reporting_function(tmp_path)
    with Runtime([spec], endpoint_url="http://127.0.0.1:4599", log_dir=None) as forking:
        forked = forking.invoke("Report", {})
        assert forked.ok, forked.error
        assert isinstance(worker_of(forking, forked.payload).proc, _ForkedProcess)
    monkeypatch.setattr(_Pool, "forkserver", lambda _pool: None)
    with Runtime([spec], endpoint_url="http://127.0.0.1:4599", log_dir=None) as fresh:
        started = fresh.invoke("Report", {})
        assert started.ok, started.error
        assert not isinstance(worker_of(fresh, started.payload).proc, _ForkedProcess)

    ours, theirs = forked.payload, started.payload
    for name in (*PER_WORKER, PER_INVOCATION):
        assert ours["env"].pop(name) != theirs["env"].pop(name)
    for key in ("path", "env", "cwd", "argv", "no_site", "main"):
        assert ours[key] == theirs[key], key
    assert ours["cwd"] == str(spec.code_dir)
    assert ours["path"][0] == str(spec.code_dir)
    # The one difference: the runtime's boto3 is already imported (the handler did not ask).
    assert (ours["boto3_preloaded"], theirs["boto3_preloaded"]) == (True, False)


def test_each_worker_of_a_function_is_a_process_of_its_own_from_one_server(tmp_path):
    spec = reporting_function(tmp_path)
    with Runtime([spec], endpoint_url="http://127.0.0.1:4599", log_dir=None) as rt:
        results = []
        held = {"hold_until": str(tmp_path / "release")}
        threads = [
            threading.Thread(target=lambda: results.append(rt.invoke("Report", held)))
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        eventually(lambda: sum(w._current is not None for w in list(rt._workers)) == 3)
        (tmp_path / "release").touch()
        for thread in threads:
            thread.join()
        assert all(result.ok for result in results), [r.error for r in results]
        assert len({result.payload["pid"] for result in results}) == 3
        keys = {result.payload["env"]["AWS_ACCESS_KEY_ID"] for result in results}
        assert len(keys) == 3
        servers = {worker_of(rt, result.payload).proc._server for result in results}
        assert len(servers) == 1


def test_a_boto3_of_the_functions_own_is_imported_by_each_worker_not_preloaded(tmp_path):
    spec = make_function(tmp_path, "OwnBoto3")
    (spec.code_dir / "boto3.py").write_text("import os\nIMPORTED_BY = os.getpid()\n")
    (spec.code_dir / "app.py").write_text(
        "import os, boto3\n"
        "def lambda_handler(event, context):\n"
        "    return {'file': boto3.__file__, 'by': boto3.IMPORTED_BY, 'pid': os.getpid()}\n"
    )
    with Runtime([spec], log_dir=None) as rt:
        result = rt.invoke("OwnBoto3", {})
    assert result.ok, result.error
    assert result.payload["file"] == str(spec.code_dir / "boto3.py")
    assert result.payload["by"] == result.payload["pid"]


def test_workers_end_with_their_server_and_the_next_invocation_starts_a_new_one(tmp_path):
    spec = reporting_function(tmp_path)
    with Runtime([spec], endpoint_url="http://127.0.0.1:4599", log_dir=None) as rt:
        first = rt.invoke("Report", {})
        never = tmp_path / "never-created"
        worker = worker_of(rt, first.payload)
        server = worker.proc._server
        running = []
        thread = threading.Thread(
            target=lambda: running.append(rt.invoke("Report", {"hold_until": str(never)}))
        )
        thread.start()
        eventually(lambda: worker._current, timeout=10)  # the warm worker runs it
        os.kill(server.proc.pid, signal.SIGKILL)
        thread.join(timeout=20)
        assert not thread.is_alive()
        (killed,) = running
        assert not killed.ok
        assert killed.error["errorType"] == "Runtime.ExitError"
        assert "signal: killed" in killed.error["errorMessage"]
        assert ended(first.payload["pid"])

        again = rt.invoke("Report", {})
        assert again.ok, again.error
        assert worker_of(rt, again.payload).proc._server is not server


def test_a_stack_update_lets_a_running_invocation_finish_then_ends_the_old_server(tmp_path):
    spec = reporting_function(tmp_path)
    with Runtime([spec], endpoint_url="http://127.0.0.1:4599", log_dir=None) as rt:
        running = []
        held = {"hold_until": str(tmp_path / "release")}
        thread = threading.Thread(target=lambda: running.append(rt.invoke("Report", held)))
        thread.start()
        (worker,) = eventually(lambda: [w for w in list(rt._workers) if w._current is not None])
        server = worker.proc._server
        rt.register(FunctionSpec(**{**vars(spec), "environment": {"VERSION": "2"}}))
        assert server.proc.poll() is None  # its worker is still running the invocation
        (tmp_path / "release").touch()
        thread.join(timeout=20)
        (finished,) = running
        assert finished.ok, finished.error
        eventually(lambda: server.proc.poll() is not None, timeout=10)
        updated = rt.invoke("Report", {})
        assert updated.ok, updated.error
        assert updated.payload["env"]["VERSION"] == "2"


def test_closing_the_runtime_ends_every_fork_server_and_worker(tmp_path):
    spec = reporting_function(tmp_path)
    rt = Runtime([spec], log_dir=None)
    result = rt.invoke("Report", {})
    assert result.ok, result.error
    server = rt._pools["Report"]._forkserver
    rt.close()
    assert server.proc.poll() is not None
    assert ended(result.payload["pid"])


def test_a_server_whose_stack_goes_away_during_a_fork_ends_quietly(tmp_path):
    """The stack stopped right after asking for a worker: the server's answer finds no one. It
    ends its worker and itself without a traceback in the stack's output."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        server = subprocess.Popen(
            [sys.executable, "-S", str(_FORKSERVER), str(theirs.fileno())],
            cwd=tmp_path,
            pass_fds=[theirs.fileno()],
            stderr=subprocess.PIPE,
            text=True,
        )
    read_fd, write_fd = os.pipe()
    worker_env = {"_HANDLER": "app.lambda_handler", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9"}
    request = json.dumps({"request": 1, "env": worker_env}).encode()
    socket.send_fds(ours, [request], [write_fd])
    os.close(write_fd)
    ours.close()
    _, stderr = server.communicate(timeout=30)
    assert (server.returncode, stderr) == (0, "")
    with os.fdopen(read_fd, "rb") as output:  # the worker's end of its output pipe: closed
        output.read()
