"""What the emulator's tests share besides fixtures (tests/unit/emulator/conftest.py holds those):
dummy credentials for moto in process, clients, queues to fill and drain, a function to map or
invoke, a whole local stack in process, and one with its mapping engine delivering."""

import contextlib
import io
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from emulator.core import tls
from emulator.core.faults import Faults
from emulator.delivery.engine import EventSourceMappingEngine
from emulator.deploy.deployer import Deployment, deploy
from emulator.iam.access import Access, deployed_roles
from emulator.lambda_.workers import Runtime
from emulator.process import REGION
from emulator.server import EmulatorServer
from emulator.services import moto_patches
from harness.polling import eventually

ROOT = Path(__file__).resolve().parents[3]  # the repository
STREAM_OF_BOTH_IMAGES = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
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


def endpoint_client(service: str, endpoint_url: str, **options):
    """A client of a local stack's endpoint: dummy credentials, no retries (a refusal is the
    answer), no account endpoints and no host prefixes (StartSyncExecution's "sync-" would name
    no local host); ``options`` (``verify``) for boto3.client."""
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            retries={"max_attempts": 1},
            account_id_endpoint_mode="disabled",
            inject_host_prefix=False,
        ),
        **options,
    )


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


def pk_table(name: str, **settings) -> dict:
    """CreateTable's parameters for an on-demand table keyed by a string ``pk`` alone."""
    return {
        "TableName": name,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
        **settings,
    }


def pk_sk_table(name: str, **settings) -> dict:
    """CreateTable's parameters for an on-demand table keyed by a string ``pk`` and ``sk``."""
    keys = {
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
    }
    return pk_table(name, **(keys | settings))


def stream_consumer(lam, iam, function: str, table: str = "contacts") -> dict:
    """A table with a stream and ``function`` (create_function) reading it from LATEST: the
    CreateEventSourceMapping answer."""
    create_function(lam, iam, function)
    new_images = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    created = client("dynamodb").create_table(**pk_table(table, StreamSpecification=new_images))
    stream_arn = created["TableDescription"]["LatestStreamArn"]
    return lam.create_event_source_mapping(
        EventSourceArn=stream_arn, FunctionName=function, StartingPosition="LATEST"
    )


@contextlib.contextmanager
def deployed_stack(
    template: Path, log_dir: Path, certificates: tls.Certificates | None = None
) -> Iterator[tuple[EmulatorServer, Runtime, Deployment]]:
    """The local stack in this process: its server (moto reset), its runtime, ``template``
    deployed; the functions are the caller's to register. With ``certificates`` it is served
    over TLS too, and the workers trust its authority (the deployer's clients trust it by
    AWS_CA_BUNDLE, the caller's to set)."""
    faults = Faults()
    ca_bundle = None if certificates is None else certificates.authority
    runtime = Runtime(faults=faults, log_dir=log_dir, ca_bundle=ca_bundle)
    server = EmulatorServer(0, faults=faults, runtime=runtime, certificates=certificates)
    server.start()
    try:
        runtime.endpoint_url = server.endpoint_url
        plain = f"http://127.0.0.1:{server.get_host_and_port()[1]}"  # served with TLS or without
        urllib.request.urlopen(urllib.request.Request(plain + "/moto-api/reset", method="POST"))
        yield server, runtime, deploy(server.endpoint_url, template)
    finally:
        runtime.close()
        server.stop()
        moto_patches.uninstall()


def function_project(project: Path, template: str, handler: str, stack_name: str) -> Path:
    """A SAM project in ``project``: ``template`` (its functions' CodeUri fn/), ``handler`` as
    fn/app.py and a samconfig naming the stack; the template's path."""
    (project / "fn").mkdir()
    (project / "fn" / "app.py").write_text(handler)
    (project / "template.yaml").write_text(template)
    (project / "samconfig.toml").write_text(
        f'version = 0.1\n[default.global.parameters]\nstack_name = "{stack_name}"\n'
    )
    return project / "template.yaml"


@contextlib.contextmanager
def checked_stack(
    template: Path, log_dir: Path, certificates: tls.Certificates | None = None
) -> Iterator[tuple[EmulatorServer, Runtime, Deployment]]:
    """``deployed_stack`` with its functions registered and their calls checked against their
    roles (emulator/iam/access.py)."""
    with deployed_stack(template, log_dir, certificates) as (server, runtime, deployment):
        for spec in deployment.functions:
            runtime.register(spec)
        server.serve(deployment.stack_name, Access(deployed_roles(deployment), region=REGION))
        yield server, runtime, deployment


class DeliveringStack:
    """A deployed template's outputs, clients of its endpoint, and its mapping engine running
    (the pipes and event source mappings delivering)."""

    def __init__(self, endpoint_url: str, outputs: dict[str, str], engine):
        self.endpoint_url = endpoint_url
        self.outputs = outputs
        self.engine = engine

    def client(self, service: str):
        return endpoint_client(service, self.endpoint_url)

    def drain(self, output: str) -> list[dict]:
        """Every message in the queue now, received and deleted."""
        sqs = self.client("sqs")
        messages = []
        while batch := sqs.receive_message(
            QueueUrl=self.outputs[output], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            for message in batch:
                sqs.delete_message(
                    QueueUrl=self.outputs[output], ReceiptHandle=message["ReceiptHandle"]
                )
            messages.extend(batch)
        return messages

    def depth(self, output: str) -> int:
        attributes = self.client("sqs").get_queue_attributes(
            QueueUrl=self.outputs[output], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def settle(self, timeout: float = 60.0) -> None:
        eventually(self.engine.idle, timeout=timeout, interval=0.05)


@contextlib.contextmanager
def delivering_stack(template_text: str, project: Path) -> Iterator[DeliveringStack]:
    """``template_text`` deployed on the local stack in this process, its mappings delivering."""
    template = project / "template.yaml"
    template.write_text(template_text)
    with deployed_stack(template, project / "logs") as (server, runtime, deployment):
        engine = EventSourceMappingEngine(
            runtime, server.faults, region=REGION, endpoint_url=server.endpoint_url,
            retry_delay=0.01,
        )  # fmt: skip
        engine.start()
        try:
            eventually(engine.all_enabled, timeout=60, interval=0.05)
            yield DeliveringStack(server.endpoint_url, deployment.outputs, engine)
        finally:
            engine.stop()
