"""emulator/services/moto_patches.py: install() then uninstall() leaves moto as it was, every class
and module the patches touch attribute for attribute (tests share a process with plain moto)."""

import importlib

import pytest

from emulator.services import moto_patches

# Where the services patch moto: module or class, by its dotted path.
PATCHED = [
    "moto.cloudformation.parsing",
    "moto.s3.notifications",
    "moto.awslambda.models.LambdaBackend",
    "moto.dynamodb.models.DynamoDBBackend",
    "moto.dynamodb.models.table.StreamShard",
    "moto.dynamodb.models.table.Table",
    "moto.dynamodb.responses.DynamoHandler",
    "moto.dynamodbstreams.models.DynamoDBStreamsBackend",
    "moto.events.models.EventsBackend",
    "moto.events.models.Rule",
    "moto.pipes.models.EventBridgePipesBackend",
    "moto.sns.models.SNSBackend",
    "moto.sns.models.Subscription",
    "moto.sns.models.Topic",
    "moto.sns.responses.SNSResponse",
    "moto.sqs.models",
    "moto.sqs.models.Message",
    "moto.sqs.models.Queue",
    "moto.sqs.models.SQSBackend",
    "moto.sqs.responses.SQSResponse",
    "moto.core.responses.BaseResponse",
]


def resolve(path: str):
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


def attributes(owner) -> dict:
    return dict(vars(owner))


@pytest.mark.parametrize("path", PATCHED)
def test_uninstall_restores_every_attribute_install_replaced(path):
    owner = resolve(path)
    before = attributes(owner)
    moto_patches.install()
    moto_patches.uninstall()
    after = attributes(owner)
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) is not after.get(name)
    )
    assert changed == []
