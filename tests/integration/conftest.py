"""Integration fixtures: one suite, two targets.

- A deployed stack: with AWS_SAM_STACK_NAME set, the tests run against that stack; its resources
  come from the stack outputs. Credentials, region and endpoint come from the usual boto3 chain:
  AWS, or with AWS_ENDPOINT_URL a stack `sam deploy` deployed onto a local stack (`make
  deploy-rehearsal`), used as it would be on AWS (no fault switches).
- Local (everything else): a session fixture starts the local stack
  (`python -m emulator up --port <free port in 4800-4899> --duplicate-rate 0.05`: some batches
  are delivered twice in every run, see DUPLICATE_RATE) and waits for its `ready` line. The
  environment variable FANOUT (lambda, pipe or router; `make integration FANOUT=pipe`) deploys it
  in that fan-out mode (`--parameter-overrides FanOut=<mode>`); unset, samconfig's (lambda).
  A deployed stack runs in the mode it was deployed with (its FanOut output): FANOUT does not
  apply to it. LOCAL_STACK_TLS=1 serves it over TLS too (`up --tls`): the tests, ops and the
  functions call it over HTTPS, trusting its own authority, and the template's
  DenyInsecureTransport statements decide as on AWS (`make test` runs mode lambda so).

The tests are the same in every mode: where a mode differs (where a consumer's failed changes
end up, how they are recovered) they ask the stack (StackClient.failure_route).

Both are driven through the one stack client (harness.stack). Every test creates its own data
(unique prefix, contact ids and callers), waits with bounded polling and removes what it created,
so the suite can run again and again against a long-lived stack.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from shared import keys

from emulator.process import LocalStackProcess, free_port
from harness import trace
from harness.stack import StackClient, fan_out_args
from harness.topic import TopicCapture
from ops.cli import main
from tests.integration.support import LOG_DIR, Files
from tests.session_stack import running_stack

LOCAL_PORTS = range(4800, 4900)
# Where the local stack's functions log (emulator up's default): harness.trace reads it.
# The local stack delivers 5% of its SQS and stream batches twice (the duplicate_rate switch):
# Lambda's pollers are at-least-once, so every run, and not only the duplicate tests, should meet
# some duplicates. A suite run delivers a few hundred batches, so 5% is a few dozen duplicates
# spread over the tests (each one mostly on the normal path), for a few percent more invocations.
DUPLICATE_RATE = 0.05

# The local stack this session started (its output tail is shown when something failed).
_LOCAL_STACKS: list[LocalStackProcess] = []


def pytest_report_header(config):
    stack_name = os.environ.get("AWS_SAM_STACK_NAME")
    if stack_name:
        where = os.environ.get("AWS_ENDPOINT_URL") or "AWS"
        return f"stack: {stack_name} on {where} (deployed; its own fan-out mode)"
    mode = os.environ.get("FANOUT") or "samconfig default"
    served = "HTTPS and HTTP" if os.environ.get("LOCAL_STACK_TLS") == "1" else "HTTP"
    return f"stack: the local stack, fan-out mode {mode}, served over {served}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for local in _LOCAL_STACKS:
        if local.killed:
            terminalreporter.write_line(
                f"local stack: no exit within {local.stop_seconds:.0f} s of SIGTERM, killed",
                yellow=True,
            )
        if exitstatus not in (0, 5) and local.lines():
            terminalreporter.section("local stack output (tail)")
            for line in local.lines(60):
                terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def stack() -> Iterator[StackClient]:
    stack_name = os.environ.get("AWS_SAM_STACK_NAME")
    if stack_name:
        yield StackClient.deployed(stack_name)
        return

    try:
        mode = fan_out_args(os.environ.get("FANOUT"))
    except ValueError as error:
        pytest.exit(f"FANOUT: {error}", returncode=4)
    tls = ["--tls"] if os.environ.get("LOCAL_STACK_TLS") == "1" else []
    local = LocalStackProcess(
        free_port(LOCAL_PORTS),
        up_args=["--duplicate-rate", str(DUPLICATE_RATE), *mode, *tls],
        tail_lines=80,
    )
    _LOCAL_STACKS.append(local)
    offsets = trace.offsets_now([LOG_DIR])  # other suites' stacks append to the same files
    with running_stack(local, LOCAL_PORTS) as client:
        listed = client.client("lambda").list_functions()["Functions"]
        yield client
    # The session's records against the design's transitions (harness.trace), its stack's only.
    report = trace.check([LOG_DIR], {f["FunctionName"] for f in listed}, offsets)
    if report.first is not None:
        pytest.fail(f"trace: FORBIDDEN {report.first} ({len(report.violations)} in all)")


@pytest.fixture
def local_stack(stack: StackClient) -> Iterator[StackClient]:
    """The stack, for tests that need the local fault switches; faults reset afterwards."""
    if not stack.is_local:
        pytest.skip("needs local fault injection")
    stack.reset_faults()
    try:
        yield stack
    finally:
        stack.reset_faults()


@pytest.fixture
def files(stack: StackClient) -> Iterator[Files]:
    corner = Files(stack)
    try:
        yield corner
    finally:
        corner.cleanup()


@pytest.fixture
def contact_cleanup(stack: StackClient) -> Iterator[list[str]]:
    """Callers a test used: their CONTACT (with its CONTACT_REF), LAST_AGENT and GIFT_CARD items
    are removed at the end (idempotency records stay: their keys are hashes of unique contact
    ids, and they expire)."""
    callers: list[str] = []
    yield callers
    for caller in callers:
        contacts = stack.contacts_of(caller)
        item_keys = [{"pk": i["pk"]["S"], "sk": i["sk"]["S"]} for i in contacts]
        item_keys += [keys.gift_card_key(i["contact_id"]["S"]) for i in contacts]
        item_keys += [keys.contact_ref_key(i["contact_id"]["S"]) for i in contacts]
        item_keys.append(keys.last_agent_key(caller))
        stack.delete_items(item_keys)


@pytest.fixture
def topic(stack: StackClient) -> Iterator[TopicCapture]:
    capture = TopicCapture(stack, "it-topic-capture")
    try:
        yield capture
    finally:
        capture.close()


@pytest.fixture
def ops(stack: StackClient, monkeypatch, capsys):
    """Run `python -m ops --stack <the stack> ...` in process: (exit code, stdout, stderr).

    Against the local stack it gets what an operator's shell would set: the endpoint and dummy
    credentials."""
    if stack.local:
        for name, value in stack.local.client_environment().items():
            monkeypatch.setenv(name, value)

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(["--stack", stack.name, *argv])
        except SystemExit as usage:  # argparse's refusal, as `python -m ops` exits with it
            code = usage.code
        out, err = capsys.readouterr()
        return code, out, err

    return run
