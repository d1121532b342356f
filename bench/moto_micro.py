"""Micro-benchmarks of the local stack's moto hot paths (not part of `make bench` or the tests).

    uv run python -m bench.moto_micro [--quick] [--only sqs,api,sources]

- ``sqs``: moto's SQS backend at queue depths 300 / 2,000 / 6,000: SendMessage and ReceiveMessage
  (10 per call, the queue's visibility timeout) in ms per message, as the backend methods run.
- ``api``: botocore -> moto's WSGI app (the server's own request handling: routing, parsing,
  the handler, the response serializer), no sockets: server ms per call (inside the WSGI app)
  and client ms (botocore's side) for the operations the app uses most.
- ``sources``: what the event-source-mapping engine pays per record: boto3 ReceiveMessage /
  GetRecords through the WSGI app against emulator.delivery.sources' SqsSource / StreamSource (when
  that module exists).

The numbers are CPU time of the benchmark thread (time.thread_time: steady under other load);
compare runs on one machine only.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}.items():
    os.environ.setdefault(_name, _value)
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
from botocore.awsrequest import AWSResponse  # noqa: E402
from moto.core.botocore_stubber import MockRawResponse  # noqa: E402
from moto.moto_server.werkzeug_app import (  # noqa: E402
    DomainDispatcherApplication,
    create_backend_app,
)
from moto.sqs.models import Message, sqs_backends  # noqa: E402
from werkzeug.test import Client  # noqa: E402

from emulator.process import ACCOUNT, REGION  # noqa: E402
from emulator.services import moto_patches  # noqa: E402
from harness.in_process import create_stream_table  # noqa: E402

ENDPOINT = "http://localhost:4566"


class Wsgi:
    """botocore requests answered by moto's WSGI app in process (before-send), timed."""

    def __init__(self) -> None:
        self.client = Client(DomainDispatcherApplication(create_backend_app))
        self.server_seconds = 0.0

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        started = time.thread_time()
        url = request.url.split("://", 1)[1]
        path = "/" + url.split("/", 1)[1] if "/" in url else "/"
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        response = self.client.open(
            path, method=request.method, headers=headers, data=body or b"", base_url=ENDPOINT
        )
        data = response.get_data()
        self.server_seconds += time.thread_time() - started
        return AWSResponse(
            request.url, response.status_code, dict(response.headers), MockRawResponse(data)
        )


def clients(wsgi: Wsgi) -> dict[str, Any]:
    session = boto3.Session(region_name=REGION)
    made = {}
    for service in ("sqs", "dynamodb", "dynamodbstreams"):
        client = session.client(service, endpoint_url=ENDPOINT)
        client.meta.events.register("before-send", wsgi)
        made[service] = client
    return made


def timed(wsgi: Wsgi, fn: Callable[[], Any], n: int) -> tuple[float, float]:
    """(server ms, client ms) per call over n calls."""
    wsgi.server_seconds = 0.0
    started = time.thread_time()
    for _ in range(n):
        fn()
    total = time.thread_time() - started
    return wsgi.server_seconds / n * 1000, (total - wsgi.server_seconds) / n * 1000


# --- SQS at depth -----------------------------------------------------------------------------


def fill(queue: Any, depth: int) -> None:
    """depth visible messages, appended directly (what SendMessage stores, without its cost)."""
    now = int(time.time() * 1000)
    # patched by emulator.services.sqs
    indexed = isinstance(type(queue).__dict__.get("_messages"), property)
    for i in range(depth):
        message = Message(f"m{i}-{time.monotonic_ns()}", f'{{"n": {i}}}')
        message.sent_timestamp = now  # type: ignore[assignment]
        if indexed:
            queue.add_message(message)
        else:
            queue._messages.append(message)


def sqs_depths(quick: bool) -> None:
    backend = sqs_backends[ACCOUNT][REGION]
    print("SQS backend at depth (ms per message; receive: 10 per call)")
    print(f"{'depth':>7} {'send':>9} {'receive':>9}")
    for depth in (300, 2000, 6000):
        name = f"depth-{depth}-{time.monotonic_ns()}"
        queue = backend.create_queue(name)
        fill(queue, depth)
        sends = 20 if quick else 50
        started = time.thread_time()
        for i in range(sends):
            backend.send_message(name, f'{{"s": {i}}}')
        send_ms = (time.thread_time() - started) / sends * 1000
        calls = 5 if quick else 20
        got = 0
        started = time.thread_time()
        for _ in range(calls):
            got += len(backend.receive_message(name, 10, 0, 30))
        receive_ms = (time.thread_time() - started) / max(1, got) * 1000
        print(f"{depth:>7} {send_ms:>9.3f} {receive_ms:>9.3f}")
        backend.delete_queue(name)


# --- the API through the WSGI app --------------------------------------------------------------


def api(quick: bool) -> None:
    wsgi = Wsgi()
    c = clients(wsgi)
    ddb, sqs, streams = c["dynamodb"], c["sqs"], c["dynamodbstreams"]
    table = f"bench-{time.monotonic_ns()}"
    stream_arn = create_stream_table(ddb, table)
    url = sqs.create_queue(QueueName=f"bench-{time.monotonic_ns()}")["QueueUrl"]
    n = 100 if quick else 400
    counter = iter(range(10**9))

    def item() -> dict[str, Any]:
        i = next(counter)
        return {
            "pk": {"S": f"CONTACT#{i % 50}"},
            "sk": {"S": f"V#{i:08d}"},
            "agent": {"S": f"agent-{i % 7}"},
            "n": {"N": str(i)},
            "tags": {"SS": ["a", "b"]},
            "meta": {"M": {"queue": {"S": "billing"}, "ok": {"BOOL": True}}},
        }

    rows: list[tuple[str, float, float]] = []

    def run(label: str, fn: Callable[[], Any], count: int = n) -> None:
        fn()  # warm
        rows.append((label, *timed(wsgi, fn, count)))

    run("dynamodb PutItem", lambda: ddb.put_item(TableName=table, Item=item()))
    run(
        "dynamodb GetItem",
        lambda: ddb.get_item(
            TableName=table, Key={"pk": {"S": "CONTACT#1"}, "sk": {"S": "V#00000001"}}
        ),
    )
    run(
        "dynamodb Query (<=10 items)",
        lambda: ddb.query(
            TableName=table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "CONTACT#3"}},
            Limit=10,
        ),
    )
    run(
        "dynamodb UpdateItem",
        lambda: ddb.update_item(
            TableName=table,
            Key={"pk": {"S": "CONTACT#2"}, "sk": {"S": "V#00000002"}},
            UpdateExpression="SET #a = :a",
            ExpressionAttributeNames={"#a": "agent"},
            ExpressionAttributeValues={":a": {"S": f"x{next(counter)}"}},
        ),
    )

    def transact() -> None:
        a, b = item(), item()
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": a}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": b,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    run("dynamodb TransactWriteItems (2)", transact)
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    run(
        "streams GetRecords (100 records)",
        lambda: streams.get_records(ShardIterator=iterator, Limit=100),
        max(20, n // 10),
    )
    run("sqs SendMessage", lambda: sqs.send_message(QueueUrl=url, MessageBody='{"a": 1}'))
    run(
        "sqs ReceiveMessage (10)",
        lambda: sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ),
        max(20, n // 20),
    )
    run(
        "sqs GetQueueAttributes",
        lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
    )
    print("\nAPI through moto's WSGI app (ms per call; server = inside the app)")
    print(f"{'operation':<34} {'server':>8} {'client':>8}")
    for label, server, client in rows:
        print(f"{label:<34} {server:>8.3f} {client:>8.3f}")


# --- what the engine pays per record ------------------------------------------------------------


def sources(quick: bool) -> None:
    wsgi = Wsgi()
    c = clients(wsgi)
    sqs, ddb, streams = c["sqs"], c["dynamodb"], c["dynamodbstreams"]
    count = 500 if quick else 2000
    print("\nEngine reads (ms per record)")
    try:
        from emulator.delivery import sources as in_process  # noqa: PLC0415
    except ImportError:
        in_process = None  # type: ignore[assignment]

    # SQS: boto3 through the app vs SqsSource
    for label in ("boto3", "SqsSource"):
        if label == "SqsSource" and in_process is None:
            continue
        url = sqs.create_queue(QueueName=f"src-{time.monotonic_ns()}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        name = arn.rsplit(":", 1)[1]
        backend = sqs_backends[ACCOUNT][REGION]
        for i in range(count):
            backend.send_message(name, f'{{"n": {i}}}')
        got = 0
        started = time.thread_time()
        if label == "boto3":
            while True:
                batch = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=10,
                    MessageSystemAttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
                if not batch:
                    break
                got += len(batch)
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(batch)
                    ],
                )
        else:
            source = in_process.SqsSource(arn)
            while batch := source.receive(10):
                got += len(batch)
                source.delete([m["ReceiptHandle"] for m in batch])
        elapsed = time.thread_time() - started
        print(f"  sqs receive+delete via {label:<12} {elapsed / max(1, got) * 1000:8.4f}  ({got})")

    table = f"src-{time.monotonic_ns()}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    stream_arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    ddb_backend = dynamodb_backends[ACCOUNT][REGION]
    for i in range(count):
        ddb_backend.put_item(
            table, {"pk": {"S": f"p{i}"}, "n": {"N": str(i)}, "s": {"S": "x" * 40}}
        )
    got = 0
    started = time.thread_time()
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            response = streams.get_records(ShardIterator=iterator, Limit=100)
            if not response["Records"]:
                break
            got += len(response["Records"])
            iterator = response.get("NextShardIterator")
    elapsed = time.thread_time() - started
    print(f"  stream records via boto3        {elapsed / max(1, got) * 1000:8.4f}  ({got})")
    if in_process is not None:
        source = in_process.StreamSource(stream_arn)
        got = 0
        started = time.thread_time()
        for shard in source.shards():
            after = None
            while records := source.records(shard.shard_id, after, 100):
                got += len(records)
                after = records[-1]["dynamodb"]["SequenceNumber"]
        elapsed = time.thread_time() - started
        print(f"  stream records via StreamSource {elapsed / max(1, got) * 1000:8.4f}  ({got})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default="sqs,api,sources")
    parser.add_argument("--unpatched", action="store_true", help="moto without emulator patches")
    args = parser.parse_args()
    if not args.unpatched:
        moto_patches.install()
    parts = set(args.only.split(","))
    if "sqs" in parts:
        sqs_depths(args.quick)
    if "api" in parts:
        api(args.quick)
    if "sources" in parts:
        sources(args.quick)


if __name__ == "__main__":
    main()
