"""Single-table keys of ContactsTable and the deterministic ids built from business keys.

Every item carries `pk`, `sk` and `type`. A CONTACT item also carries every field of the contact
(shared.model.Contact: contact_id, interaction_id, channel, caller, agent_id, agent_name, queue,
started_at, ended_at, updated_at, disposition, wait_seconds, email, survey_opt_in,
initiation_method), timestamps normalised by `utc_timestamp`, `long_wait` (bool) so that stream
filters can select on a boolean instead of a number (filters never match DynamoDB numbers), and
`first_export` (bool): true on the first copy of a contact_id stored, false once a newer copy
replaced it, so that only a contact's first copy can start a survey or a gift card.

| type | pk | sk | what |
|---|---|---|---|
| CONTACT | CALLER#<caller> (1) | CONTACT#<ended_at UTC>#<contact_id> | the contact (newest copy) |
| LAST_AGENT | LAST_AGENT#<caller> | LAST_AGENT | the caller's last agent |
| CONTACT_REF | CONTACT#<contact_id> | REF | version stored, CONTACT item's key |
| GIFT_CARD | GIFT_CARD#<interaction_id> | GIFT_CARD | the interaction's one gift card |

Every item holding a caller's number or e-mail (CONTACT, CONTACT_REF, LAST_AGENT, GIFT_CARD)
carries `expires_at`, its contact's: DynamoDB's TTL deletes it with the contact.
| PROCESSING_LOG | FILE#<file_id> | PROCESSING_LOG | a file's outcome, counts, resume line |
| OBJECT_VERSION | OBJECT#<bucket>/<key> | NEWEST_VERSION | newest version of a key applied |

(1) CONTACT#<contact_id> for a contact without a telephone number (a chat, a task).
"""

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

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


def contact_pk(caller: str | None, contact_id: str) -> str:
    """A contact's partition: its caller's, or its own when it has no telephone number."""
    return caller_pk(caller) if caller else f"CONTACT#{contact_id}"


def contact_version(item: Mapping[str, Any]) -> str:
    """The version of one copy of a contact: its `updated_at` (Connect's LastUpdateTimestamp),
    then a digest of its content, so two different copies with the same timestamp still have one
    winner whatever order they come in, and an exact duplicate is the same version. Never the
    file, key or upload that carried it: re-uploading an old copy changes nothing. Fixed width:
    string order is version order."""
    content = json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{item['updated_at']}#{digest}"


def last_agent_key(caller: str) -> dict[str, str]:
    """A partition of its own, apart from the caller's contacts: IngestFunction, which parses
    untrusted files and writes callers' contacts, can never write a caller's last agent."""
    return {"pk": f"LAST_AGENT#{caller}", "sk": LAST_AGENT}


def gift_card_key(contact_id: str) -> dict[str, str]:
    return {"pk": f"GIFT_CARD#{contact_id}", "sk": GIFT_CARD}


def processing_log_key(file_id: str) -> dict[str, str]:
    return {"pk": f"FILE#{file_id}", "sk": PROCESSING_LOG}


def object_key(bucket: str, key: str) -> dict[str, str]:
    return {"pk": f"OBJECT#{bucket}/{key}", "sk": "NEWEST_VERSION"}


def interaction_id(contact: Mapping[str, Any]) -> str:
    """The customer interaction a CONTACT item is a leg of: a transferred call is several
    contacts, one survey and one gift card (items stored before interactions were kept are
    interactions of their own)."""
    return contact.get("interaction_id") or contact["contact_id"]


def notification_id(kind: str, contact_id: str) -> str:
    """The same contact and kind always yield the same id: the Notifier's idempotency key."""
    if kind not in NOTIFICATION_KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return f"{kind}#{contact_id}"
