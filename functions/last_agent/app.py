"""LastAgentFunction: ContactsTable changes -> the caller's LAST_AGENT item: the newest of the
caller's contacts that reached an agent. The changes arrive from the table's stream or, in fan-out
modes pipe and router (template parameter FanOut), from LastAgentQueue as the same stream
records (shared.aws.table_changes).

No idempotency store: a new contact moves LAST_AGENT forward with one conditional write, which is
idempotent and order-independent by itself. A corrected export that replaces or removes the
contact LAST_AGENT names makes it the newest remaining one (conditional on it still naming the
corrected contact).
"""

import os

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from shared import contacts, rules
from shared.aws import table
from shared.aws.table_changes import TableChanges

logger = Logger()
metrics = Metrics()
dynamodb = boto3.client("dynamodb")
CONTACTS_TABLE_NAME = os.environ["CONTACTS_TABLE_NAME"]


def record_handler(record: DynamoDBRecord) -> None:
    new, old = contacts.new_contact(record), contacts.old_contact(record)
    if new is not None and not rules.sets_last_agent(new):
        new = None
    if old is not None and rules.sets_last_agent(old) and not rules.same_version(old, new):
        outcome = table.replace_last_agent(dynamodb, CONTACTS_TABLE_NAME, old)
        if outcome != "kept":
            metrics.add_metric(name="LastAgentCorrected", unit=MetricUnit.Count, value=1)
        logger.info("corrected contact checked", contact_id=old["contact_id"], outcome=outcome)
    if new is None:
        return
    if table.update_last_agent(dynamodb, CONTACTS_TABLE_NAME, new):
        metrics.add_metric(name="LastAgentUpdated", unit=MetricUnit.Count, value=1)
        logger.info("last agent updated", contact_id=new["contact_id"])
    else:
        metrics.add_metric(name="LastAgentStale", unit=MetricUnit.Count, value=1)
        logger.info("last agent kept: a newer contact is stored", contact_id=new["contact_id"])


changes = TableChanges(record_handler)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict, context) -> dict:
    return changes.process(event, context)
