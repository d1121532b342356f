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
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from shared import keys, rules
from shared.formats import CONTACT_ID, E164

# Amazon Connect's ContactId (and a user's id): a UUID, printed in either letter case.
UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
# Connect's user ids (UUIDs) and user names ([a-zA-Z0-9_.@-]): what RouteFunction hands the flow.
AGENT_ID = re.compile(r"[A-Za-z0-9._@-]{1,64}")
# An internet address, ASCII only (the WHATWG form's rule, with a dot in the domain): no space,
# quote, CR or LF can reach a notification's subscribers.
EMAIL = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)
MAX_EMAIL_LENGTH = 254
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


@dataclass(frozen=True)
class Contact:
    contact_id: str
    caller: str
    agent_id: str | None
    queue: str | None
    started_at: datetime
    ended_at: datetime
    disposition: str
    wait_seconds: int
    email: str | None
    survey_opt_in: bool

    def to_item(self, goodwill_wait_seconds: int) -> dict[str, Any]:
        """The CONTACT item as Python values (the store serializes them: int -> N, bool -> BOOL);
        absent optional fields are left out, so stream filters can test their existence."""
        ended_at = keys.utc_timestamp(self.ended_at)
        item: dict[str, Any] = {
            "pk": keys.caller_pk(self.caller),
            "sk": keys.contact_sk(ended_at, self.contact_id),
            "type": keys.CONTACT,
            "contact_id": self.contact_id,
            "caller": self.caller,
            "started_at": keys.utc_timestamp(self.started_at),
            "ended_at": ended_at,
            "disposition": self.disposition,
            "wait_seconds": self.wait_seconds,
            "survey_opt_in": self.survey_opt_in,
            "long_wait": rules.long_wait(self.wait_seconds, goodwill_wait_seconds),
            "expires_at": int((self.ended_at + CONTACT_RETENTION).timestamp()),
        }
        for name in ("agent_id", "queue", "email"):
            value = getattr(self, name)
            if value is not None:
                item[name] = value
        return item


# The input fields in the contract's order: a CSV export's header.
INPUT_FIELDS = tuple(field.name for field in fields(Contact))


def parse_contact(
    fields: Mapping[str, Any], *, text_values: bool, ingested_at: datetime
) -> Contact | list[str]:
    """A valid Contact, or the reasons the row breaks the input contract.

    `text_values` is true for CSV rows, whose values are all strings: "12" is an integer there,
    "true"/"false" (any case) a boolean. In JSON only real integers and booleans count.
    Unknown fields are ignored; an empty string counts as absent. `ingested_at` bounds the
    timestamps from above.
    """
    reasons: list[str] = []

    def text(name: str, *, required: bool) -> str | None:
        value = fields.get(name)
        if value is None or value == "":
            if required:
                reasons.append(f"{name}: required")
            return None
        rule = FIELD_RULES.get(name)
        if not isinstance(value, str):
            reasons.append(f"{name}: must be a string")
        elif not _is_unicode(value):
            reasons.append(f"{name}: not valid UTF-8 text")
        elif rule is not None and not rule.holds(value):
            reasons.append(f"{name}: {rule.says}")
        elif rule is None and len(value) > MAX_TEXT_LENGTH:
            reasons.append(f"{name}: longer than {MAX_TEXT_LENGTH} characters")
        else:
            return value
        return None

    def timestamp(name: str) -> datetime | None:
        value = text(name, required=True)
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

    contact_id = text("contact_id", required=True)
    caller = text("caller", required=True)
    disposition = text("disposition", required=True)
    if disposition is not None and disposition not in rules.DISPOSITIONS:
        reasons.append(f"disposition: not one of {', '.join(rules.DISPOSITIONS)}")
    agent_id = text("agent_id", required=disposition != rules.ABANDONED)
    queue = text("queue", required=False)
    started_at = timestamp("started_at")
    ended_at = timestamp("ended_at")
    if started_at and ended_at and ended_at < started_at:
        reasons.append("ended_at: before started_at")
    wait_seconds = _wait_seconds(fields.get("wait_seconds"), text_values, reasons)
    email = text("email", required=False)
    survey_opt_in = _survey_opt_in(fields.get("survey_opt_in"), text_values, reasons)

    if reasons:
        return reasons
    return Contact(
        contact_id=canonical_id(contact_id),
        caller=caller,
        agent_id=canonical_id(agent_id) if agent_id is not None else None,
        queue=queue,
        started_at=started_at,
        ended_at=ended_at,
        disposition=disposition,
        wait_seconds=wait_seconds,
        email=email,
        survey_opt_in=survey_opt_in,
    )


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
        lambda value: len(value) <= MAX_EMAIL_LENGTH and EMAIL.fullmatch(value),
        f"not an email address (ASCII, local@domain.tld, at most {MAX_EMAIL_LENGTH} characters)",
    ),
}


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
