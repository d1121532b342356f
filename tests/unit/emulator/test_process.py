"""`python -m emulator up` as a child process (emulator/process.py): a port that another process
took between free_port's probe and the stack's own bind (stacks started at once) is replaced."""

import socket

import pytest

from emulator.process import FailedInvocation, LocalStackProcess, describe_failures, free_port

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Queue:
    Type: AWS::SQS::Queue
"""
PORTS = range(4700, 4800)


@pytest.fixture
def taken():
    """A port of PORTS bound (and listened on) by someone else."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", free_port(PORTS)))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def up_args(tmp_path) -> list[str]:
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE)
    (tmp_path / "samconfig.toml").write_text("version = 0.1\n")
    return ["--template", str(template), "--log-dir", str(tmp_path / "logs")]


def test_a_taken_port_is_replaced_by_a_free_one_of_the_range(taken, up_args):
    local = LocalStackProcess(taken, up_args=up_args)
    try:
        local.start(timeout=60, ports=PORTS)
        assert local.port != taken and local.port in PORTS
        assert local.endpoint == f"http://127.0.0.1:{local.port}"
        assert local.control("/_emulator/status")["ready"]
    finally:
        local.stop()


def test_without_a_range_a_taken_port_fails_the_start(taken, up_args):
    local = LocalStackProcess(taken, up_args=up_args)
    try:
        with pytest.raises(RuntimeError, match="exited with 1 before `ready`"):
            local.start(timeout=60)
        assert "in use" in local.tail()
    finally:
        local.stop()


def test_a_stack_served_over_tls_is_reached_over_https_trusting_its_own_authority(
    tmp_path, up_args
):
    local = LocalStackProcess(free_port(PORTS), up_args=[*up_args, "--tls"])
    try:
        local.start(timeout=60, ports=PORTS)
        assert local.endpoint == f"https://127.0.0.1:{local.port}"
        assert local.ca_bundle == str(tmp_path / ".emulator" / "tls" / str(local.port) / "ca.pem")
        assert local.client_environment()["AWS_CA_BUNDLE"] == local.ca_bundle
        assert local.control("/_emulator/status")["ready"]  # verified against it
    finally:
        local.stop()


def test_failures_are_described_by_function_and_outcome_with_their_median_time():
    failures = [
        FailedInvocation("IngestFunction", "timeout", 2000),
        FailedInvocation("IngestFunction", "error", 40),
        FailedInvocation("IngestFunction", "timeout", 2100),
        FailedInvocation("IngestFunction", "timeout", 9000),
    ]
    assert describe_failures(failures) == (
        "IngestFunction error x1 (median 40 ms), IngestFunction timeout x3 (median 2100 ms)"
    )
    assert describe_failures([]) == "none"
