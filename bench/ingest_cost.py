"""P2: DynamoDB requests per contact record when IngestFunction ingests one object of 10,000 of
Amazon Connect's contact records, as template.yaml's Firehose delivery stream writes it (under
contact-records/, records newline-delimited, GZIP, `.gz`).

In-process under moto (mock_aws): the stack's resources (harness.in_process), the object put into
the versioned bucket, IngestFunction's handler loaded cold and invoked once with an SQS event
carrying the S3 notification as AWS sends it (versionId, sequencer, form-encoded key). Every
DynamoDB call
of every client built meanwhile is counted (bench.inprocess.RequestCounter), by operation and
table. A second delivery of the same notification (S3 delivers duplicates) shows what the file
claim costs when it suppresses one.
"""

import json
import time

import boto3

from bench.common import Figure
from bench.inprocess import (
    RequestCounter,
    aws_in_process,
    breakdown,
    by_operation,
    contact_records,
    count_items,
    firehose_key,
    firehose_object,
    lambda_environment,
    load_handler,
    quiet,
    s3_notification,
    sqs_event,
)
from emulator.process import REGION
from harness.in_process import FakeLambdaContext, create_resources

RECORDS = 10_000
BUDGET_PER_RECORD = 0.05


def run() -> list[Figure]:
    counter = RequestCounter()
    with aws_in_process(), counter.installed():
        resources = create_resources("bench-")
        with lambda_environment("IngestFunction", resources.function_env()):
            key = firehose_key(0)
            body = firehose_object(contact_records(RECORDS))
            s3 = boto3.client("s3", region_name=REGION)
            put = s3.put_object(Bucket=resources.bucket, Key=key, Body=body)
            notification = s3_notification(
                resources.bucket, key, len(body), put["ETag"], put.get("VersionId")
            )
            event = sqs_event([json.dumps(notification)], "bench-ingest")
            app = load_handler("IngestFunction")
            counter.reset()  # only what the handler does from here on

            with quiet():
                started = time.perf_counter()
                response = app.lambda_handler(event, FakeLambdaContext("IngestFunction"))
                seconds = time.perf_counter() - started
                first = counter.reset()
                duplicate_response = app.lambda_handler(
                    sqs_event([json.dumps(notification)], "bench-ingest"),
                    FakeLambdaContext("IngestFunction"),
                )
                duplicate = counter.reset()

            dynamodb = boto3.client("dynamodb", region_name=REGION)
            stored = count_items(dynamodb, resources.contacts_table, "CONTACT")

    failures = response.get("batchItemFailures") or duplicate_response.get("batchItemFailures")
    per_record = len(first) / RECORDS
    contacts_ops = by_operation(first, resources.contacts_table)
    claim_ops = by_operation(first, resources.idempotency_table)
    items_written = sum(c.items for c in first if c.operation == "TransactWriteItems")
    transactions = contacts_ops["TransactWriteItems"]
    ok = not failures and stored == RECORDS
    check = "" if ok else f"; INVALID RUN: {stored} contacts stored, failures {failures}"
    return [
        Figure(
            "P2",
            "ingest DynamoDB requests per contact record",
            round(per_record, 4),
            "req/record",
            f"<= {BUDGET_PER_RECORD}",
            per_record <= BUDGET_PER_RECORD and ok,
            (
                f"{len(first)} requests for {RECORDS} records ({stored} CONTACT items stored) "
                f"of one Firehose object ({len(body) / 1e6:.1f} MB gzipped) in {seconds:.1f} s "
                f"under moto: contacts table {breakdown(contacts_ops)} "
                f"({items_written / max(transactions, 1):.1f} items per transaction: a contact and "
                f"its CONTACT_REF); idempotency table "
                f"{breakdown(claim_ops)}{check}"
            ),
        ),
        Figure(
            "P2",
            "ingest file-claim requests per file",
            sum(claim_ops.values()),
            "req/file",
            "-",
            None,
            (
                f"idempotency table, first delivery: {breakdown(claim_ops)}; a duplicate "
                f"delivery of the same notification: {len(duplicate)} request(s) in all "
                f"({breakdown(by_operation(duplicate))}), nothing re-ingested"
            ),
        ),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure)
