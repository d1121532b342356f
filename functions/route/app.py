"""RouteFunction: Amazon Connect contact flow -> the caller's last agent, as a flat map of strings.

It runs inside a live call, so cold start and latency matter: only boto3 and the Powertools
Logger are imported, the raw event is read directly (any JSON: a malformed one is answered
not-found, never an error), and DynamoDB calls are bounded.
"""

import os

import boto3
from aws_lambda_powertools import Logger
from botocore.config import Config
from shared import formats
from shared.aws import table

logger = Logger()
# Connect waits at most 8 s for the function; a slow read must fail fast so the flow can route
# the caller by its error branch instead of holding the line.
dynamodb = boto3.client(
    "dynamodb",
    config=Config(
        connect_timeout=1, read_timeout=1, retries={"mode": "standard", "max_attempts": 3}
    ),
)
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]
NOT_FOUND = {"found": "false"}


def field(value: object, name: str) -> object:
    """``value[name]`` of a JSON object, None for anything else: a malformed event (a list,
    ``Details: "x"``) has no caller, so the flow gets not-found rather than an error."""
    return value.get(name) if isinstance(value, dict) else None


@logger.inject_lambda_context
def lambda_handler(event: object, context) -> dict[str, str]:
    contact_data = field(field(event, "Details"), "ContactData")
    contact_id = field(contact_data, "ContactId")
    # The live contact's id, not personal data: it ties this log line to the call. Set on every
    # invocation (a warm logger keeps the last one), and only to an id: a hostile event puts
    # nothing else into the log.
    is_id = isinstance(contact_id, str) and formats.CONTACT_ID.fullmatch(contact_id)
    logger.append_keys(connect_contact_id=contact_id if is_id else None)
    caller = field(field(contact_data, "CustomerEndpoint"), "Address")
    # Callers are stored as the input contract's E.164: anything else has no last agent.
    if not isinstance(caller, str) or not formats.E164.fullmatch(caller):
        logger.warning("caller is missing or not E.164: no last agent")
        return NOT_FOUND
    last_agent = table.get_last_agent(dynamodb, CONTACTS_TABLE_NAME, caller)
    if last_agent is None:
        logger.info("no last agent for caller")
        return NOT_FOUND
    logger.info("last agent found", contact_id=last_agent["contact_id"])
    return {"found": "true", **last_agent}
