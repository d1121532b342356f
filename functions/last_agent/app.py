"""LastAgentFunction: ContactsTable changes -> the caller's LAST_AGENT item: the newest of the
caller's current contacts that reached an agent. The changes arrive from the table's stream or, in
fan-out modes pipe and router (template parameter FanOut), from LastAgentQueue as the same stream
records (shared.batches.table_changes), in any order, late or repeated.

No idempotency store: a change's images only say which items to look at; every write checks, in
its transaction, that the CONTACT items it relies on are still current, so a late delivery of an
export a correction has replaced changes nothing, and any order converges.
"""

import os
from collections import Counter
from datetime import UTC, datetime

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from shared import contacts, rules
from shared.aws import table
from shared.batches.table_changes import TableChanges

logger = Logger()
metrics = Metrics()
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]

_METRICS = {
    table.LAST_AGENT_UPDATED: "LastAgentUpdated",
    table.LAST_AGENT_STALE: "LastAgentStale",
    table.LAST_AGENT_OUTDATED: "LastAgentStale",
    table.LAST_AGENT_REPLACED: "LastAgentCorrected",
    table.LAST_AGENT_REMOVED: "LastAgentCorrected",
}


def record_handler(record: DynamoDBRecord) -> None:
    new, old = contacts.new_contact(record), contacts.old_contact(record)
    changed_at = record.dynamodb.approximate_creation_date_time  # the change's, epoch seconds
    if new is not None and not rules.sets_last_agent(new):
        new = None
    if old is not None and rules.sets_last_agent(old) and not rules.same_version(old, new):
        outcome = table.replace_last_agent(dynamodb, CONTACTS_TABLE_NAME, old)
        # Gone: no CONTACT item holds this contact, at this time, with this agent any more.
        gone = new is None or _named(new) != _named(old)
        transition = "contact_gone" if gone else None
        count(outcome, old, "corrected", transition=transition, changed_at=changed_at)
    if new is not None:
        checked_at = datetime.now(UTC)  # before the transaction that checks the item
        outcome = table.update_last_agent(dynamodb, CONTACTS_TABLE_NAME, new)
        if outcome == table.LAST_AGENT_UPDATED:
            set_at = {"checked_at": checked_at, "changed_at": changed_at}
            count(outcome, new, "new", transition="last_agent_set", **set_at)
        else:
            count(outcome, new, "new")


def _named(contact: dict) -> tuple:
    """What a LAST_AGENT item names of a contact, and checks its CONTACT item for."""
    return contact["contact_id"], contact["ended_at"], contact["agent_id"]


def count(
    outcome: str,
    contact: dict,
    side: str,
    *,
    transition: str | None = None,
    checked_at: datetime | None = None,
    changed_at: int | None = None,
) -> None:
    """The record's line: at INFO the transitions harness.trace checks (a LAST_AGENT write, a
    contact gone), with what they name; other outcomes only at DEBUG (an INFO line for every
    record was 17% of a worker: docs/performance.md)."""
    outcomes[outcome] += 1
    if outcome in _METRICS:
        metrics.add_metric(name=_METRICS[outcome], unit=MetricUnit.Count, value=1)
    fields = {"change": side, "outcome": outcome}
    fields.update(zip(("contact_id", "ended_at", "agent_id"), _named(contact), strict=True))
    if transition is not None:
        fields.update(transition=transition, changed_at=changed_at)
    if checked_at is not None:
        fields["checked_at"] = checked_at.isoformat(timespec="milliseconds")
    (logger.info if transition else logger.debug)("last agent checked", **fields)


changes = TableChanges(record_handler)
outcomes: Counter[str] = Counter()  # this invocation's, for its one INFO line


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    outcomes.clear()
    try:
        return changes.process(event, context)
    finally:
        logger.info("last agents checked", **outcomes)
