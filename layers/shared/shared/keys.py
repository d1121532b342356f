"""Single-table keys of ContactsTable and the deterministic ids built from business keys.

Every item carries `pk`, `sk` and `type`. A CONTACT item also carries every input field under its
input name (contact_id, caller, agent_id, queue, started_at, ended_at, disposition, wait_seconds,
email, survey_opt_in), timestamps normalised by `utc_timestamp`, and `long_wait` (bool) so that
stream filters can select on a boolean instead of a number (filters never match DynamoDB numbers).
"""

from datetime import UTC, datetime

CONTACT = "CONTACT"
LAST_AGENT = "LAST_AGENT"
GIFT_CARD = "GIFT_CARD"
PROCESSING_LOG = "PROCESSING_LOG"

SURVEY = "SURVEY"
NOTIFICATION_KINDS = (SURVEY, GIFT_CARD)


def utc_timestamp(moment: datetime) -> str:
    """Fixed-width UTC ISO-8601 (millisecond precision), so string order is time order."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def caller_pk(caller: str) -> str:
    return f"CALLER#{caller}"


def contact_sk(ended_at_utc: str, contact_id: str) -> str:
    return f"CONTACT#{ended_at_utc}#{contact_id}"


def last_agent_key(caller: str) -> dict[str, str]:
    return {"pk": caller_pk(caller), "sk": LAST_AGENT}


def gift_card_key(contact_id: str) -> dict[str, str]:
    return {"pk": f"GIFT_CARD#{contact_id}", "sk": GIFT_CARD}


def processing_log_key(file_id: str) -> dict[str, str]:
    return {"pk": f"FILE#{file_id}", "sk": PROCESSING_LOG}


def notification_id(kind: str, contact_id: str) -> str:
    """The same contact and kind always yield the same id: the Notifier's idempotency key."""
    if kind not in NOTIFICATION_KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return f"{kind}#{contact_id}"
