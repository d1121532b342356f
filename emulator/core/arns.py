"""Amazon Resource Names, split in one place: ``arn:partition:service:region:account:resource``.

The resource part keeps its own ``:`` and ``/`` (``function:name:qualifier``,
``table/T/stream/2026-01-01T00:00:00.000``): only the first five colons separate components, as
IAM reads an ARN.
"""

from __future__ import annotations

from typing import NamedTuple


class Arn(NamedTuple):
    partition: str
    service: str
    region: str
    account: str
    resource: str


def parse_arn(arn: str) -> Arn:
    """The ARN's components; ValueError for anything that is not an ARN."""
    parts = arn.split(":", 5) if isinstance(arn, str) else []
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(f"not an ARN: {arn!r}")
    return Arn(*parts[1:])


def service_of(arn: str) -> str:
    """The ARN's service ("sqs", "dynamodb", ...); "" for what is not an ARN."""
    try:
        return parse_arn(arn).service
    except ValueError:
        return ""


def source_kind(arn: str) -> str:
    """ "sqs", "dynamodb" (a DynamoDB stream) or the ARN's service for anything unsupported."""
    service = service_of(arn)
    if service == "dynamodb" and "/stream/" in arn:
        return "dynamodb"
    return service
