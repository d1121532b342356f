"""What the emulator's tests share besides fixtures (tests/unit/emulator/conftest.py holds those):
dummy credentials for moto in process, clients, queues to fill and drain, a function to map or
invoke, and a whole local stack in process."""

import contextlib
import io
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from emulator.core.faults import Faults
from emulator.lambda_.workers import Runtime
from emulator.server import EmulatorServer
from emulator.services import moto_patches
from emulator.stack import Deployment, deploy

ROOT = Path(__file__).resolve().parents[3]  # the repository
REGION = "us-east-1"
ACCOUNT = "123456789012"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}


def fake_credentials(patch: pytest.MonkeyPatch) -> None:
    """Dummy credentials and nothing of the developer's own AWS configuration."""
    for name, value in CREDENTIALS.items():
        patch.setenv(name, value)
    patch.delenv("AWS_ENDPOINT_URL", raising=False)
    patch.delenv("AWS_PROFILE", raising=False)


def client(service: str):
    return boto3.client(service, region_name=REGION)


def new_queue(sqs, name: str, **attributes: str) -> tuple[str, str]:
    """A queue with ``attributes``: its URL and ARN."""
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return url, arn["QueueArn"]


def drained(sqs, url: str) -> list[dict]:
    """Every message the queue holds now, received (with all attributes) and deleted."""
    messages = []
    while batch := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", []):
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)
    return messages


def create_function(lam, iam, name: str, **settings) -> str:
    """A python3.13 function that returns None; its ARN. ``settings``: e.g. Timeout."""
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("app.py", "def lambda_handler(event, context):\n    return None\n")
    return lam.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=role["Role"]["Arn"],
        Handler="app.lambda_handler",
        Code={"ZipFile": archive.getvalue()},
        **settings,
    )["FunctionArn"]


@contextlib.contextmanager
def deployed_stack(
    template: Path, log_dir: Path
) -> Iterator[tuple[EmulatorServer, Runtime, Deployment]]:
    """The local stack in this process: its server (moto reset), its runtime, ``template``
    deployed; the functions are the caller's to register."""
    faults = Faults()
    runtime = Runtime(faults=faults, log_dir=log_dir)
    server = EmulatorServer(0, faults=faults, runtime=runtime)
    server.start()
    try:
        runtime.endpoint_url = server.endpoint_url
        urllib.request.urlopen(
            urllib.request.Request(server.endpoint_url + "/moto-api/reset", method="POST")
        )
        yield server, runtime, deploy(server.endpoint_url, template)
    finally:
        runtime.close()
        server.stop()
        moto_patches.uninstall()
