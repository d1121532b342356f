"""The unit tests' stack in process, for their fixtures (tests/unit/conftest.py) and the tests
that make one themselves: moto (mock_aws, with the local stack's fidelity patches) holding the
resources the functions use, with clients and helpers to look at them."""

import contextlib
import json
from collections.abc import Iterator

from moto import mock_aws

from emulator.services import moto_patches
from harness.in_process import Resources, client, create_resources
from ops import replay

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

    def stream_records(self) -> list[dict]:
        """Every record of the contacts table's stream so far, as Lambda delivers them."""
        streams = client("dynamodbstreams")
        table = self.dynamodb.describe_table(TableName=self.contacts_table)["Table"]
        arn = table["LatestStreamArn"]
        found = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator and (page := streams.get_records(ShardIterator=iterator))["Records"]:
                found += [replay.lambda_record(record, arn) for record in page["Records"]]
                iterator = page.get("NextShardIterator")
        return found

    def age_idempotency_records(self, seconds: int) -> None:
        """Every idempotency record as if claimed `seconds` earlier (Powertools dates a record's
        expiry from its claim): time passing, for the claims that depend on it."""
        for item in self.dynamodb.scan(TableName=self.idempotency_table)["Items"]:
            self.dynamodb.update_item(
                TableName=self.idempotency_table,
                Key={"id": item["id"]},
                UpdateExpression="SET expiration = expiration - :seconds",
                ExpressionAttributeValues={":seconds": {"N": str(seconds)}},
            )


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
