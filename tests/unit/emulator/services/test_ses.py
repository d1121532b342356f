"""The local stack's SES (emulator/services/ses.py): SendEmail with a template through a
configuration set, as SES refuses or accepts it, and the sending events it publishes."""

import json

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from emulator.process import ACCOUNT, REGION
from emulator.services import moto_patches, ses

BUS = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default"


@pytest.fixture
def sesv2():
    moto_patches.install()
    try:
        with mock_aws():
            ses.reset()
            identity = {"EmailIdentity": "example.com"}
            ses.EmailIdentityModel.create(identity, ACCOUNT, REGION, "i", "I")
            ses.ConfigurationSetModel.create({"Name": "mail"}, ACCOUNT, REGION, "mail", "Set")
            ses.EventDestinationModel.create(
                {
                    "ConfigurationSetName": "mail",
                    "EventDestination": {
                        "Name": "events",
                        "Enabled": True,
                        "MatchingEventTypes": ["send", "bounce", "complaint"],
                        "EventBridgeDestination": {"EventBusArn": BUS},
                    },
                },
                ACCOUNT,
                REGION,
                "events",
                "Destination",
            )
            ses.TemplateModel.create(
                {
                    "Template": {
                        "TemplateName": "card",
                        "SubjectPart": "Card {{code}}",
                        "TextPart": "{{amount}} USD",
                    }
                },
                ACCOUNT,
                REGION,
                "card",
                "Template",
            )
            yield boto3.client("sesv2", region_name=REGION)
    finally:
        ses.reset()
        moto_patches.uninstall()


def send(client, to: str, **overrides):
    return client.send_email(
        **{
            "FromEmailAddress": "surveys@example.com",
            "Destination": {"ToAddresses": [to]},
            "Content": {
                "Template": {"TemplateName": "card", "TemplateData": '{"code": "x", "amount": 10}'}
            },
            "ConfigurationSetName": "mail",
            "EmailTags": [{"Name": "notification_id", "Value": "GIFT_CARD-c-1"}],
        }
        | overrides
    )


def published(events_queue) -> list[dict]:
    sqs = boto3.client("sqs", region_name=REGION)
    found = []
    while batch := sqs.receive_message(QueueUrl=events_queue, MaxNumberOfMessages=10).get(
        "Messages"
    ):
        for message in batch:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=events_queue, ReceiptHandle=message["ReceiptHandle"])
    return found


@pytest.fixture
def events_queue(sesv2):
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="ses-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = boto3.client("events", region_name=REGION)
    events.put_rule(Name="ses", EventPattern=json.dumps({"source": ["aws.ses"]}))
    events.put_targets(Rule="ses", Targets=[{"Id": "q", "Arn": arn}])
    return url


def test_a_templated_send_is_rendered_kept_in_the_inbox_and_published_as_ses_documents_it(
    sesv2, events_queue
):
    message_id = send(sesv2, "ann@example.org")["MessageId"]

    [kept] = ses.inbox()
    assert (kept["message_id"], kept["to"], kept["subject"], kept["text"]) == (
        message_id,
        ["ann@example.org"],
        "Card x",
        "10 USD",
    )
    [sent] = published(events_queue)  # Delivery is not among the destination's event types
    assert (sent["source"], sent["detail-type"]) == ("aws.ses", "Email Sent")
    assert sent["detail"]["eventType"] == "Send"
    assert sent["detail"]["mail"]["messageId"] == message_id
    assert sent["detail"]["mail"]["tags"]["ses:configuration-set"] == ["mail"]
    assert sent["detail"]["mail"]["tags"]["notification_id"] == ["GIFT_CARD-c-1"]


@pytest.mark.parametrize(
    ("address", "detail_type", "subtype"),
    [
        ("bounce@simulator.amazonses.com", "Email Bounced", "General"),
        ("suppressionlist+a@simulator.amazonses.com", "Email Bounced", "OnAccountSuppressionList"),
        ("complaint@simulator.amazonses.com", "Email Complaint Received", None),
    ],
)
def test_the_mailbox_simulator_bounces_suppresses_and_complains(
    sesv2, events_queue, address, detail_type, subtype
):
    send(sesv2, address)

    sent, outcome = published(events_queue)
    assert sent["detail-type"] == "Email Sent"
    assert outcome["detail-type"] == detail_type
    if subtype:
        assert outcome["detail"]["bounce"]["bounceType"] == "Permanent"
        assert outcome["detail"]["bounce"]["bounceSubType"] == subtype
        assert outcome["detail"]["bounce"]["bouncedRecipients"][0]["emailAddress"] == address
    else:
        assert outcome["detail"]["complaint"]["complainedRecipients"] == [{"emailAddress": address}]


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"FromEmailAddress": "someone@elsewhere.example"}, "MessageRejected"),
        ({"ConfigurationSetName": "not-there"}, "NotFoundException"),
        (
            {"Content": {"Template": {"TemplateName": "none", "TemplateData": "{}"}}},
            "NotFoundException",
        ),
    ],
)
def test_a_send_ses_would_refuse_is_refused_and_nothing_is_sent(sesv2, overrides, code):
    with pytest.raises(ClientError) as refused:
        send(sesv2, "ann@example.org", **overrides)

    assert refused.value.response["Error"]["Code"] == code
    assert ses.inbox() == []


def test_a_send_is_answered_as_accepted_though_its_events_cannot_be_published(
    sesv2, events_queue, monkeypatch, caplog
):
    """SES's answer to SendEmail does not wait on its event publishing: a 500 for a message the
    inbox holds would tell the sender it may resend an e-mail the customer has."""

    def unavailable(*args):
        raise RuntimeError("the bus is unavailable")

    monkeypatch.setattr(ses, "_publish", unavailable)

    message_id = send(sesv2, "ann@example.org")["MessageId"]

    assert [kept["message_id"] for kept in ses.inbox()] == [message_id]
    assert f"the sending events of message {message_id} were not published" in caplog.text
    assert published(events_queue) == []
