"""Powertools idempotency around a call that nothing absorbs if it is repeated (SES SendEmail has
no idempotency token), settled by the callee's own record of what it did.

On the same records as idempotent_function (persistence layer, config, key prefix), so `ops
idempotency` sees them. A claim is held for the record's life (as shared.aws.batch_claims holds
one): a claim found in progress was taken by an invocation that crashed or timed out, or that is
still running, before or after its call. So before calling again, the caller's evidence is asked
(``confirmed``: for SES, the Send event SES published for the notification, recorded in the
table): found, the claim is recorded COMPLETED and nothing is called; not found while the claim is
younger than ``wait_seconds``, the item fails with SendUnconfirmed (its message comes back after
the queue's visibility timeout and asks again); not found after that, the call never happened
(had it, its evidence would be there) and the item is called again under the same claim. Unless
some evidence is held back where ``confirmed`` cannot see it (``evidence_held``: for SES, Send
events its recorder gave up on, in their dead-letter queue): then the item stays in doubt until
that evidence is recorded, since it may be this item's. ``wait_seconds`` must therefore cover the
time the evidence takes to be recorded or held back (docs/design.md).

Calling again retakes the claim first: its time becomes now, in one conditional write on the
claim time it found, so the wait starts again for this call's evidence (a retry that dies right
after its call leaves a claim the next delivery waits on, not one it calls again at once), and of
two deliveries past the wait at once only one calls.
"""

import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

from shared.aws.batch_claims import claim_time


class Claim(Enum):
    NEW = "claimed now: call"
    RETRIED = "claimed before, no evidence of the call past the wait: call again"
    DONE = "completed before: do nothing"
    CONFIRMED = "claimed before, the callee's evidence found: recorded completed now"


class SendUnconfirmed(Exception):
    """Claimed at `claimed_at` (epoch seconds), not recorded, and no evidence of the call yet:
    retried later (`until`: when it may be called again)."""

    def __init__(self, key: str, claimed_at: float, until: str):
        super().__init__(
            f"claimed at {datetime.fromtimestamp(claimed_at, UTC).isoformat(timespec='seconds')} "
            f"and not recorded; no evidence of the call yet: asked again until {until} ({key})"
        )
        self.claimed_at = claimed_at


class SendClaims:
    """Build once per execution environment."""

    def __init__(
        self,
        persistence: DynamoDBPersistenceLayer,
        config: IdempotencyConfig,
        *,
        key_prefix: str,
        confirmed: Callable[[dict], bool],
        evidence_held: Callable[[], bool],
        wait_seconds: float,
    ):
        persistence.configure(config=config, key_prefix=key_prefix)
        self._store = persistence
        self._life = config.expires_after_seconds
        self._confirmed = confirmed
        self._evidence_held = evidence_held
        self._wait = wait_seconds

    def claim(self, item: dict, result: dict) -> Claim:
        """Claim the item (``result``: what its record stores if the evidence settles it)."""
        try:
            self._store.save_inprogress(data=item, remaining_time_in_millis=self._life * 1000)
        except IdempotencyItemAlreadyExistsError as exists:
            record = exists.old_data_record or self._store.get_record(data=item)
            if record.status == STATUS_CONSTANTS["COMPLETED"]:
                return Claim.DONE
            if self._confirmed(item):
                self._store.save_success(data=item, result=result)
                return Claim.CONFIRMED
            claimed_at = claim_time(record, self._life)
            key = record.idempotency_key
            if time.time() - claimed_at < self._wait:
                until = f"{self._wait:.0f} s after the claim"
                raise SendUnconfirmed(key, claimed_at, until) from None
            if self._evidence_held():
                until = "the evidence in the dead-letter queue is recorded"
                raise SendUnconfirmed(key, claimed_at, until) from None
            if not self._retake(record):
                until = f"{self._wait:.0f} s after another delivery's retry"
                raise SendUnconfirmed(key, claimed_at, until) from None
            return Claim.RETRIED
        return Claim.NEW

    def _retake(self, record: DataRecord) -> bool:
        """The claim in doubt, taken again now; False when another delivery retook or settled it
        since it was read (IdempotencyTable's key is the idempotency key alone: template.yaml)."""
        store, now = self._store, time.time()
        try:
            store.client.update_item(
                TableName=store.table_name,
                Key={store.key_attr: {"S": record.idempotency_key}},
                # both expiries, as save_inprogress sets them for a claim held its whole life
                UpdateExpression="SET #expiry = :expiry, #in_progress_expiry = :in_progress_expiry",
                ConditionExpression="#status = :in_progress AND #expiry = :found",
                ExpressionAttributeNames={
                    "#expiry": store.expiry_attr,
                    "#in_progress_expiry": store.in_progress_expiry_attr,
                    "#status": store.status_attr,
                },
                ExpressionAttributeValues={
                    ":expiry": {"N": str(int(now) + self._life)},
                    ":in_progress_expiry": {"N": str(int((now + self._life) * 1000))},
                    ":found": {"N": str(record.expiry_timestamp)},
                    ":in_progress": {"S": STATUS_CONSTANTS["INPROGRESS"]},
                },
            )
        except store.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def done(self, item: dict, result: dict) -> None:
        self._store.save_success(data=item, result=result)

    def release(self, item: dict, error: Exception) -> None:
        """The call was refused (nothing done): the next delivery claims afresh."""
        self._store.delete_record(data=item, exception=error)
