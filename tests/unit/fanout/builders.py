"""Contacts, stream records and queue events as AWS delivers them to the fan-out functions."""

import hashlib
import itertools
import json
from datetime import datetime

from boto3.dynamodb.types import TypeSerializer
from shared import keys, rules

from tests.resources import REGION

STREAM_ARN = f"arn:aws:dynamodb:{REGION}:123456789012:table/contacts/stream/2026-11-29T00:00:00.000"
_sequence = itertools.count(100_000_000_000_000_000_000)
_serializer = TypeSerializer()


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
        "eventID": hashlib.md5(dynamodb["SequenceNumber"].encode()).hexdigest(),
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": dynamodb,
        "eventSourceARN": STREAM_ARN,
    }


def stream_event(*records: dict) -> dict:
    return {"Records": list(records)}


def sqs_event(messages: list[dict], queue_arn: str) -> dict:
    """The event Lambda's SQS poller sends for messages as ReceiveMessage returned them."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764410700000"},
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for message in messages
        ]
    }


def sqs_bodies_event(bodies: list[str], queue_arn: str) -> dict:
    """An SQS event of the given raw bodies (for messages that never went through a queue)."""
    return sqs_event(
        [
            {
                "MessageId": f"msg-{index}",
                "ReceiptHandle": f"handle-{index}",
                "Body": body,
                "MD5OfBody": hashlib.md5(body.encode()).hexdigest(),
            }
            for index, body in enumerate(bodies)
        ],
        queue_arn,
    )


def failed_ids(response: dict) -> list[str]:
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
