"""What ``POST /_emulator/reset`` empties: the data of one deployed stack, its resources kept.

Every table's items and its stream's records, every queue's messages (and FIFO deduplication
ids), every bucket's objects (every version, and unfinished multipart uploads) of the stack's
resources, straight in moto's models: nothing writes a stream record, an S3 event or a delete
marker for what goes, so no consumer sees the reset. The tables, queues, buckets, their settings
(bucket notifications, queue policies and redrive), the event source mappings and the function
workers stay; a stream reader's position stays valid (it reads the records written after the
reset: sequence numbers keep increasing). DynamoDB's ClientRequestTokens are forgotten too.
Records a mapping has already read and messages a poller has already received are the engine's:
they are delivered (reset when /_emulator/status says idle to have nothing in flight).
"""

from __future__ import annotations

from typing import Any

from moto.cloudformation.models import cloudformation_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table
from moto.s3.models import FakeBucket, s3_backends
from moto.s3.utils import _VersionedKeyStore
from moto.sqs.models import Queue, sqs_backends

from emulator.services import dynamodb_validation, dynamodbstreams, sqs
from emulator.services.dynamodb import DYNAMODB_LOCK


class NoSuchStack(LookupError):
    pass


def reset_stack(stack_name: str, region: str, account: str = DEFAULT_ACCOUNT_ID) -> dict[str, int]:
    """Empty the stack's tables, streams, queues and buckets; what went, counted."""
    stacks = cloudformation_backends[account][region].stacks.values()
    stack = next(
        (s for s in stacks if s.name == stack_name and s.status != "DELETE_COMPLETE"), None
    )
    if stack is None:
        raise NoSuchStack(f"no stack {stack_name!r} in {region}")
    emptied = dict.fromkeys(
        ("tables", "items", "stream_records", "queues", "messages", "buckets", "objects"), 0
    )
    resources = list(stack.resource_map._parsed_resources.values())
    tables = dynamodb_backends[account][region].tables
    queues = sqs_backends[account][region].queues
    buckets = s3_backends[account]["global"].buckets
    for resource in resources:
        if isinstance(resource, Table) and tables.get(resource.name) is not None:
            _empty_table(tables[resource.name], emptied)
        elif isinstance(resource, Queue) and queues.get(resource.name) is not None:
            _empty_queue(queues[resource.name], emptied)
        elif isinstance(resource, FakeBucket) and buckets.get(resource.name) is not None:
            _empty_bucket(buckets[resource.name], emptied)
    dynamodb_validation.forget_tokens()
    return emptied


def _empty_table(table: Table, emptied: dict[str, int]) -> None:
    with DYNAMODB_LOCK:  # no write lands half way
        emptied["tables"] += 1
        emptied["items"] += sum(len(v) if isinstance(v, dict) else 1 for v in table.items.values())
        table.items.clear()
        stream = dynamodbstreams.stream_of(table)
        if stream is None:
            return
        with stream.lock:
            for shard in stream.shards:
                emptied["stream_records"] += len(shard.items)
                # New lists, not cleared ones: a reader bisecting the old ones meanwhile reads
                # them consistently.
                shard.items = []
                shard._q_sequences = []  # type: ignore[attr-defined]


def _empty_queue(queue: Queue, emptied: dict[str, int]) -> None:
    emptied["queues"] += 1
    emptied["messages"] += len(queue._messages)
    queue._messages = []  # as moto's PurgeQueue: through sqs.py's index
    queue._pending_messages = set()
    index = sqs.index(queue)
    with index.lock:
        index.deduplication.clear()
        index.deduplication_order.clear()


def _empty_bucket(bucket: FakeBucket, emptied: dict[str, int]) -> None:
    emptied["buckets"] += 1
    keys: Any = bucket.keys
    for name in list(keys.keys()):
        for key in keys.getlist(name):
            emptied["objects"] += 1
            dispose = getattr(key, "dispose", None)
            if dispose is not None:
                dispose()
    bucket.keys = _VersionedKeyStore()
    for upload_id in list(bucket.multiparts):
        del bucket.multiparts[upload_id]  # MultipartDict disposes of the parts
