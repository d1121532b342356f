"""Events as AWS delivers them to the functions, for tests that call a handler in process: CONTACT
items and their stream records, SQS events (of received messages or of plain bodies), S3 event
notifications; and the failed ids of a batch response."""

import hashlib
import itertools
import json
from datetime import datetime
from urllib.parse import quote_plus

from boto3.dynamodb.types import TypeSerializer
from shared import keys, model, rules

from harness.in_process import ACCOUNT, REGION
from ops.stack import parse_arn

STREAM_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/contacts/stream/2026-11-29T00:00:00.000"
_sequence = itertools.count(100_000_000_000_000_000_000)
_serializer = TypeSerializer()


def _md5(text: str) -> str:
    """The MD5 hex digest SQS (MD5OfBody) and these stream records' eventID use; not security."""
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def contact(
    contact_id: str = "c-0001",
    caller: str = "+14155550101",
    ended_at: str = "2026-11-29T10:05:00+00:00",
    **fields,
) -> dict:
    """A CONTACT item as IngestFunction writes it (docs/design.md, table contract): RESOLVED
    with an agent unless fields say otherwise; None removes a field, as absent input fields are
    absent items."""
    ended_at_utc = keys.utc_timestamp(datetime.fromisoformat(ended_at))
    item = {
        "contact_id": contact_id,
        "caller": caller,
        "agent_id": "agent-7",
        "queue": "billing",
        "started_at": keys.utc_timestamp(datetime.fromisoformat("2026-11-29T10:00:00+00:00")),
        "ended_at": ended_at_utc,
        "disposition": rules.RESOLVED,
        "wait_seconds": 30,
        "email": "pat@example.com",
        "survey_opt_in": False,
        **fields,
    }
    item = {name: value for name, value in item.items() if value is not None}
    item["long_wait"] = rules.long_wait(item["wait_seconds"], rules.DEFAULT_GOODWILL_WAIT_SECONDS)
    item.setdefault("first_export", True)
    item.setdefault(
        "expires_at", int((datetime.fromisoformat(ended_at) + model.CONTACT_RETENTION).timestamp())
    )
    return {
        "pk": keys.caller_pk(caller),
        "sk": keys.contact_sk(ended_at_utc, contact_id),
        "type": keys.CONTACT,
        **item,
    }


def stream_record(new_image: dict, event_name: str = "INSERT", old_image=None) -> dict:
    typed_new = {name: _serializer.serialize(value) for name, value in new_image.items()}
    dynamodb = {
        "ApproximateCreationDateTime": 1764410700,
        "Keys": {"pk": typed_new["pk"], "sk": typed_new["sk"]},
        "SequenceNumber": str(next(_sequence)),
        "SizeBytes": len(json.dumps(typed_new)),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if event_name != "REMOVE":
        dynamodb["NewImage"] = typed_new
    if old_image is not None:
        dynamodb["OldImage"] = {k: _serializer.serialize(v) for k, v in old_image.items()}
    return record_of(event_name, dynamodb)


def record_of(event_name: str, dynamodb: dict) -> dict:
    """The stream record of a `dynamodb` part (its SequenceNumber gives the eventID)."""
    return {
        "eventID": _md5(dynamodb["SequenceNumber"]),
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": dynamodb,
        "eventSourceARN": STREAM_ARN,
    }


def stream_event(*records: dict) -> dict:
    return {"Records": list(records)}


def sqs_record(message: dict, queue_arn: str) -> dict:
    """One record of the event Lambda's SQS poller sends, for a message as ReceiveMessage returned
    it (MessageId and Body; ReceiptHandle, MD5OfBody and Attributes when it has them)."""
    body = message["Body"]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message.get("ReceiptHandle") or f"handle-{message['MessageId']}",
        "body": body,
        "attributes": message.get("Attributes")
        or {"ApproximateReceiveCount": "1", "SentTimestamp": "1764410700000"},
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody") or _md5(body),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": parse_arn(queue_arn)["region"],
    }


def sqs_event(messages: list[dict], queue_arn: str) -> dict:
    """The event Lambda's SQS poller sends for messages as ReceiveMessage returned them."""
    return {"Records": [sqs_record(message, queue_arn) for message in messages]}


def sqs_bodies_event(bodies: list[str], queue_arn: str) -> dict:
    """An SQS event of the given raw bodies (for messages that never went through a queue)."""
    return sqs_event(
        [
            {
                "MessageId": f"msg-{index}",
                "ReceiptHandle": f"handle-{index}",
                "Body": body,
                "MD5OfBody": _md5(body),
            }
            for index, body in enumerate(bodies)
        ],
        queue_arn,
    )


def failed_ids(response: dict) -> list[str]:
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


# S3's sequencers grow with every event of a key; these grow over the whole test run.
_sequencers = itertools.count(0x0068CA1F3C11A9E207)


def next_sequencer() -> str:
    return f"{next(_sequencers):018X}"


def s3_notification(
    bucket: str,
    key: str,
    *,
    size: int,
    version_id: str | None = None,
    etag: str = "etag",
    sequencer: str | None = None,
    event_time: str = "2026-11-29T08:15:02.431Z",
) -> dict:
    """The S3 event notification S3 puts on the queue for an object created (the key URL-encoded
    with '/' kept, versionId on a versioned bucket, a sequencer that orders the key's events)."""
    obj = {
        "key": quote_plus(key, safe="/"),
        "size": size,
        "eTag": etag.strip('"'),
        "sequencer": sequencer or next_sequencer(),
    }
    if version_id:
        obj["versionId"] = version_id
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": REGION,
                "eventTime": event_time,
                "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "AWS:AIDAEXAMPLEEXPORTER"},
                "requestParameters": {"sourceIPAddress": "198.51.100.7"},
                "responseElements": {
                    "x-amz-request-id": "C3D13FE58DE4C810",
                    "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5Jg",
                },
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "IngestIncoming",
                    "bucket": {
                        "name": bucket,
                        "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                        "arn": f"arn:aws:s3:::{bucket}",
                    },
                    "object": obj,
                },
            }
        ]
    }
