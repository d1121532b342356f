"""The input contract of a contact (DESIGN.md, Input contract) and its CONTACT item. Pure.

A row is validated as a whole: every broken rule is reported, so one report fixes a row. Reasons
name the field and the rule, never the value (values may be phone numbers or emails).

Whatever a row holds, a valid Contact is storable: text is bounded and valid Unicode (no lone
surrogates, which JSON escapes and undecodable bytes produce), numbers fit DynamoDB's 38 digits,
and timestamps lie between 2000-01-01 and one day after the ingest, so every sort key built from
them is fixed-width ISO-8601 UTC and string order is time order.
"""

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import files, keys, rules
from shared.formats import CONTACT_ID, E164, MAX_EMAIL_LENGTH, is_email

# Amazon Connect's ContactId (and a user's id): a UUID, printed in either letter case.
UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
# Connect's user ids (UUIDs) and user names ([a-zA-Z0-9_.@-]): what RouteFunction hands the flow.
AGENT_ID = re.compile(r"[A-Za-z0-9._@-]{1,64}")
MAX_QUEUE_LENGTH = 128
# Unicode categories a queue name may not hold: controls (C0, DEL, C1), format characters (bidi
# overrides, zero widths), surrogates, private use, unassigned, line and paragraph separators.
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
CSV_INTEGER = re.compile(r"[0-9]+")
CSV_BOOLEANS = {"true": True, "false": False}
# Bounds that keep any valid row storable, so one row can never fail a whole batch write
# (DynamoDB numbers have at most 38 digits; items at most 400 KB).
MAX_WAIT_DIGITS = 38
MAX_TEXT_LENGTH = 256
# Contacts are recent: an earlier date is a broken export, and a date far ahead would pin a
# caller's last agent until it passes. A day ahead allows for clocks and time zones.
EARLIEST_TIMESTAMP = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=1)
# Kept this long after the contact ended, then DynamoDB's TTL deletes the CONTACT item and its
# CONTACT_REF (expires_at, epoch seconds): docs/template.md "Retention".
CONTACT_RETENTION = timedelta(days=400)
# Contacts that ended longer ago than this are refused: the day short of the retention covers a
# correction that moves the end (and with it the expiry) earlier. Connect re-delivers a record
# for up to 24 months; docs/design.md says what "once" holds past this.
REMEMBERED = CONTACT_RETENTION - timedelta(days=1)


@dataclass(frozen=True)
class Contact:
    contact_id: str
    caller: str | None  # None: no telephone number (a chat, a task, an anonymous call)
    agent_id: str | None
    queue: str | None
    started_at: datetime
    ended_at: datetime
    disposition: str
    wait_seconds: int
    email: str | None
    survey_opt_in: bool
    # The copy's own version (Connect's LastUpdateTimestamp, a flat row's updated_at): the newer
    # copy of a contact wins, whatever order, file or upload carried the copies.
    updated_at: datetime
    # The customer interaction the contact is a leg of (Connect's InitialContactId; the contact
    # itself when it is the first leg): surveys and gift cards are per interaction.
    interaction_id: str
    channel: str = rules.VOICE
    agent_name: str | None = None  # Connect's Agent.Username, for people to read
    initiation_method: str | None = None

    def to_item(self, goodwill_wait_seconds: int) -> dict[str, Any]:
        """The CONTACT item as Python values (the store serializes them: int -> N, bool -> BOOL);
        absent optional fields are left out, so stream filters can test their existence. A
        contact without a telephone number lives in its own partition: it has no caller."""
        ended_at = keys.utc_timestamp(self.ended_at)
        item: dict[str, Any] = {
            "pk": keys.contact_pk(self.caller, self.contact_id),
            "sk": keys.contact_sk(ended_at, self.contact_id),
            "type": keys.CONTACT,
            "contact_id": self.contact_id,
            "interaction_id": self.interaction_id,
            "channel": self.channel,
            "started_at": keys.utc_timestamp(self.started_at),
            "ended_at": ended_at,
            "updated_at": keys.utc_timestamp(self.updated_at),
            "disposition": self.disposition,
            "wait_seconds": self.wait_seconds,
            "survey_opt_in": self.survey_opt_in,
            "long_wait": rules.long_wait(self.wait_seconds, goodwill_wait_seconds),
            "expires_at": int((self.ended_at + CONTACT_RETENTION).timestamp()),
        }
        for name in ("caller", "agent_id", "agent_name", "queue", "email", "initiation_method"):
            value = getattr(self, name)
            if value is not None:
                item[name] = value
        return item


# The flat format's fields in the contract's order: a CSV export's header.
INPUT_FIELDS = (
    "contact_id",
    "caller",
    "agent_id",
    "queue",
    "started_at",
    "ended_at",
    "updated_at",
    "disposition",
    "wait_seconds",
    "email",
    "survey_opt_in",
)
# The flat format's fields every row must have (parse_contact requires each): a CSV export whose
# header lacks one is a rejected file, not a file of rejected rows.
REQUIRED_INPUT_FIELDS = (
    "contact_id",
    "caller",
    "started_at",
    "ended_at",
    "updated_at",
    "disposition",
    "wait_seconds",
)


@dataclass(frozen=True)
class SurveyAttributes:
    """The names of the user-defined contact attributes a Connect flow sets for the survey
    (template parameters SurveyOptInAttribute and SurveyEmailAttribute)."""

    opt_in: str = "survey_opt_in"
    email: str = "email"


def parse_contact(
    fields: Mapping[str, Any],
    *,
    text_values: bool,
    ingested_at: datetime,
    survey_attributes: SurveyAttributes = SurveyAttributes(),
) -> Contact | list[str]:
    """A valid Contact, or the reasons the record breaks the input contract: an Amazon Connect
    contact record (it has a `ContactId`; parse_contact_record) or a row of the flat format.

    `text_values` is true for CSV rows, whose values are all strings: "12" is an integer there,
    "true"/"false" (any case) a boolean. In JSON only real integers and booleans count.
    Unknown fields are ignored; an empty string counts as absent. `ingested_at` bounds the
    timestamps from above, and from below the table's memory (REMEMBERED).
    """
    if not text_values and CONNECT_CONTACT_ID in fields:
        return parse_contact_record(
            fields, ingested_at=ingested_at, survey_attributes=survey_attributes
        )
    reasons: list[str] = []

    def text(name: str, *, required: bool) -> str | None:
        return _text(name, fields.get(name), reasons, required=required)

    contact_id = text("contact_id", required=True)
    caller = text("caller", required=True)
    disposition = text("disposition", required=True)
    if disposition is not None and disposition not in rules.DISPOSITIONS:
        reasons.append(f"disposition: not one of {', '.join(rules.DISPOSITIONS)}")
    agent_id = text("agent_id", required=disposition not in rules.WITHOUT_AGENT)
    queue = text("queue", required=False)
    started_at, ended_at, updated_at = _times(
        fields, ("started_at", "ended_at", "updated_at"), ingested_at, reasons
    )
    wait_seconds = _wait_seconds(fields.get("wait_seconds"), text_values, reasons)
    email = text("email", required=False)
    survey_opt_in = _survey_opt_in(fields.get("survey_opt_in"), text_values, reasons)

    if reasons:
        return reasons
    contact_id = canonical_id(contact_id)
    return Contact(
        contact_id=contact_id,
        caller=caller,
        agent_id=canonical_id(agent_id) if agent_id is not None else None,
        queue=queue,
        started_at=started_at,
        ended_at=ended_at,
        disposition=disposition,
        wait_seconds=wait_seconds,
        email=email,
        survey_opt_in=survey_opt_in,
        updated_at=updated_at,
        interaction_id=contact_id,
    )


# --- Amazon Connect's contact records (AWSContactTraceRecordFormatVersion 2017-03-10) ---------

CONNECT_CONTACT_ID = files.CONNECT_RECORD_KEY  # what makes a record a contact record
# .../instance/<instance id>/agent/<user id>: the user id is what RouteFunction hands the flow.
AGENT_ARN = re.compile(r"arn:[a-z-]+:connect:[a-z0-9-]+:[0-9]{12}:instance/[^/]+/agent/([^/]+)")
TELEPHONE_NUMBER = "TELEPHONE_NUMBER"
# A leg transferred on names its next leg; one transferred out of Connect, where it went.
TRANSFERRED_ON = ("NextContactId", "TransferCompletedTimestamp", "TransferredToEndpoint")
# Connect's Queue.Duration is seconds, an integer or a decimal.
MAX_QUEUE_SECONDS = 10**9


def parse_contact_record(
    record: Mapping[str, Any], *, ingested_at: datetime, survey_attributes: SurveyAttributes
) -> Contact | list[str]:
    """A Contact from one of Connect's contact records, or the reasons it cannot be one (named
    by Connect's field names). The mapping is docs/design.md's "Contact records":

    - caller: CustomerEndpoint.Address when its Type is TELEPHONE_NUMBER and it is E.164 (else
      none: the contact is stored, never a caller's last agent);
    - agent: the user id in Agent.ARN, Agent.Username kept for people to read;
    - disposition: TRANSFERRED when the leg was transferred on (NextContactId,
      TransferCompletedTimestamp or TransferredToEndpoint), else RESOLVED when an agent took it,
      else ABANDONED when it was queued, else SELF_SERVICE;
    - wait: Queue.Duration; survey opt-in and e-mail: the user-defined attributes named by
      `survey_attributes` (an attribute that is not "true", or not an address, is none: a
      contact is never lost to an attribute).
    Unknown fields are ignored: Connect adds fields without notice.
    """
    reasons: list[str] = []

    def text(name: str, value: Any, *, required: bool = False) -> str | None:
        return _text(name, value, reasons, required=required)

    contact_id = text("ContactId", record.get("ContactId"), required=True)
    if contact_id is not None and not CONTACT_ID.fullmatch(contact_id):
        reasons.append("ContactId: 1-64 characters of A-Z, a-z, 0-9, _ and -")
        contact_id = None
    # Connect leaves InitialContactId null on an interaction's first leg.
    initial = record.get("InitialContactId")
    interaction_id = initial if isinstance(initial, str) and CONTACT_ID.fullmatch(initial) else None
    channel = text("Channel", record.get("Channel"), required=True)
    method = record.get("InitiationMethod")
    started_at, ended_at, updated_at = _times(
        record,
        ("InitiationTimestamp", "DisconnectTimestamp", "LastUpdateTimestamp"),
        ingested_at,
        reasons,
    )
    agent = _object("Agent", record.get("Agent"), reasons)
    agent_id, agent_name = _record_agent(agent, reasons) if agent is not None else (None, None)
    queue = _object("Queue", record.get("Queue"), reasons)
    queue_name, wait_seconds = _record_queue(queue, reasons) if queue is not None else (None, 0)
    caller = _record_caller(_object("CustomerEndpoint", record.get("CustomerEndpoint"), reasons))
    attributes = _object("Attributes", record.get("Attributes"), reasons) or {}
    email = attributes.get(survey_attributes.email)
    opt_in = attributes.get(survey_attributes.opt_in)

    if reasons:
        return reasons
    contact_id = canonical_id(contact_id)
    return Contact(
        contact_id=contact_id,
        caller=caller,
        agent_id=agent_id,
        queue=queue_name,
        started_at=started_at,
        ended_at=ended_at,
        disposition=_record_disposition(record, agent, queue),
        wait_seconds=wait_seconds,
        email=email if isinstance(email, str) and FIELD_RULES["email"].holds(email) else None,
        survey_opt_in=isinstance(opt_in, str) and opt_in.strip().lower() == "true",
        updated_at=updated_at,
        interaction_id=canonical_id(interaction_id) if interaction_id else contact_id,
        channel=channel,
        agent_name=agent_name,
        initiation_method=method if isinstance(method, str) and len(method) <= 64 else None,
    )


def _record_agent(agent: Mapping[str, Any], reasons: list[str]) -> tuple[str | None, str | None]:
    """The user id in Agent.ARN (what RouteFunction hands the flow) and Agent.Username."""
    arn = AGENT_ARN.fullmatch(agent["ARN"]) if isinstance(agent.get("ARN"), str) else None
    if arn is None or not AGENT_ID.fullmatch(arn.group(1)):
        reasons.append("Agent.ARN: not an agent's ARN")
        agent_id = None
    else:
        agent_id = canonical_id(arn.group(1))
    return agent_id, _text("Agent.Username", agent.get("Username"), reasons, required=False)


def _record_queue(queue: Mapping[str, Any], reasons: list[str]) -> tuple[str | None, int]:
    name = _text("Queue.Name", queue.get("Name"), reasons, required=False, rule="queue")
    return name, _queue_seconds(queue.get("Duration"), reasons)


def _record_caller(endpoint: Mapping[str, Any] | None) -> str | None:
    """The caller's number: a telephone endpoint's E.164 address; any other endpoint (a chat's,
    an anonymous caller's) has none, and the contact is kept without one."""
    if endpoint is None or endpoint.get("Type") != TELEPHONE_NUMBER:
        return None
    address = endpoint.get("Address")
    return address if isinstance(address, str) and E164.fullmatch(address) else None


def _record_disposition(
    record: Mapping[str, Any], agent: Mapping | None, queue: Mapping | None
) -> str:
    """Transferred on (to another leg, or out of Connect), handled by an agent, abandoned in its
    queue, or served by the flow alone. A leg queued and transferred on (a queue transfer, a
    callback's request) is not abandoned: the interaction goes on."""
    if any(record.get(name) for name in TRANSFERRED_ON):
        return rules.TRANSFERRED
    if agent is not None:
        return rules.RESOLVED
    return rules.ABANDONED if queue is not None else rules.SELF_SERVICE


def _object(name: str, value: Any, reasons: list[str]) -> Mapping[str, Any] | None:
    """A nested object of a contact record: absent (None) or a JSON object."""
    if value is None or isinstance(value, dict):
        return value
    reasons.append(f"{name}: not an object")
    return None


def _queue_seconds(value: Any, reasons: list[str]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        reasons.append("Queue.Duration: not a number of seconds >= 0")
        return 0
    if value > MAX_QUEUE_SECONDS:
        reasons.append(f"Queue.Duration: more than {MAX_QUEUE_SECONDS} seconds")
        return 0
    return int(value)


def canonical_id(value: str) -> str:
    """One contact (or agent), one id, whatever the export's spelling: a UUID in any letter case
    is its lower-case form (as Connect prints it); any other id is kept as it is, since only a
    UUID says that case carries no meaning."""
    return value.lower() if UUID.fullmatch(value) else value


def is_queue_name(value: str) -> bool:
    """1-128 visible characters (letters, marks, digits, punctuation, symbols, spaces in any
    script), no space at either end: nothing that moves a terminal's cursor or hides text."""
    return (
        len(value) <= MAX_QUEUE_LENGTH
        and value == value.strip()
        and all(unicodedata.category(c) not in _INVISIBLE for c in value)
    )


@dataclass(frozen=True)
class TextRule:
    """What a text field must be, and how a rejected row's reason says it."""

    holds: Callable[[str], object]
    says: str


FIELD_RULES = {
    "contact_id": TextRule(CONTACT_ID.fullmatch, "1-64 characters of A-Z, a-z, 0-9, _ and -"),
    "caller": TextRule(E164.fullmatch, "not an E.164 number (+ and 7-15 digits)"),
    "agent_id": TextRule(AGENT_ID.fullmatch, "1-64 characters of A-Z, a-z, 0-9, ., _, @ and -"),
    "queue": TextRule(
        is_queue_name,
        f"1-{MAX_QUEUE_LENGTH} visible characters (no control or format characters), "
        "no space at either end",
    ),
    "email": TextRule(
        is_email,
        f"not an email address (ASCII, local@domain.tld, at most {MAX_EMAIL_LENGTH} characters)",
    ),
}


def _text(
    name: str, value: Any, reasons: list[str], *, required: bool, rule: str | None = None
) -> str | None:
    """A text field: None when absent or empty (a reason when required), else checked against
    its rule (FIELD_RULES by `rule` or its name) or the length bound of any other text."""
    if value is None or value == "":
        if required:
            reasons.append(f"{name}: required")
        return None
    checked = FIELD_RULES.get(rule or name)
    if not isinstance(value, str):
        reasons.append(f"{name}: must be a string")
    elif not _is_unicode(value):
        reasons.append(f"{name}: not valid UTF-8 text")
    elif checked is not None and not checked.holds(value):
        reasons.append(f"{name}: {checked.says}")
    elif checked is None and len(value) > MAX_TEXT_LENGTH:
        reasons.append(f"{name}: longer than {MAX_TEXT_LENGTH} characters")
    else:
        return value
    return None


def _timestamp(
    name: str, value: str | None, ingested_at: datetime, reasons: list[str]
) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        reasons.append(f"{name}: not an ISO-8601 timestamp")
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        reasons.append(f"{name}: has no UTC offset or Z")
        return None
    # Compared before any conversion: converting year 1 or 9999 to UTC can overflow.
    if moment < EARLIEST_TIMESTAMP:
        reasons.append(f"{name}: before {EARLIEST_TIMESTAMP.date().isoformat()}")
        return None
    if moment > ingested_at + LATEST_AHEAD:
        reasons.append(f"{name}: more than a day after the ingest")
        return None
    return moment


def _times(
    fields: Mapping[str, Any],
    names: tuple[str, str, str],
    ingested_at: datetime,
    reasons: list[str],
) -> tuple[datetime | None, datetime | None, datetime | None]:
    """A contact's start, end and version, by their names in its format: each required, the end
    not before the start, and the end within what the table remembers."""
    started, ended, updated = names

    def moment(name: str) -> datetime | None:
        value = _text(name, fields.get(name), reasons, required=True)
        return _timestamp(name, value, ingested_at, reasons)

    started_at, ended_at = moment(started), moment(ended)
    if started_at and ended_at and ended_at < started_at:
        reasons.append(f"{ended}: before {started}")
    _remembered(ended, ended_at, ingested_at, reasons)
    return started_at, ended_at, moment(updated)


def _remembered(name: str, ended_at: datetime | None, ingested_at: datetime, reasons: list[str]):
    """A contact the table may have forgotten (its items expire CONTACT_RETENTION after it
    ended) cannot be stored: as a new contact it would get a second survey and gift card."""
    if ended_at is not None and ended_at < ingested_at - REMEMBERED:
        reasons.append(
            f"{name}: more than {REMEMBERED.days} days before the ingest, past what the table "
            "remembers of a contact"
        )


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _wait_seconds(value: Any, text_values: bool, reasons: list[str]) -> int | None:
    if value is None or value == "":
        reasons.append("wait_seconds: required")
        return None
    if text_values:
        is_integer = isinstance(value, str) and CSV_INTEGER.fullmatch(value) is not None
        # Leading zeros stripped before int(): Python refuses to convert over 4,300 digits.
        digits = value.lstrip("0") if is_integer else ""
        too_long = len(digits) > MAX_WAIT_DIGITS
    else:
        is_integer = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        digits = value if is_integer else 0
        too_long = is_integer and value >= 10**MAX_WAIT_DIGITS
    if not is_integer:
        reasons.append("wait_seconds: not an integer >= 0")
        return None
    if too_long:
        reasons.append(f"wait_seconds: more than {MAX_WAIT_DIGITS} digits")
        return None
    return int(digits or 0)


def _survey_opt_in(value: Any, text_values: bool, reasons: list[str]) -> bool:
    if value is None or value == "":
        return False
    if text_values and isinstance(value, str) and value.lower() in CSV_BOOLEANS:
        return CSV_BOOLEANS[value.lower()]
    if not text_values and isinstance(value, bool):
        return value
    reasons.append("survey_opt_in: not a boolean (true or false)")
    return False
