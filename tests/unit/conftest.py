"""Shared fixtures for the unit tests: moto in-process (mock_aws, with the local stack's fidelity
patches) with the resources the functions use, created with the keys template.yaml gives them,
and each handler loaded fresh inside the mock so its module-level clients talk to moto, as a cold
start would."""

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from moto import mock_aws

from emulator.services import moto_patches
from tests.resources import (
    REGION,
    FakeLambdaContext,
    Resources,
    client,
    create_resources,
    import_handler,
)

ROOT = Path(__file__).resolve().parents[2]

GOODWILL_WAIT_SECONDS = 600


class Stack(Resources):
    """The resources of one test, with clients and helpers to look at them."""

    @property
    def dynamodb(self):
        return client("dynamodb")

    @property
    def s3(self):
        return client("s3")

    @property
    def sqs(self):
        return client("sqs")

    def drain(self, queue_url: str) -> list[dict]:
        """Every message currently in a queue, removed from it."""
        messages = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return messages
            for message in batch:
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            messages.extend(batch)

    def published(self) -> list[dict]:
        """Bodies of the messages that reached NotificationsTopic."""
        return [json.loads(m["Body"]) for m in self.drain(self.topic_capture_url)]


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


@contextlib.contextmanager
def moto_stack(monkeypatch) -> Iterator[Stack]:
    """A fresh moto (in process) holding the stack's resources, their names in the functions'
    environment. moto behaves as AWS where the handlers rely on it (transactions that leave
    stream readers intact, FIFO topics that deduplicate): the local stack's fidelity patches."""
    moto_patches.install()
    try:
        with mock_aws():
            stack = Stack(**vars(create_resources()))
            for name, value in stack.function_env().items():
                monkeypatch.setenv(name, value)
            yield stack
    finally:
        moto_patches.uninstall()


@pytest.fixture
def stack(aws_env, monkeypatch) -> Iterator[Stack]:
    with moto_stack(monkeypatch) as resources:
        yield resources


def load_handler(function_dir: str, monkeypatch=None) -> ModuleType:
    """Import functions/<function_dir>/app.py as a fresh module (a cold start).

    Every handler module is called `app`, so each load gets a unique module name; the function's
    own directory goes first on sys.path as Lambda's task root does.
    """
    path = ROOT / "functions" / function_dir / "app.py"
    if monkeypatch is not None:
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", f"{function_dir}-function")
        monkeypatch.syspath_prepend(str(path.parent))
    return import_handler(function_dir)


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
