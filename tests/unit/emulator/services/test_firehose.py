"""Kinesis Data Firehose to S3 (emulator/services/firehose.py): the object Firehose writes (key,
delimiter, GZIP, the bucket's key), written with the stream's role, through the path of a
client's PutObject (the bucket's event notification); AWS::KinesisFirehose::DeliveryStream in
CloudFormation. The project's template.yaml deployed for the first tests, moto in process for
the rest."""

import gzip
import io
import json
import re
from datetime import UTC, datetime

import pytest
from moto.firehose.exceptions import InvalidArgumentException

from emulator.iam.authorizations import authorizations
from emulator.services import firehose
from tests.unit.emulator.support import ROOT, client, deployed_stack, endpoint_client

pytestmark = pytest.mark.usefixtures("moto_patched")

RECORDS = [
    json.dumps({"ContactId": f"c-{n}", "AWSContactTraceRecordFormatVersion": "2017-03-10"})
    for n in range(3)
]


@pytest.fixture(scope="module")
def stack(module_credentials, tmp_path_factory):
    """template.yaml deployed on the local stack in this process (no function runs: what S3
    notifies stays in IngestQueue)."""
    logs = tmp_path_factory.mktemp("logs")
    with deployed_stack(ROOT / "template.yaml", logs) as (server, _runtime, deployment):
        yield server, deployment


def drain(sqs, url: str) -> list[dict]:
    messages = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in batch:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)
    return messages


def test_a_batch_lands_as_one_gzipped_object_of_lines_and_is_notified_to_ingest(stack):
    server, deployment = stack
    outputs = deployment.outputs
    s3 = endpoint_client("s3", server.endpoint_url)
    sqs = endpoint_client("sqs", server.endpoint_url)
    stream = outputs["ContactRecordsDeliveryStreamName"]  # the harness finds it so too
    drain(sqs, outputs["IngestQueueUrl"])  # S3's test event of the deploy
    before = datetime.now(UTC).replace(microsecond=0)

    answer = endpoint_client("firehose", server.endpoint_url).put_record_batch(
        DeliveryStreamName=stream, Records=[{"Data": r.encode()} for r in RECORDS]
    )

    assert answer["FailedPutCount"] == 0 and len(answer["RequestResponses"]) == 3
    bucket = outputs["ContactsBucketName"]
    [listed] = s3.list_objects_v2(Bucket=bucket, Prefix="contact-records/")["Contents"]
    key = listed["Key"]
    found = re.fullmatch(
        rf"contact-records/(\d{{4}})/(\d\d)/(\d\d)/(\d\d)/{stream}-1-"
        r"(\d{4})-(\d\d)-(\d\d)-(\d\d)-(\d\d)-(\d\d)-[0-9a-f-]{36}\.gz",
        key,
    )
    assert found, key
    path, stamp = found.groups()[:4], found.groups()[4:]
    assert path == stamp[:4]  # the hour's folder is the object's own time (UTC)
    written = datetime(*map(int, stamp), tzinfo=UTC)
    assert before <= written <= datetime.now(UTC)
    got = s3.get_object(Bucket=bucket, Key=key)
    assert gzip.decompress(got["Body"].read()) == b"".join(r.encode() + b"\n" for r in RECORDS)
    assert got["ServerSideEncryption"] == "aws:kms"  # with ContactsBucketKey, as configured
    assert got["SSEKMSKeyId"].endswith(deployment.resources["ContactsBucketKey"][1])

    # notified as a client's PutObject is: AWS's record shape, with version and sequencer
    [message] = drain(sqs, outputs["IngestQueueUrl"])
    [record] = json.loads(message["Body"])["Records"]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["bucket"]["name"] == bucket
    assert record["s3"]["object"]["key"] == key
    assert record["s3"]["object"]["versionId"] == got["VersionId"]
    assert record["s3"]["object"]["sequencer"]


def test_the_stack_creates_no_connect_resource_without_an_instance(stack):
    _server, deployment = stack
    assert deployment.resources["ContactRecordsDeliveryStream"][0] == (
        "AWS::KinesisFirehose::DeliveryStream"
    )
    assert not [r for r, _ in deployment.resources.values() if r.startswith("AWS::Connect::")]


def test_the_stream_describes_itself_as_the_template_says(stack):
    server, deployment = stack
    name = deployment.outputs["ContactRecordsDeliveryStreamName"]
    described = endpoint_client("firehose", server.endpoint_url).describe_delivery_stream(
        DeliveryStreamName=name
    )["DeliveryStreamDescription"]
    assert described["DeliveryStreamStatus"] == "ACTIVE"
    assert described["DeliveryStreamType"] == "DirectPut"
    [destination] = described["Destinations"]
    s3 = destination["ExtendedS3DestinationDescription"]
    assert (s3["Prefix"], s3["CompressionFormat"]) == ("contact-records/", "GZIP")


# --- the object, as Firehose names and writes it -------------------------------------------------
NOW = datetime(2026, 12, 6, 9, 5, 7, tzinfo=UTC)


def test_without_processor_or_compression_the_records_are_joined_as_sent():
    records = [{"Data": r.encode()} for r in RECORDS]
    assert firehose.object_body({}, records) == b"".join(r.encode() for r in RECORDS)
    key = firehose.object_key("s", "1", {"Prefix": "p/"}, NOW)
    assert re.fullmatch(r"p/2026/12/06/09/s-1-2026-12-06-09-05-07-[0-9a-f-]{36}", key), key
    disabled = {"ProcessingConfiguration": {"Enabled": "false", "Processors": [
        {"Type": "AppendDelimiterToRecord"}]}}  # fmt: skip
    assert firehose.object_body(disabled, records) == b"".join(r.encode() for r in RECORDS)


def test_a_prefix_with_expressions_is_evaluated_and_nothing_appended():
    prefix = {"Prefix": "records/year=!{timestamp:yyyy}/hour=!{timestamp:HH}/"}
    key = firehose.object_key("s", "2", prefix, NOW)
    assert key.startswith("records/year=2026/hour=09/s-2-2026-12-06-09-05-07-"), key
    with pytest.raises(InvalidArgumentException, match="partitionKeyFromQuery"):
        firehose.object_key("s", "1", {"Prefix": "!{partitionKeyFromQuery:id}/"}, NOW)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"ProcessingConfiguration": {"Enabled": True, "Processors": [{"Type": "Lambda"}]}},
         "Processors[Lambda]"),
        ({"CompressionFormat": "Snappy"}, "CompressionFormat Snappy"),
        ({"DynamicPartitioningConfiguration": {"Enabled": True}}, "DynamicPartitioning"),
        ({"S3BackupMode": "Enabled"}, "S3BackupMode"),
    ],
)  # fmt: skip
def test_what_is_not_emulated_is_refused_naming_the_setting(setting, named):
    with pytest.raises(InvalidArgumentException, match=re.escape(named)):
        firehose.validate_destination({"BucketARN": "arn:aws:s3:::b", **setting}, "Stream")


# --- written with the stream's role ---------------------------------------------------------------
TRUST = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "firehose.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)


def test_the_stream_writes_only_what_its_role_may(moto_in_process):
    s3, iam, hose = client("s3"), client("iam"), client("firehose")
    s3.create_bucket(Bucket="records")
    role = iam.create_role(RoleName="delivery", AssumeRolePolicyDocument=TRUST)["Role"]["Arn"]
    hose.create_delivery_stream(
        DeliveryStreamName="hose",
        ExtendedS3DestinationConfiguration={
            "RoleARN": role,
            "BucketARN": "arn:aws:s3:::records",
            "Prefix": "in/",
        },
    )

    hose.put_record(DeliveryStreamName="hose", Record={"Data": b"a"})
    assert "Contents" not in s3.list_objects_v2(Bucket="records")  # refused: nothing written

    iam.put_role_policy(
        RoleName="delivery",
        PolicyName="write",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "s3:PutObject",
                        "Resource": "arn:aws:s3:::records/in/*",
                    }
                ],
            }
        ),
    )
    hose.put_record(DeliveryStreamName="hose", Record={"Data": b"b"})
    [written] = s3.list_objects_v2(Bucket="records")["Contents"]
    assert s3.get_object(Bucket="records", Key=written["Key"])["Body"].read() == b"b"
    metrics = client("cloudwatch").get_metric_statistics(
        Namespace="AWS/Firehose",
        MetricName="DeliveryToS3.Success",
        Dimensions=[{"Name": "DeliveryStreamName", "Value": "hose"}],
        StartTime=datetime(2020, 1, 1, tzinfo=UTC),
        EndTime=datetime(2100, 1, 1, tzinfo=UTC),
        Period=86400,
        Statistics=["Minimum", "Maximum", "SampleCount"],
    )["Datapoints"]
    [point] = metrics
    assert (point["Minimum"], point["Maximum"], point["SampleCount"]) == (0, 1, 2)


@pytest.mark.parametrize("operation", ["PutRecord", "PutRecordBatch"])
def test_a_callers_firehose_call_is_authorized_on_its_delivery_stream(operation):
    body = json.dumps({"DeliveryStreamName": "hose", "Records": [{"Data": "YQ=="}]}).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "HTTP_X_AMZ_TARGET": f"Firehose_20150804.{operation}",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    [request] = authorizations(
        environ,
        "firehose",
        f"firehose:{operation}",
        region="us-east-1",
        account="123456789012",
        key_schema=lambda table, index: (),
        kms_key=lambda key, ciphertext, region, account: "*",
    )
    assert request.action == f"firehose:{operation}"
    assert request.resource == "arn:aws:firehose:us-east-1:123456789012:deliverystream/hose"
    assert environ["wsgi.input"].read() == body  # left for the service
