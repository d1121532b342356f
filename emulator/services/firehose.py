"""moto 5.2.6's Kinesis Data Firehose as it writes to S3, and AWS::KinesisFirehose::DeliveryStream
in CloudFormation.

moto (moto/firehose/models.py ``FirehoseBackend.put_s3_records``) writes one object per
PutRecord / PutRecordBatch call at once, named as Firehose names it
(``<prefix>YYYY/MM/dd/HH/<stream>-<version>-<yyyy-MM-dd-HH-mm-ss>-<uuid>``), but the records'
bytes joined with nothing else: no ``AppendDelimiterToRecord`` processor, no
``CompressionFormat``, no ``KMSEncryptionConfig``, no ``!{timestamp:...}`` prefix expressions, no
role; and moto's CloudFormation knows no AWS::KinesisFirehose::DeliveryStream (skipped, so a
``Ref`` to one is nothing). Here:

- ``put_s3_records``: still one object per call, at once (Firehose buffers up to its
  ``BufferingHints``; locally no call waits for a buffer), now as Firehose writes it
  (https://docs.aws.amazon.com/firehose/latest/dev/s3-object-name.html): each record followed
  by a newline when the stream has the ``AppendDelimiterToRecord`` processor, the object
  GZIP-compressed with the ``.gz`` extension when ``CompressionFormat`` is GZIP, the key's
  ``YYYY/MM/dd/HH/`` appended to a plain prefix (a prefix with ``!{timestamp:...}`` or
  ``!{firehose:random-string}`` expressions is evaluated instead, and nothing is appended), the
  object encrypted with the ``KMSEncryptionConfig`` key. The object is put through moto's S3
  backend, so the bucket's event notification goes out exactly as for a client's PutObject
  (emulator/services/s3.py: AWS's record shape with versionId and sequencer, duplicates, the
  queue's policy).
- The write is the stream's role's: ``s3:PutObject`` on the object with the bucket's policy, and
  S3's ``kms:GenerateDataKey`` on the key for it (``kms:ViaService`` S3, ``kms:CallerAccount``,
  ``kms:EncryptionContext:aws:s3:arn``: the bucket's ARN when the bucket uses S3 Bucket Keys,
  else the object's) with the key's policy (emulator/iam/resources.py ``role_may``). A refused
  write writes nothing and is logged; PutRecordBatch still answers success, as Firehose accepts
  records before it delivers them (it would retry for up to a day, then give up).
- Each delivery in the stream's ``AWS/Firehose`` metrics: ``DeliveryToS3.Success`` (1 or 0),
  ``DeliveryToS3.Records``, ``DeliveryToS3.Bytes``, ``DeliveryToS3.DataFreshness`` (0 s: written
  at once), ``IncomingRecords``, ``IncomingBytes``.
- ``DeliveryStreamModel``: the CloudFormation resource (``Ref`` the name, ``GetAtt`` Arn), created
  with moto's CreateDeliveryStream. What the local stack does not emulate is refused naming the
  setting (a processor other than AppendDelimiterToRecord, dynamic partitioning, format
  conversion, S3 backup, a compression other than GZIP), so a stack fails to deploy rather
  than run with a setting ignored.
"""

from __future__ import annotations

import gzip
import logging
import re
import uuid
from datetime import datetime
from typing import Any

from moto.core.utils import utcnow
from moto.firehose.exceptions import InvalidArgumentException
from moto.firehose.models import DeliveryStream, FirehoseBackend, firehose_backends
from moto.s3.models import s3_backends
from moto.utilities.utils import get_partition

from emulator.core.arns import parse_arn
from emulator.core.values import parse_bool
from emulator.iam.policy import Request
from emulator.iam.resources import role_may
from emulator.services import cloudwatch, patching
from emulator.services.cloudformation import StackResource

log = logging.getLogger("emulator.firehose")

DELIMITER = b"\n"  # what AppendDelimiterToRecord appends to each record
EMULATED_PROCESSORS = {"AppendDelimiterToRecord"}
EMULATED_COMPRESSION = {"UNCOMPRESSED", "GZIP"}
# Java date patterns of !{timestamp:...} -> strftime
_JAVA_DATE = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_JAVA_TOKEN = re.compile("|".join(_JAVA_DATE))
_EXPRESSION = re.compile(r"!\{([A-Za-z-]+):([^}]*)\}")


def install() -> None:
    patching.replace(FirehoseBackend, "put_s3_records", put_s3_records)


# --- the object Firehose writes -----------------------------------------------------------------
def processors(destination: dict[str, Any]) -> list[str]:
    """The types of the destination's enabled processors."""
    config = destination.get("ProcessingConfiguration") or {}
    if not parse_bool(config.get("Enabled", False)):
        return []
    return [p.get("Type", "") for p in config.get("Processors") or []]


def object_body(destination: dict[str, Any], records: list[dict[str, bytes]]) -> bytes:
    """The records as one object: each followed by a newline with AppendDelimiterToRecord, the
    whole GZIP-compressed when CompressionFormat says so."""
    delimiter = DELIMITER if "AppendDelimiterToRecord" in processors(destination) else b""
    body = b"".join(record["Data"] + delimiter for record in records)
    if destination.get("CompressionFormat") == "GZIP":
        body = gzip.compress(body)
    return body


def _evaluate(prefix: str, now: datetime) -> str:
    def value(match: re.Match[str]) -> str:
        namespace, argument = match[1], match[2]
        if namespace == "timestamp":
            return now.strftime(_JAVA_TOKEN.sub(lambda t: _JAVA_DATE[t[0]], argument))
        if namespace == "firehose" and argument == "random-string":
            return uuid.uuid4().hex[:11]
        raise InvalidArgumentException(
            f"prefix expression !{{{namespace}:{argument}}} is not emulated by the local stack"
        )

    return _EXPRESSION.sub(value, prefix)


def object_key(stream: str, version: str, destination: dict[str, Any], now: datetime) -> str:
    """``<prefix>YYYY/MM/dd/HH/<stream>-<version>-<yyyy-MM-dd-HH-mm-ss>-<uuid>[.gz]`` (UTC), the
    prefix's expressions evaluated instead of the YYYY/MM/dd/HH/ when it has any."""
    prefix = destination.get("Prefix") or ""
    if _EXPRESSION.search(prefix):
        path = _evaluate(prefix, now)
    else:
        path = prefix + now.strftime("%Y/%m/%d/%H/")
    name = f"{stream}-{version}-{now.strftime('%Y-%m-%d-%H-%M-%S')}-{uuid.uuid4()}"
    extension = ".gz" if destination.get("CompressionFormat") == "GZIP" else ""
    return f"{path}{name}{extension}"


def _kms_key(destination: dict[str, Any]) -> str | None:
    encryption = destination.get("EncryptionConfiguration") or {}
    return (encryption.get("KMSEncryptionConfig") or {}).get("AWSKMSKeyARN")


def refusal(role_arn: str | None, bucket: Any, key: str, kms_key: str | None) -> str | None:
    """Why the stream's role may not write ``key`` (None: it may): S3's PutObject, then S3's use
    of the key on the role's behalf."""
    if not role_arn:
        return "the destination has no RoleARN"
    object_arn = f"arn:aws:s3:::{bucket.name}/{key}"
    # Firehose's put names the stream's key (AWSKMSKeyARN) and aws:kms, as the bucket policy sees
    encryption = {
        "s3:x-amz-server-side-encryption": ["aws:kms"],
        "s3:x-amz-server-side-encryption-aws-kms-key-id": [kms_key],
    }
    put = Request("s3:PutObject", object_arn, encryption if kms_key else {})
    decision = role_may(role_arn, "firehose", put)
    if not decision.allowed:
        return f"s3:PutObject on {object_arn} {decision.reason(put.action)}"
    if kms_key is None:
        return None
    rule = (bucket.encryption or {}).get("Rule", {})
    bucket_key = parse_bool(rule.get("BucketKeyEnabled", False))
    context = f"arn:aws:s3:::{bucket.name}" if bucket_key else object_arn
    use = Request(
        "kms:GenerateDataKey",
        kms_key,
        {
            "kms:viaservice": [f"s3.{parse_arn(kms_key).region}.amazonaws.com"],
            "kms:calleraccount": [parse_arn(role_arn).account],
            "kms:encryptioncontext:aws:s3:arn": [context],
            "kms:encryptioncontextkeys": ["aws:s3:arn"],
        },
    )
    decision = role_may(role_arn, "firehose", use)
    if not decision.allowed:
        return f"kms:GenerateDataKey on {kms_key} {decision.reason(use.action)}"
    return None


def put_s3_records(
    self: FirehoseBackend,
    delivery_stream_name: str,
    version_id: str,
    s3_destination: dict[str, Any],
    records: list[dict[str, bytes]],
) -> list[dict[str, str]]:
    """One object for the call's records, written with the stream's role (module docstring)."""
    now = utcnow()
    stream: DeliveryStream = self.delivery_streams[delivery_stream_name]
    bucket_name = s3_destination["BucketARN"].split(":")[-1]
    backend = s3_backends[self.account_id][get_partition(self.region_name)]
    bucket = backend.get_bucket(bucket_name)
    key = object_key(delivery_stream_name, version_id, s3_destination, now)
    body = object_body(s3_destination, records)
    kms_key = _kms_key(s3_destination)
    why = refusal(s3_destination.get("RoleARN"), bucket, key, kms_key)
    if why is None:
        backend.put_object(
            bucket_name,
            key,
            body,
            encryption="aws:kms" if kms_key else None,
            kms_key_id=kms_key,
        )
    else:
        log.error(
            "firehose: %s could not deliver to %s: %s", delivery_stream_name, bucket_name, why
        )
    _count_delivery(stream, records, body, delivered=why is None)
    return [{"RecordId": uuid.uuid4().hex} for _ in records]


def _count_delivery(
    stream: DeliveryStream, records: list[dict[str, bytes]], body: bytes, *, delivered: bool
) -> None:
    """The delivery in the stream's AWS/Firehose metrics (module docstring)."""
    dimensions = [{"Name": "DeliveryStreamName", "Value": stream.delivery_stream_name}]
    now = utcnow()
    incoming = sum(len(record["Data"]) for record in records)
    values = [
        ("IncomingRecords", len(records), "Count"),
        ("IncomingBytes", incoming, "Bytes"),
        ("DeliveryToS3.Success", int(delivered), "None"),
    ]
    if delivered:
        values += [
            ("DeliveryToS3.Records", len(records), "Count"),
            ("DeliveryToS3.Bytes", len(body), "Bytes"),
            ("DeliveryToS3.DataFreshness", 0, "Seconds"),
        ]
    data = [
        {"MetricName": n, "Value": v, "Unit": u, "Dimensions": dimensions, "Timestamp": now}
        for n, v, u in values
    ]
    arn = parse_arn(stream.delivery_stream_arn)
    cloudwatch.put_metric_data(arn.account, arn.region, "AWS/Firehose", data)


# --- AWS::KinesisFirehose::DeliveryStream in CloudFormation ---------------------------------------
def validate_destination(destination: dict[str, Any], where: str) -> None:
    """Refuse what the local stack does not emulate, naming the setting."""

    def refuse(setting: str) -> None:
        raise InvalidArgumentException(f"{where}.{setting} is not emulated by the local stack")

    for processor in processors(destination):
        if processor not in EMULATED_PROCESSORS:
            refuse(f"ProcessingConfiguration.Processors[{processor}]")
    compression = destination.get("CompressionFormat") or "UNCOMPRESSED"
    if compression not in EMULATED_COMPRESSION:
        refuse(f"CompressionFormat {compression}")
    for setting in ("DynamicPartitioningConfiguration", "DataFormatConversionConfiguration"):
        if parse_bool((destination.get(setting) or {}).get("Enabled", False)):
            refuse(setting)
    if (destination.get("S3BackupMode") or "Disabled") != "Disabled":
        refuse("S3BackupMode")


class DeliveryStreamModel(StackResource):
    TYPE = "AWS::KinesisFirehose::DeliveryStream"
    NAME_PROPERTY = "DeliveryStreamName"
    ATTRIBUTES = ("Arn",)

    def __init__(self, stream: DeliveryStream, account_id: str, region_name: str) -> None:
        self.stream = stream
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.stream.delivery_stream_name

    def attributes(self) -> dict[str, Any]:
        return {"Arn": self.stream.delivery_stream_arn}

    @classmethod
    def create(
        cls,
        properties: dict[str, Any],
        account_id: str,
        region_name: str,
        physical_name: str,
        logical_id: str,
    ) -> DeliveryStreamModel:
        destinations = {
            "S3DestinationConfiguration": "s3_destination_configuration",
            "ExtendedS3DestinationConfiguration": "extended_s3_destination_configuration",
        }
        unsupported = [
            name
            for name in properties
            if name.endswith("DestinationConfiguration") and name not in destinations
        ]
        if unsupported:
            raise InvalidArgumentException(
                f"{logical_id}.{unsupported[0]} is not emulated by the local stack"
            )
        for name in destinations:
            if name in properties:
                validate_destination(properties[name], f"{logical_id}.{name}")
        backend = firehose_backends[account_id][region_name]
        name = properties.get("DeliveryStreamName") or physical_name[:64]
        backend.create_delivery_stream(
            region=region_name,
            delivery_stream_name=name,
            delivery_stream_type=properties.get("DeliveryStreamType") or "DirectPut",
            kinesis_stream_source_configuration=properties.get("KinesisStreamSourceConfiguration"),
            delivery_stream_encryption_configuration_input=properties.get(
                "DeliveryStreamEncryptionConfigurationInput"
            ),
            **{arg: properties.get(name) for name, arg in destinations.items()},
            redshift_destination_configuration=None,
            elasticsearch_destination_configuration=None,
            splunk_destination_configuration=None,
            http_endpoint_destination_configuration=None,
            snowflake_destination_configuration=None,
            iceberg_destination_configuration=None,
            tags=properties.get("Tags"),
        )
        return cls(backend.delivery_streams[name], account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        backend = firehose_backends[self.account_id][self.region_name]
        backend.delivery_streams.pop(self.stream.delivery_stream_name, None)
