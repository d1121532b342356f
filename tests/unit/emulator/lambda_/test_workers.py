"""The local Lambda runtime: real worker processes (awslambdaric) running handlers from tmp_path."""

import dataclasses
import json
import os
import re
import threading
import time

import pytest

from emulator.core.faults import Faults
from emulator.lambda_.packages import packages_dir
from emulator.lambda_.workers import Runtime, _AccountSlots
from harness.polling import eventually
from tests.unit.emulator.lambda_.support import make_function


@pytest.fixture
def runtime(tmp_path):
    faults = Faults()
    rt = Runtime(
        [
            make_function(tmp_path, "FnA"),
            make_function(tmp_path, "FnB", environment={"OTHER": "b"}, timeout=1.0),
        ],
        endpoint_url="http://127.0.0.1:4599",
        faults=faults,
        log_dir=tmp_path / "logs",
    )
    yield rt
    rt.close()


def test_returns_payload_with_a_real_context(runtime):
    result = runtime.invoke("stack-FnA-ABC", {})
    assert result.ok, result.error
    payload = result.payload
    assert payload["function_name"] == "stack-FnA-ABC"
    assert payload["memory_limit_in_mb"] == "256"
    assert payload["invoked_function_arn"] == (
        "arn:aws:lambda:us-east-1:123456789012:function:stack-FnA-ABC"
    )
    assert payload["aws_request_id"] == result.request_id
    assert 0 < payload["remaining_before"] <= 3000
    assert result.logical_id == "FnA"


def test_function_environment_is_the_lambda_one(runtime, tmp_path):
    env = runtime.invoke("FnA", {}).payload["env"]
    assert env["TABLE_NAME"] == "FnA-table"
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:4599"
    # its own access key (of moto's default account), known to the runtime as FnA's worker
    assert re.fullmatch(r"AKIA[A-Z0-9]{16}", env["AWS_ACCESS_KEY_ID"])
    logical_id, worker = runtime.caller(env["AWS_ACCESS_KEY_ID"])
    assert logical_id == "FnA"
    assert worker.alive()
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == "stack-FnA-ABC"
    assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "256"
    assert env["AWS_LAMBDA_FUNCTION_VERSION"] == "$LATEST"
    assert env["AWS_LAMBDA_LOG_GROUP_NAME"] == "/aws/lambda/stack-FnA-ABC"
    assert env["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.13"
    assert env["_HANDLER"] == "app.lambda_handler"
    code = tmp_path / "FnA" / "code"
    assert env["LAMBDA_TASK_ROOT"] == str(code)
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(code),
        str(tmp_path / "FnA" / "layer"),
        str(packages_dir()),
    ]
    assert env["LAMBDA_RUNTIME_DIR"] == str(packages_dir())


def test_a_stack_served_over_tls_gives_its_workers_the_authority_to_trust(tmp_path):
    spec = make_function(tmp_path, "FnA")
    plain = Runtime([spec], endpoint_url="http://127.0.0.1:4599")
    secured = Runtime([spec], endpoint_url="https://127.0.0.1:4599", ca_bundle=tmp_path / "ca.pem")
    assert "AWS_CA_BUNDLE" not in plain.environment(spec)
    env = secured.environment(spec)
    assert (env["AWS_ENDPOINT_URL"], env["AWS_CA_BUNDLE"]) == (
        "https://127.0.0.1:4599",
        str(tmp_path / "ca.pem"),
    )


def test_environments_are_isolated(runtime, monkeypatch):
    monkeypatch.setenv("HOST_ONLY_SECRET", "x")
    a = runtime.invoke("FnA", {}).payload["env"]
    b = runtime.invoke("FnB", {}).payload["env"]
    assert "OTHER" not in a
    assert b["OTHER"] == "b"
    assert "TABLE_NAME" not in b
    assert "HOST_ONLY_SECRET" not in a
    assert "HOST_ONLY_SECRET" not in b


def test_warm_worker_is_reused(runtime):
    first = runtime.invoke("FnA", {}).payload
    second = runtime.invoke("FnA", {}).payload
    assert first["instance"] == second["instance"]
    assert second["calls"] == first["calls"] + 1


def test_a_changed_spec_of_a_registered_function_runs_in_a_new_worker(runtime):
    """A stack update re-registers its functions: a warm worker of the old spec is not reused."""
    first = runtime.invoke("FnA", {}).payload
    changed = runtime.resolve("FnA")
    runtime.register(dataclasses.replace(changed, memory_size=512))

    second = runtime.invoke("FnA", {}).payload

    assert second["instance"] != first["instance"]
    assert second["memory_limit_in_mb"] == "512"


def test_remaining_time_decreases(runtime):
    payload = runtime.invoke("FnA", {"action": "remaining"}).payload
    assert payload["remaining_before"] - payload["remaining_after"] >= 150


def test_exception_is_an_aws_shaped_error(runtime):
    result = runtime.invoke("FnA", {"action": "raise"})
    assert not result.ok
    assert result.payload is None
    assert result.error["errorType"] == "KeyError"
    assert result.error["errorMessage"] == "'missing thing'"
    assert result.error["requestId"] == result.request_id
    assert any("app.py" in line for line in result.error["stackTrace"])
    assert json.loads(result.raw)["errorType"] == "KeyError"
    # the environment survives a handled exception
    assert runtime.invoke("FnA", {}).ok


def test_timeout_fails_the_invocation_and_the_next_one_starts_cold(runtime):
    before = runtime.invoke("FnB", {}).payload["instance"]
    started = time.monotonic()
    result = runtime.invoke("FnB", {"action": "sleep", "seconds": 30})
    elapsed = time.monotonic() - started
    assert not result.ok
    assert result.error["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in result.error["errorMessage"]
    assert elapsed < 15  # stopped at its 1 s timeout, not after its 30 s (a loaded machine lags)
    after = runtime.invoke("FnB", {})
    assert after.ok
    assert after.payload["instance"] != before
    assert after.payload["calls"] == 1


def test_runtime_exit_is_a_failed_invocation(runtime):
    result = runtime.invoke("FnA", {"action": "exit"})
    assert not result.ok
    assert result.error["errorType"] == "Runtime.ExitError"
    assert result.error["errorMessage"].endswith("Runtime exited with error: exit status 3")
    assert runtime.invoke("FnA", {}).ok


def test_import_error_is_reported_like_lambda(tmp_path):
    spec = make_function(tmp_path, "Broken")
    (spec.code_dir / "app.py").write_text("import not_a_module_anywhere\n")
    with Runtime([spec], log_dir=None) as rt:
        result = rt.invoke("Broken", {})
    assert not result.ok
    assert result.error["errorType"] == "Runtime.ImportModuleError"
    assert "not_a_module_anywhere" in result.error["errorMessage"]


def test_a_package_missing_from_the_layer_fails_as_on_lambda(tmp_path):
    """Powertools is in the development venv, not in this function's (empty) layer: Lambda would
    fail to import it, and so must the local stack."""
    spec = make_function(tmp_path, "NoPowertools")
    (spec.code_dir / "app.py").write_text(
        "from aws_lambda_powertools import Logger\n"
        "def lambda_handler(event, context):\n    return 'imported'\n"
    )
    with Runtime([spec], log_dir=None) as rt:
        result = rt.invoke("NoPowertools", {})
    assert not result.ok
    assert result.error["errorType"] == "Runtime.ImportModuleError"
    assert "No module named 'aws_lambda_powertools'" in result.error["errorMessage"]


def test_a_function_sees_its_layer_and_the_runtime_packages_only(tmp_path):
    spec = make_function(tmp_path, "Paths")
    site = spec.layer_dirs[0] / "lib" / "python3.13" / "site-packages"
    site.mkdir(parents=True)
    (site / "vendored.py").write_text("NAME = 'from the layer'\n")
    (spec.code_dir / "app.py").write_text(
        "import sys, boto3, vendored\n"
        "def lambda_handler(event, context):\n"
        "    return {'layer': vendored.NAME, 'boto3': boto3.__file__, 'path': sys.path}\n"
    )
    with Runtime([spec], log_dir=None) as rt:
        result = rt.invoke("Paths", {})
    assert result.ok, result.error
    assert result.payload["layer"] == "from the layer"
    assert result.payload["boto3"].startswith(str(packages_dir()))
    assert not [p for p in result.payload["path"] if "site-packages" in p and ".venv" in p]


def test_injected_crash_runs_the_function_then_fails(runtime, tmp_path):
    marker = tmp_path / "effects.txt"
    runtime.faults.update({"crash_after_side_effects": {"FnA": 2}})
    event = {"action": "side_effect", "path": str(marker)}
    results = [runtime.invoke("FnA", event) for _ in range(3)]
    assert [r.ok for r in results] == [False, False, True]
    assert {r.error["errorType"] for r in results[:2]} == {"Emulator.InjectedCrash"}
    # each crashed invocation ran fully: its side effect happened
    assert marker.read_text().split() == [r.request_id for r in results]
    assert runtime.faults.snapshot()["crash_after_side_effects"] == {}


def test_injected_failure_fails_without_running_and_keeps_the_worker(runtime, tmp_path):
    marker = tmp_path / "effects.txt"
    warm = runtime.invoke("FnA", {})
    runtime.faults.update({"fail_invocations": {"FnA": 2}})
    event = {"action": "side_effect", "path": str(marker)}
    results = [runtime.invoke("FnA", event) for _ in range(3)]
    assert [r.ok for r in results] == [False, False, True]
    assert {r.error["errorType"] for r in results[:2]} == {"Emulator.InjectedFailure"}
    # the failed invocations did not run: only the last one's side effect happened ...
    assert marker.read_text().split() == [results[2].request_id]
    # ... and on the worker that was warm before (a failure is not a crash)
    assert results[2].payload["instance"] == warm.payload["instance"]
    assert runtime.faults.snapshot()["fail_invocations"] == {}


def test_concurrent_invocations_get_their_own_workers(runtime):
    runtime.invoke("FnA", {})  # one warm worker
    results = []

    def call():
        results.append(runtime.invoke("FnA", {"action": "sleep", "seconds": 2.5}))

    threads = [threading.Thread(target=call) for _ in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # in parallel (2.5 s + one cold start), not one after the other (5 s and more); FnA's
    # timeout is 3 s
    assert time.monotonic() - started < 5
    assert all(r.ok for r in results)
    assert len({r.payload["instance"] for r in results}) == 2


def test_the_account_concurrency_queues_invocations_before_their_timeout_starts(tmp_path):
    # One slot for the account: FnB (1 s timeout) waits while FnA sleeps 4 s, and its own
    # timeout counts only from when it runs, so it succeeds.
    rt = Runtime(
        [
            make_function(tmp_path, "FnA", timeout=6.0),
            make_function(tmp_path, "FnB", timeout=1.0),
        ],
        endpoint_url="http://127.0.0.1:4599",
        log_dir=tmp_path / "logs",
        account_concurrency=1,
    )
    try:
        rt.warm()
        results = {}

        def call(name, event):
            results[name] = rt.invoke(name, event)

        first = threading.Thread(target=call, args=("FnA", {"action": "sleep", "seconds": 4.0}))
        first.start()
        fn_a_log = tmp_path / "logs" / "FnA.log"
        eventually(lambda: fn_a_log.exists() and "sleeping" in fn_a_log.read_text())  # the slot
        started = time.monotonic()
        call("FnB", {"action": "remaining"})
        waited = time.monotonic() - started
        first.join()
        assert results["FnA"].ok and results["FnB"].ok, results
        # It ran only once FnA ended: FnA had most of its 4 s left when its log said so (a
        # loaded machine notices the line late, so not all of it), more than FnB's timeout.
        assert waited >= 1.0
        assert results["FnB"].payload["remaining_before"] > 800  # its own full second
    finally:
        rt.close()


def test_a_released_account_slot_goes_to_the_invocation_waiting_longest():
    """An invocation that ends and at once asks again (a busy mapping's lane) queues behind the
    one already waiting: it cannot take its slot back and starve the others."""
    slots = _AccountSlots(1)
    order = []

    def waiting_invocation():
        with slots:
            order.append("waiting")

    with slots:  # a busy lane's invocation
        waiter = threading.Thread(target=waiting_invocation)
        waiter.start()
        eventually(lambda: len(slots._waiting) == 1)
    with slots:  # the lane's next invocation, asked for the moment its last one ended
        order.append("busy lane")
    waiter.join(5)
    assert order == ["waiting", "busy lane"]


def test_function_output_goes_to_its_log_file(runtime, tmp_path):
    runtime.invoke("FnA", {"action": "print"})
    log = tmp_path / "logs" / "FnA.log"
    # The worker's output reaches the file on its own, shortly after the response.
    eventually(lambda: "hello from stack-FnA-ABC" in log.read_text(), timeout=30, interval=0.05)


def test_a_line_cut_short_by_a_dying_worker_stays_its_own_line(runtime, tmp_path):
    """A worker killed between a line's text and its newline (print writes them apart) must not
    glue the next worker's first line onto its last: CloudWatch keeps them as two events, and an
    EMF line read back must still be one JSON document."""
    assert not runtime.invoke("FnA", {"action": "exit_mid_line"}).ok
    assert runtime.invoke("FnA", {"action": "print"}).ok
    log = tmp_path / "logs" / "FnA.log"
    eventually(lambda: "hello from" in log.read_text(), timeout=30, interval=0.05)
    lines = log.read_text().splitlines()
    assert "half a line" in lines
    assert any(line.startswith("hello from stack-FnA-ABC") for line in lines)


def test_closing_the_runtime_logs_everything_its_workers_wrote(tmp_path):
    """`python -m emulator invoke` closes the runtime as soon as the answer is in: the lines the
    function wrote before answering must all be logged by then, not lost with the process."""
    rt = Runtime([make_function(tmp_path, "FnA")], log_dir=tmp_path / "logs", echo=False)
    try:
        for _ in range(5):
            assert rt.invoke("FnA", {"action": "print"}).ok
    finally:
        rt.close()
    assert (tmp_path / "logs" / "FnA.log").read_text().count("hello from stack-FnA-ABC") == 5


def test_unknown_function_and_names_it_answers_to(runtime):
    assert runtime.invoke("nope", {}).error["errorType"] == "ResourceNotFoundException"
    arn = "arn:aws:lambda:us-east-1:123456789012:function:stack-FnA-ABC"
    assert runtime.resolve(arn).logical_id == "FnA"
    assert runtime.resolve(arn + ":$LATEST").logical_id == "FnA"
    assert runtime.resolve("FnA").function_name == "stack-FnA-ABC"


def test_close_kills_every_worker(tmp_path):
    spec = make_function(tmp_path, "FnC")
    rt = Runtime([spec], log_dir=None)
    rt.invoke("FnC", {})
    workers = list(rt._workers)
    rt.close()
    assert workers
    assert all(w.proc.poll() is not None for w in workers)


def test_warming_a_closed_runtime_starts_nothing(tmp_path):
    """`up` warms the functions in the background: a stack stopped meanwhile warms nothing and
    says nothing of it."""
    rt = Runtime([make_function(tmp_path, "FnW")], log_dir=None)
    rt.close()
    rt.warm()
    assert not rt._workers


def test_faults_validation():
    faults = Faults()
    with pytest.raises(ValueError, match="unknown"):
        faults.update({"nope": 1})
    with pytest.raises(ValueError, match="duplicate_deliveries"):
        faults.update({"duplicate_deliveries": 0})
    assert faults.update({"sqs_pollers": 3, "crash_after_side_effects": {"X": 1}}) == {
        "duplicate_deliveries": 1,
        "duplicate_rate": 0.0,
        "reorder_rate": 0.0,
        "sqs_pollers": 3,
        "crash_after_side_effects": {"X": 1},
        "fail_invocations": {},
        "crash_after_call": [],
        "throttle": [],
        "crash_invocations": None,
        "seed": None,
        "injected": {},
    }
    assert faults.take_crash("X") is True
    assert faults.take_crash("X") is False


def test_invoke_after_close_fails_without_raising(tmp_path):
    rt = Runtime([make_function(tmp_path, "FnD")], log_dir=None)
    rt.close()
    result = rt.invoke("FnD", {})
    assert not result.ok
    assert result.error["errorType"] == "Emulator.RuntimeUnavailable"
