"""The one Powertools idempotency configuration of the application.

Records live in IdempotencyTable (partition key `id`, TTL on `expiration`, the Powertools
defaults). Each handler builds its persistence layer and config once at module level. The
ingest registers the Lambda context per call, so an in-progress record left by a crashed or
timed-out invocation expires with that invocation and a retry can run (a file step's writes are
versioned: running it again is harmless). A notification's claim never expires that way: a
publish cannot be taken back (REPUBLISH_WINDOW_SECONDS).
"""

import os
from dataclasses import dataclass

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    IdempotentHookFunction,
)

# A file step is claimed for as long as S3 may redeliver its event (days, not hours); past that,
# the file's processing log still answers a redelivery without work.
ONCE_PER_FILE_SECONDS = 14 * 24 * 3600
# "Once per contact, ever": a notification id is remembered longer than any realistic re-export
# of a contact (a gift card's own conditional write guards it beyond that); docs/design.md.
ONCE_PER_NOTIFICATION_SECONDS = 400 * 24 * 3600


@dataclass(frozen=True)
class Claims:
    """One function's idempotency records: the prefix of their keys (fixed: the default embeds
    the function name and the module path, so a redeploy or a moved module would make every claim
    new), the JMESPath of the key within the decorated function's data, and how long they last.
    The operator's CLI (ops idempotency) computes the same keys from these."""

    key_prefix: str
    key_jmespath: str
    expires_after_seconds: int

    def config(self, response_hook: IdempotentHookFunction | None = None) -> IdempotencyConfig:
        return idempotency_config(self.key_jmespath, self.expires_after_seconds, response_hook)


# IngestFunction: one claim per file step (the file from its start, or resumed after a line) of
# one run (null: the run its S3 event started; 1, 2, ...: `ops file reprocess`), so a step of an
# earlier run can never answer for the same step of a later one.
FILE_STEPS = Claims("ingest-file", "[s3_object.file_id, run, after_line]", ONCE_PER_FILE_SECONDS)
# NotifierFunction: one claim per notification.
NOTIFICATIONS = Claims("NotifierFunction", "notification_id", ONCE_PER_NOTIFICATION_SECONDS)
# MailSenderFunction: one claim per notification, on the same id, its own prefix (one e-mail per
# notification whatever the notifier did).
MAIL = Claims("MailSenderFunction", "notification_id", ONCE_PER_NOTIFICATION_SECONDS)
# SES publishes a Send event for every message it accepts; MailEventsFunction records it (MAIL_SENT)
# within seconds (docs/design.md: measured), or, failing 5 times (5 x 60 s), holds it back in
# MailEventsDeadLetterQueue. A mail sender that finds a notification claimed and unrecorded sends
# it again only once this long has passed since the claim without that record and with nothing held
# back: had SES accepted the first send, its record would be there. The default of the template
# parameter MailSendEventWaitSeconds (the local stack's is shorter: so are its timeouts).
MAIL_SEND_EVENT_WAIT_SECONDS = 360
# SNS FIFO deduplicates a MessageDeduplicationId for 5 minutes after its first publish, and a
# notification is claimed before it is published: published again within this long of its claim,
# it is deduplicated (30 s less, for the clocks of Lambda's hosts and of SNS). A claim never
# recorded and older than this may have been published: the notifier does not publish it again
# (shared.aws.batch_claims) and the operator is told (ops).
REPUBLISH_WINDOW_SECONDS = 270


def persistence_layer(dynamodb_client=None) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(
        table_name=os.environ["IDEMPOTENCY_TABLE_NAME"], boto3_client=dynamodb_client
    )


def idempotency_config(
    key_jmespath: str,
    expires_after_seconds: int,
    response_hook: IdempotentHookFunction | None = None,
) -> IdempotencyConfig:
    """A missing key is an error, never a silent pass-through without protection."""
    return IdempotencyConfig(
        event_key_jmespath=key_jmespath,
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
        response_hook=response_hook,
    )


def count_duplicates(metrics: Metrics, logger: Logger, message: str) -> IdempotentHookFunction:
    """A response hook counting DuplicatesSuppressed. Powertools runs it only when it returns a
    stored result instead of running the function again: the honest place to count them. The
    stored results hold ids and counts only, so they may be logged."""

    def duplicate_suppressed(stored_result: dict, _record) -> dict:
        metrics.add_metric(name="DuplicatesSuppressed", unit=MetricUnit.Count, value=1)
        logger.info(message, stored_result=stored_result)
        return stored_result

    return duplicate_suppressed
