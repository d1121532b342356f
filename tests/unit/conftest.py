"""Shared fixtures for the unit tests: moto in-process (mock_aws, with the local stack's fidelity
patches) with the resources the functions use, created with the keys template.yaml gives them,
and each handler loaded fresh inside the mock so its module-level clients talk to moto, as a cold
start would."""

import functools
from collections.abc import Iterator

import botocore.session
import pytest

from harness.in_process import REGION, FakeLambdaContext
from tests.unit.support import GOODWILL_WAIT_SECONDS, Stack, moto_stack

# Every mock_aws resets boto3's default session, so each cold handler's clients would read and
# parse botocore's service models again (~40 ms a client). One loader for the whole run keeps that
# parse cached, as one long-lived session would: the clients, and their handlers' module-level
# state, are still built afresh.
botocore.session.create_loader = functools.cache(botocore.session.create_loader)


@pytest.fixture
def aws_env(monkeypatch) -> None:
    """What a function's environment holds besides its resources: dummy credentials, the
    region, Powertools' settings; nothing of the developer's own AWS configuration."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_METRICS_NAMESPACE": "ContactCenter",
        "POWERTOOLS_SERVICE_NAME": "unit-tests",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "GOODWILL_WAIT_SECONDS": str(GOODWILL_WAIT_SECONDS),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def stack(aws_env, monkeypatch) -> Iterator[Stack]:
    with moto_stack(monkeypatch) as resources:
        yield resources


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
