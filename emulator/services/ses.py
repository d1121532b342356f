"""moto 5.2.5's SES (API v2): SendEmail with a template, through a configuration set that publishes
its sending events to EventBridge, each accepted message kept in an inbox; and the SES resources
of CloudFormation moto lacks.

Gaps in moto (moto/sesv2/responses.py, moto/ses/models.py) and what this module does about them:

- SendEmail with ``Content.Template`` raises NotImplementedError; ``ConfigurationSetName``,
  ``EmailTags`` and ``FromEmailAddressIdentityArn`` are ignored. Here the template (created with
  AWS::SES::Template or the v1 API, which moto keeps in one store) is rendered with
  ``TemplateData`` (moto's own renderer, numbers and booleans as their text), the
  configuration set must exist (NotFoundException), the sender must be a verified identity
  (MessageRejected), and the message is kept in the inbox (``inbox()``, GET /_emulator/inbox)
  as SES would deliver it: from, to, subject, text and HTML bodies, configuration set, tags.
- Event publishing does not exist. Here a configuration set's enabled EventBridge destinations
  receive SES's sending events for each message, as SES documents them (event publishing's
  ``eventType``/``mail``/``send``... document as the EventBridge event's ``detail``, detail-type
  "Email Sent", "Email Delivered", "Email Bounced", "Email Complaint Received", source
  ``aws.ses``, on the default bus; ``mail.tags`` holds the message's tags and SES's own
  ``ses:configuration-set``, ``ses:from-domain``, ``ses:source-ip``, ``ses:caller-identity``).
  Send first, then the recipient's outcome, by the mailbox simulator's addresses
  (``bounce@``, ``complaint@``, ``suppressionlist@simulator.amazonses.com``, each with an optional
  ``+label``: a permanent bounce, a delivery and a complaint, a bounce
  ``OnAccountSuppressionList``); any other address is delivered. The
  events are put before SendEmail answers (on AWS they follow within seconds: docs/design.md);
  a failure to put them is logged, never the send's answer (a 500 for a message SES kept).
- CloudFormation has no AWS::SES::* resources in moto. Here AWS::SES::ConfigurationSet,
  AWS::SES::ConfigurationSetEventDestination (EventBridge destinations only: any other is
  refused, not silently dropped), AWS::SES::Template and AWS::SES::EmailIdentity (verified at
  once: moto's identities are).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from email.utils import parseaddr
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.events.models import events_backends
from moto.ses.models import ses_backends
from moto.ses.template import parse_template
from moto.sesv2.models import sesv2_backends
from moto.sesv2.responses import SESV2Response

from emulator.core.arns import parse_arn
from emulator.services import patching
from emulator.services.cloudformation import StackResource

log = logging.getLogger("emulator.ses")

SIMULATOR_DOMAIN = "simulator.amazonses.com"
DETAIL_TYPES = {
    "Send": "Email Sent",
    "Delivery": "Email Delivered",
    "Bounce": "Email Bounced",
    "Complaint": "Email Complaint Received",
}

# (account, region, configuration set) -> {destination name: its EventDestination}
_destinations: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
_inbox: list[dict[str, Any]] = []
_lock = threading.Lock()


def install() -> None:
    patching.replace(SESV2Response, "send_email", _send_email)


def inbox() -> list[dict[str, Any]]:
    """Every message SES accepted since the start (or the last reset), oldest first."""
    with _lock:
        return [dict(message) for message in _inbox]


def reset() -> int:
    """Empty the inbox; how many messages went."""
    with _lock:
        count = len(_inbox)
        _inbox.clear()
        return count


def _error(code: str, message: str, status: int = 400) -> JsonRESTError:
    error = JsonRESTError(code, message)
    error.code = status
    return error


def _now() -> str:
    moment = dt.datetime.now(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _send_email(self: SESV2Response) -> str:
    params = json.loads(self.body)
    account, region = self.current_account, self.region
    core = ses_backends[account][region]
    content = params.get("Content") or {}
    if "Template" not in content:  # Simple and Raw: moto's own
        return patching.original(SESV2Response, "send_email")(self)
    config_set = params.get("ConfigurationSetName")
    if config_set and config_set not in core.config_sets:
        raise _error("NotFoundException", f"Configuration set <{config_set}> does not exist.", 404)
    source = params.get("FromEmailAddress", "")
    identity_arn = params.get("FromEmailAddressIdentityArn")
    identity = parse_arn(identity_arn).resource.partition("/")[2] if identity_arn else None
    if not core._is_verified_address(source) or (
        identity is not None and identity not in core.email_identities
    ):
        raise _error("MessageRejected", f"Email address is not verified: {source}")
    template = content["Template"]
    try:
        stored = core.get_template(template.get("TemplateName", ""))
    except Exception:
        raise _error("NotFoundException", "Template does not exist.", 404) from None
    data = _rendered_values(json.loads(template.get("TemplateData") or "{}"))
    rendered = {
        part: parse_template(stored.get(f"{part}_part") or "", data)
        for part in ("subject", "text", "html")
    }
    destination = params.get("Destination") or {}
    message = core.send_email(
        source=source, destinations=destination, subject=rendered["subject"], body=rendered["text"]
    )
    recipients = [
        *destination.get("ToAddresses", []),
        *destination.get("CcAddresses", []),
        *destination.get("BccAddresses", []),
    ]
    tags = {tag["Name"]: tag["Value"] for tag in params.get("EmailTags") or []}
    sent = {
        "message_id": message.id,
        "from": source,
        "to": recipients,
        "subject": rendered["subject"],
        "text": rendered["text"],
        "html": rendered["html"],
        "configuration_set": config_set,
        "tags": tags,
        "sent_at": _now(),
    }
    with _lock:
        _inbox.append(sent)
    if config_set:
        try:
            _publish(account, region, config_set, sent, identity_arn)
        except Exception:  # SES answers a send it accepted, whatever becomes of its events
            log.exception("ses: the sending events of message %s were not published", message.id)
    return json.dumps({"MessageId": message.id})


def _rendered_values(data: Any) -> Any:
    """Template data as SES renders it: numbers and booleans as their JSON text (moto's renderer
    takes strings only)."""
    if isinstance(data, dict):
        return {name: _rendered_values(value) for name, value in data.items()}
    if isinstance(data, list):
        return [_rendered_values(value) for value in data]
    return data if isinstance(data, str) else json.dumps(data)


def _mail(
    account: str, config_set: str, sent: dict[str, Any], identity_arn: str | None
) -> dict[str, Any]:
    domain = sent["from"].rpartition("@")[2]
    return {
        "timestamp": sent["sent_at"],
        "source": sent["from"],
        "sourceArn": identity_arn or "",
        "sendingAccountId": account,
        "messageId": sent["message_id"],
        "destination": sent["to"],
        "headersTruncated": False,
        "headers": [
            {"name": "From", "value": sent["from"]},
            {"name": "To", "value": ", ".join(sent["to"])},
            {"name": "Subject", "value": sent["subject"]},
        ],
        "commonHeaders": {"from": [sent["from"]], "to": sent["to"], "subject": sent["subject"]},
        "tags": {
            "ses:configuration-set": [config_set],
            "ses:source-ip": ["127.0.0.1"],
            "ses:from-domain": [domain],
            "ses:caller-identity": ["emulator"],
            **{name: [value] for name, value in sent["tags"].items()},
        },
    }


def sending_events(
    account: str, config_set: str, sent: dict[str, Any], identity_arn: str | None = None
) -> list[dict[str, Any]]:
    """SES's sending events of one accepted message (event publishing's documents): Send, then
    each recipient's outcome."""
    mail = _mail(account, config_set, sent, identity_arn)
    at = sent["sent_at"]
    events = [{"eventType": "Send", "mail": mail, "send": {}}]
    for address in sent["to"]:
        mailbox, _, domain = parseaddr(address)[1].lower().partition("@")
        local = mailbox.partition("+")[0]  # the simulator's addresses take a +label
        feedback = f"{sent['message_id']}-{mailbox}"
        if domain == SIMULATOR_DOMAIN and local in ("bounce", "suppressionlist"):
            suppressed = local == "suppressionlist"
            events.append(
                {
                    "eventType": "Bounce",
                    "mail": mail,
                    "bounce": {
                        "bounceType": "Permanent",
                        "bounceSubType": "OnAccountSuppressionList" if suppressed else "General",
                        "bouncedRecipients": [
                            {
                                "emailAddress": address,
                                "action": "failed",
                                "status": "5.1.1",
                                "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                            }
                        ],
                        "timestamp": at,
                        "feedbackId": feedback,
                        "reportingMTA": "dns; emulator.amazonses.com",
                    },
                }
            )
            continue
        events.append(
            {
                "eventType": "Delivery",
                "mail": mail,
                "delivery": {
                    "timestamp": at,
                    "processingTimeMillis": 0,
                    "recipients": [address],
                    "smtpResponse": "250 2.6.0 Message received",
                    "reportingMTA": "emulator.amazonses.com",
                },
            }
        )
        if domain == SIMULATOR_DOMAIN and local == "complaint":
            events.append(
                {
                    "eventType": "Complaint",
                    "mail": mail,
                    "complaint": {
                        "complainedRecipients": [{"emailAddress": address}],
                        "timestamp": at,
                        "feedbackId": feedback,
                        "complaintFeedbackType": "abuse",
                    },
                }
            )
    return events


def _publish(
    account: str, region: str, config_set: str, sent: dict[str, Any], identity_arn: str | None
) -> None:
    with _lock:
        destinations = list(_destinations.get((account, region, config_set), {}).values())
    for destination in destinations:
        if not destination.get("Enabled", False):
            continue
        wanted = {t.upper() for t in destination.get("MatchingEventTypes", [])}
        bus_arn = destination["EventBridgeDestination"]["EventBusArn"]
        bus = parse_arn(bus_arn)
        entries = [
            {
                "Source": "aws.ses",
                "DetailType": DETAIL_TYPES[event["eventType"]],
                "Detail": json.dumps(event),
                "Resources": [],
                "EventBusName": bus_arn,
            }
            for event in sending_events(account, config_set, sent, identity_arn)
            if event["eventType"].upper() in wanted
        ]
        if entries:
            events_backends[bus.account][bus.region].put_events(entries)


# --- CloudFormation ------------------------------------------------------------------------------
class _NamedResource(StackResource):
    """An SES resource of an account and Region known by its name (its physical id)."""

    def __init__(self, name: str, account_id: str, region_name: str) -> None:
        self.name = name
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.name


class ConfigurationSetModel(_NamedResource):
    TYPE = "AWS::SES::ConfigurationSet"
    NAME_PROPERTY = "Name"

    @classmethod
    def create(cls, properties, account_id, region_name, physical_name, logical_id):
        name = properties.get("Name") or physical_name[:64]
        sesv2_backends[account_id][region_name].create_configuration_set(
            configuration_set_name=name,
            tracking_options=properties.get("TrackingOptions") or {},
            delivery_options=properties.get("DeliveryOptions") or {},
            reputation_options=properties.get("ReputationOptions") or {},
            sending_options=properties.get("SendingOptions") or {},
            tags=properties.get("Tags") or [],
            suppression_options=properties.get("SuppressionOptions") or {},
            vdm_options=properties.get("VdmOptions") or {},
        )
        return cls(name, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        ses_backends[self.account_id][self.region_name].config_sets.pop(self.name, None)
        with _lock:
            _destinations.pop((self.account_id, self.region_name, self.name), None)


class EventDestinationModel(StackResource):
    TYPE = "AWS::SES::ConfigurationSetEventDestination"

    def __init__(self, key: tuple[str, str, str], name: str) -> None:
        self.key = key
        self.name = name

    @property
    def physical_resource_id(self) -> str:
        return self.name

    @classmethod
    def create(cls, properties, account_id, region_name, physical_name, logical_id):
        destination = dict(properties["EventDestination"])
        others = [
            name
            for name in ("CloudWatchDestination", "KinesisFirehoseDestination", "SnsDestination")
            if name in destination
        ]
        if others or "EventBridgeDestination" not in destination:
            raise _error(
                "ValidationError",
                f"{logical_id}: only EventBridgeDestination is emulated by the local stack",
            )
        set_name = properties["ConfigurationSetName"]
        if set_name not in ses_backends[account_id][region_name].config_sets:
            raise _error("NotFoundException", f"Configuration set <{set_name}> does not exist.")
        name = destination.get("Name") or physical_name[:64]
        key = (account_id, region_name, set_name)
        with _lock:
            _destinations.setdefault(key, {})[name] = destination
        return cls(key, name)

    def delete(self, account_id: str, region_name: str) -> None:
        with _lock:
            _destinations.get(self.key, {}).pop(self.name, None)


class TemplateModel(_NamedResource):
    TYPE = "AWS::SES::Template"

    @classmethod
    def create(cls, properties, account_id, region_name, physical_name, logical_id):
        template = properties["Template"]
        name = template.get("TemplateName") or physical_name[:64]
        ses_backends[account_id][region_name].add_template(
            {
                "template_name": name,
                "subject_part": template.get("SubjectPart", ""),
                "text_part": template.get("TextPart", ""),
                "html_part": template.get("HtmlPart", ""),
            }
        )
        return cls(name, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        ses_backends[self.account_id][self.region_name].templates.pop(self.name, None)


class EmailIdentityModel(_NamedResource):
    TYPE = "AWS::SES::EmailIdentity"

    @classmethod
    def create(cls, properties, account_id, region_name, physical_name, logical_id):
        identity = properties["EmailIdentity"]
        set_name = (properties.get("ConfigurationSetAttributes") or {}).get("ConfigurationSetName")
        sesv2_backends[account_id][region_name].create_email_identity(
            email_identity=identity,
            tags=properties.get("Tags"),
            dkim_signing_attributes=properties.get("DkimSigningAttributes"),
            configuration_set_name=set_name,
        )
        return cls(identity, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        ses_backends[self.account_id][self.region_name].email_identities.pop(self.name, None)


MODELS = (ConfigurationSetModel, EventDestinationModel, TemplateModel, EmailIdentityModel)
