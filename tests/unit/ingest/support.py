"""What the IngestFunction tests share (their fixture: tests/unit/ingest/conftest.py): files put
into the moto bucket, the SQS events Lambda would send for them (S3 notification bodies as AWS
sends them, from harness.events), and readers of what the ingest left behind (items, reports,
metrics)."""

import json
import uuid
from dataclasses import dataclass

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from boto3.dynamodb.types import TypeDeserializer
from botocore.awsrequest import AWSResponse
from shared import keys
from shared.s3_events import parse_message

from harness import events
from harness.in_process import ACCOUNT, REGION, FakeLambdaContext, cold_start

_deserializer = TypeDeserializer()


@dataclass
class Delivery:
    """One SQS message carrying one S3 event notification."""

    message_id: str
    body: str


INGEST_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:ingest"


def notification(
    bucket: str,
    key: str,
    version_id: str | None,
    size: int,
    sequencer: str,
    event_time: str = "2026-11-29T08:15:02.431Z",
) -> str:
    """The body of the SQS message S3 sends IngestQueue for an object created."""
    return json.dumps(
        events.s3_notification(
            bucket,
            key,
            size=size,
            version_id=version_id,
            sequencer=sequencer,
            event_time=event_time,
        )
    )


def sqs_event(*deliveries: Delivery) -> dict:
    """The event Lambda sends IngestFunction for these messages of IngestQueue."""
    messages = [{"MessageId": d.message_id, "Body": d.body} for d in deliveries]
    return events.sqs_event(messages, INGEST_QUEUE_ARN)


def error_response(parsed: dict) -> tuple[AWSResponse, dict]:
    """A botocore before-call hook's short-circuit: an HTTP 400 with this parsed error, raised
    as the modeled exception of its code, as if DynamoDB had answered it."""
    return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None), parsed


class Ingest:
    def __init__(self, stack, monkeypatch, capsys):
        self.stack = stack
        self.monkeypatch = monkeypatch
        self.capsys = capsys
        self._app = None
        self.output = ""

    @property
    def app(self):
        if self._app is None:
            self.cold_start()
        return self._app

    def cold_start(self):
        """A new execution environment: module-level clients and config built afresh. Its own
        Powertools service name: Powertools binds a service's logger to the sys.stdout of its first
        use, and capsys swaps sys.stdout between a test's setup and its body."""
        self._app = cold_start("ingest", self.monkeypatch)
        return self._app

    def put(
        self,
        key: str,
        body: bytes | str,
        versioned: bool = True,
        event_time: str = "2026-11-29T08:15:02.431Z",
    ) -> Delivery:
        data = body.encode() if isinstance(body, str) else body
        response = self.stack.s3.put_object(Bucket=self.stack.bucket, Key=key, Body=data)
        return Delivery(
            str(uuid.uuid4()),
            notification(
                self.stack.bucket,
                key,
                response.get("VersionId") if versioned else None,
                len(data),
                events.next_sequencer(),
                event_time,
            ),
        )

    def run(self, *deliveries: Delivery, context=None) -> list[str]:
        """Invoke the handler with one SQS batch; the ids of the messages SQS will redeliver."""
        try:
            response = self.app.lambda_handler(
                sqs_event(*deliveries), context or FakeLambdaContext()
            )
            failed = [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
        except BatchProcessingError:  # every record failed: Lambda retries the whole batch
            failed = [delivery.message_id for delivery in deliveries]
        finally:
            captured = self.capsys.readouterr()
            self.output += captured.out + captured.err
        return failed

    def items(self, item_type: str = "CONTACT", raw: bool = False) -> list[dict]:
        pages = self.stack.dynamodb.get_paginator("scan").paginate(
            TableName=self.stack.contacts_table
        )
        found = [i for page in pages for i in page["Items"] if i["type"]["S"] == item_type]
        return found if raw else [self.plain(i) for i in found]

    @staticmethod
    def plain(item: dict) -> dict:
        return {name: _deserializer.deserialize(value) for name, value in item.items()}

    def clear_contacts(self) -> None:
        """Remove every contact (and its ref): a table as before any file."""
        for raw in self.items(raw=True) + self.items("CONTACT_REF", raw=True):
            self.stack.dynamodb.delete_item(
                TableName=self.stack.contacts_table, Key={"pk": raw["pk"], "sk": raw["sk"]}
            )

    def processing_log(self) -> list[dict]:
        return self.items("PROCESSING_LOG")

    def log_of(self, delivery: Delivery) -> dict:
        """The PROCESSING_LOG item of the file a delivery names (a read, not a scan)."""
        [task] = parse_message(delivery.body)
        s3_object = task.s3_object
        item = self.stack.dynamodb.get_item(
            TableName=self.stack.contacts_table,
            Key=self.key(keys.processing_log_key(s3_object.file_id)),
        )["Item"]
        return self.plain(item)

    @staticmethod
    def key(values: dict[str, str]) -> dict:
        return {name: {"S": value} for name, value in values.items()}

    def report(self, key: str) -> list[dict]:
        """The report of the one version of `key` that has one (rejected/<key>/<version>...)."""
        [report_key] = [k for k in self.reports() if k.startswith(f"rejected/{key}/")]
        return self.report_at(report_key)

    def report_at(self, report_key: str) -> list[dict]:
        body = self.stack.s3.get_object(Bucket=self.stack.bucket, Key=report_key)
        return [json.loads(line) for line in body["Body"].read().decode().splitlines()]

    def reports(self) -> list[str]:
        listing = self.stack.s3.list_objects_v2(Bucket=self.stack.bucket, Prefix="rejected/")
        return [entry["Key"] for entry in listing.get("Contents", [])]

    def metrics(self) -> dict[str, float]:
        """Sums of the EMF metrics printed so far."""
        totals: dict[str, float] = {}
        for line in self.output.splitlines():
            if not line.startswith("{") or '"_aws"' not in line:
                continue
            blob = json.loads(line)
            for directive in blob["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    values = blob[metric["Name"]]
                    values = values if isinstance(values, list) else [values]
                    totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(values)
        return totals
