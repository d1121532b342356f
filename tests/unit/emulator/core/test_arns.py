"""emulator/core/arns.py: ARNs split once, the resource part kept whole."""

import pytest

from emulator.core.arns import Arn, parse_arn, service_of

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/Contacts/stream/2026-01-01T00:00:00.000"


def test_the_resource_keeps_its_colons_and_slashes():
    assert parse_arn(STREAM) == Arn(
        "aws",
        "dynamodb",
        "eu-west-1",
        "123456789012",
        "table/Contacts/stream/2026-01-01T00:00:00.000",
    )
    function = parse_arn("arn:aws:lambda:us-east-1:123456789012:function:Fn:live")
    assert function.resource == "function:Fn:live"


def test_an_s3_arn_has_no_region_or_account():
    assert parse_arn("arn:aws:s3:::bucket/key") == Arn("aws", "s3", "", "", "bucket/key")


@pytest.mark.parametrize(
    "text", ["", "Queue", "arn:aws:sqs:us-east-1:123", "urn:aws:sqs:r:a:q", None]
)
def test_what_is_not_an_arn_is_refused(text):
    with pytest.raises(ValueError, match="not an ARN"):
        parse_arn(text)
    assert service_of(text) == ""


def test_service_of_an_arn():
    assert service_of("arn:aws:sqs:us-east-1:123456789012:Queue.fifo") == "sqs"
    assert service_of(STREAM) == "dynamodb"
