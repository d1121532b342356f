"""Every wire protocol botocore may speak to each service the local stack serves, answered.

botocore lists a service's protocols in its model (``metadata.protocols``) and picks the first it
supports; a new botocore may pick another (CloudWatch's Smithy RPC v2 CBOR beside its JSON and
query), and a moto that cannot read it fails a user's run with an unreadable answer. Here each
service the template deploys or the tools call is driven once per protocol it lists, through the
emulator's own server in process, so such a change fails this test instead.
"""

import copy
from collections.abc import Iterator

import boto3
import botocore.loaders
import botocore.session
import pytest
from botocore.config import Config

from emulator.process import REGION
from emulator.server import EmulatorServer

# The services the template's resources live in (AWS::Logs and AWS::KMS are recorded by
# CloudFormation, never called at runtime) and the tools' own calls (sts: `ops`' identity); for
# each, a call that changes nothing and what its answer must hold.
READS = {
    "s3": ("list_buckets", {}, "Buckets"),
    "sqs": ("list_queues", {}, "ResponseMetadata"),
    "sns": ("list_topics", {}, "Topics"),
    "dynamodb": ("list_tables", {}, "TableNames"),
    "dynamodbstreams": ("list_streams", {}, "Streams"),
    "lambda": ("list_functions", {}, "Functions"),
    "cloudformation": ("list_stacks", {}, "StackSummaries"),
    "cloudwatch": ("list_metrics", {"Namespace": "AWS/Lambda"}, "Metrics"),
    "events": ("list_rules", {}, "Rules"),
    "pipes": ("list_pipes", {}, "Pipes"),
    "stepfunctions": ("list_state_machines", {}, "stateMachines"),
    "firehose": ("list_delivery_streams", {}, "DeliveryStreamNames"),
    "iam": ("list_roles", {}, "Roles"),
    "sts": ("get_caller_identity", {}, "Account"),
}


class _OneProtocolLoader(botocore.loaders.Loader):
    """botocore's models, with one service's model speaking ``protocol`` alone."""

    def __init__(self, service: str, protocol: str) -> None:
        super().__init__()
        self.service, self.protocol = service, protocol

    def load_service_model(self, service_name, type_name, api_version=None):
        model = super().load_service_model(service_name, type_name, api_version)
        if service_name == self.service and type_name == "service-2":
            model = copy.deepcopy(model)
            model["metadata"] |= {"protocol": self.protocol, "protocols": [self.protocol]}
        return model


def protocols(service: str) -> list[str]:
    metadata = botocore.session.get_session().get_service_model(service).metadata
    return metadata.get("protocols") or [metadata["protocol"]]


CASES = [(service, protocol) for service in READS for protocol in protocols(service)]


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    running = EmulatorServer(0)
    running.start()
    yield running
    running.stop()


@pytest.mark.parametrize(("service", "protocol"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_each_protocol_botocore_lists_is_answered(server, service, protocol):
    session = botocore.session.get_session()
    session.register_component("data_loader", _OneProtocolLoader(service, protocol))
    client = boto3.Session(botocore_session=session).client(
        service,
        endpoint_url=server.endpoint_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, account_id_endpoint_mode="disabled"),
    )
    assert client.meta.service_model.resolved_protocol == protocol
    operation, parameters, field = READS[service]
    answer = getattr(client, operation)(**parameters)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert field in answer


def test_every_protocol_of_the_served_services_is_driven():
    """CloudWatch lists three protocols; a service botocore reads in one has one case."""
    assert [p for s, p in CASES if s == "cloudwatch"] == protocols("cloudwatch")
    assert len(protocols("cloudwatch")) == 3
