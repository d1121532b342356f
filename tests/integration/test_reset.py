"""POST /_emulator/reset (emulator/services/reset.py): the local stack's tables, streams, queues
and bucket emptied without a restart, and the flow working on afterwards (a new file still
becomes a contact). Its own local stack: a reset of the session's would empty the other tests'
data under them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.process import LocalStackProcess, free_port
from harness.builders import contact, new_caller
from harness.polling import eventually
from harness.stack import StackClient
from tests.integration.support import Files
from tests.session_stack import running_stack

pytestmark = pytest.mark.integration
PORTS = range(4800, 4900)  # the integration suites' range: free_port picks one nobody holds


@pytest.fixture(scope="module")
def own_stack() -> Iterator[StackClient]:
    local = LocalStackProcess(free_port(PORTS), tail_lines=80)
    with running_stack(local, PORTS) as client:
        yield client


def table_items(stack: StackClient) -> list[dict]:
    return stack.dynamodb.scan(TableName=stack.contacts_table)["Items"]


def stream_records(stack: StackClient) -> list[dict]:
    streams = stack.client("dynamodbstreams")
    arn = stack.dynamodb.describe_table(TableName=stack.contacts_table)["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
    return records


def ingested(stack: StackClient, caller: str, contact_id: str) -> bool:
    ids = [i["contact_id"]["S"] for i in stack.contacts_of(caller)]
    assert contact_id in ids, f"{contact_id} not in the table yet"
    return True


def test_reset_empties_the_stack_and_the_flow_goes_on(own_stack: StackClient):
    stack = own_stack
    files = Files(stack)
    caller = new_caller()
    before = contact(caller, minutes=0, disposition="RESOLVED")
    files.put_jsonl("before.jsonl", [before])
    eventually(lambda: ingested(stack, caller, before["contact_id"]), timeout=60)
    eventually(stack.idle, timeout=60)
    dead_letters = stack.outputs[stack.failure_queues[0]]
    stack.sqs.send_message(QueueUrl=dead_letters, MessageBody='{"left": "over"}')
    assert table_items(stack) and stream_records(stack)

    emptied = stack._local().control("/_emulator/reset", {})["emptied"]

    assert emptied["items"] >= 1 and emptied["stream_records"] >= 1
    assert emptied["messages"] >= 1 and emptied["objects"] >= 1
    assert table_items(stack) == []
    assert stream_records(stack) == []
    assert stack.queue_depth(stack.failure_queues[0]) == 0
    versions = stack.s3.list_object_versions(Bucket=stack.bucket)
    assert versions.get("Versions", []) == [] and versions.get("DeleteMarkers", []) == []
    # The resources and their wiring stay: a new file is still ingested.
    after = contact(caller, minutes=5, disposition="RESOLVED")
    files.put_jsonl("after.jsonl", [after])
    eventually(lambda: ingested(stack, caller, after["contact_id"]), timeout=60)
    assert [i["contact_id"]["S"] for i in stack.contacts_of(caller)] == [after["contact_id"]]
