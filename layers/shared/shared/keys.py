"""Single-table keys of ContactsTable and the deterministic ids built from business keys.

Every item carries `pk`, `sk` and `type`. A CONTACT item also carries every input field under its
input name (contact_id, caller, agent_id, queue, started_at, ended_at, disposition, wait_seconds,
email, survey_opt_in), timestamps normalised by `utc_timestamp`, `long_wait` (bool) so that
stream filters can select on a boolean instead of a number (filters never match DynamoDB numbers),
and `first_export` (bool): true on the first export of a contact_id stored, false once a newer
export replaced it, so that only a contact's first export can start a survey or a gift card.

| type | pk | sk | what |
|---|---|---|---|
| CONTACT | CALLER#<caller> | CONTACT#<ended_at UTC>#<contact_id> | the contact (newest export) |
| LAST_AGENT | CALLER#<caller> | LAST_AGENT | the caller's last agent |
| CONTACT_REF | CONTACT#<contact_id> | REF | export version stored, CONTACT item's key |
| GIFT_CARD | GIFT_CARD#<contact_id> | GIFT_CARD | the contact's one gift card |
| PROCESSING_LOG | FILE#<file_id> | PROCESSING_LOG | a file's outcome, counts, resume line |
| OBJECT_VERSION | OBJECT#<bucket>/<key> | NEWEST_VERSION | newest version of a key applied |
"""

from datetime import UTC, datetime

CONTACT = "CONTACT"
LAST_AGENT = "LAST_AGENT"
CONTACT_REF = "CONTACT_REF"
GIFT_CARD = "GIFT_CARD"
PROCESSING_LOG = "PROCESSING_LOG"
OBJECT_VERSION = "OBJECT_VERSION"
CONTACT_SK_PREFIX = "CONTACT#"

SURVEY = "SURVEY"
NOTIFICATION_KINDS = (SURVEY, GIFT_CARD)


def utc_timestamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601 (millisecond precision), so string order is time order."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def caller_pk(caller: str) -> str:
    return f"CALLER#{caller}"


def contact_sk(ended_at_utc: str, contact_id: str) -> str:
    return f"{CONTACT_SK_PREFIX}{ended_at_utc}#{contact_id}"


def contact_ref_key(contact_id: str) -> dict[str, str]:
    return {"pk": f"CONTACT#{contact_id}", "sk": "REF"}


def export_version(export_order: str, line: int) -> str:
    """The version of one row of one export: the file's export order (s3_events.S3Object), then
    the line, so the later of two rows of one contact in one file wins. Fixed width: string order
    is version order."""
    return f"{export_order}#{line:010d}"


def last_agent_key(caller: str) -> dict[str, str]:
    return {"pk": caller_pk(caller), "sk": LAST_AGENT}


def gift_card_key(contact_id: str) -> dict[str, str]:
    return {"pk": f"GIFT_CARD#{contact_id}", "sk": GIFT_CARD}


def processing_log_key(file_id: str) -> dict[str, str]:
    return {"pk": f"FILE#{file_id}", "sk": PROCESSING_LOG}


def object_key(bucket: str, key: str) -> dict[str, str]:
    return {"pk": f"OBJECT#{bucket}/{key}", "sk": "NEWEST_VERSION"}


def notification_id(kind: str, contact_id: str) -> str:
    """The same contact and kind always yield the same id: the Notifier's idempotency key."""
    if kind not in NOTIFICATION_KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return f"{kind}#{contact_id}"
