"""Powertools idempotency around one call for a batch of items: what idempotent_function does
around the call of one item (claim it, call, record the result, or release the claim if the call
failed), done per item around a single call for all of them (SNS PublishBatch), on the same
records: the same persistence layer, config and key prefix, so `ops idempotency` and a later
idempotent_function see the same keys.

An item another invocation completed is not called again; one repeating an earlier item's key in
the same batch shares that item's outcome. An item whose call failed is never recorded COMPLETED.

A claim whose call succeeded but was never recorded (a crash, or a throttled save, after the
call) cannot tell whether the call happened. So a claim is never taken over by time as
idempotent_function's are (its in-progress expiry is the record's own): an item found claimed is
called again under that claim, keeping its claim time, only while the claim is younger than
`adopt_within` (the window in which the callee itself absorbs a repeated call: SNS FIFO's
deduplication), and fails with CallMayHaveHappened, naming when, once it is older. Its message then
ends in its DLQ, where the operator decides (ops dlq redrive says so and asks for --resend).

Each item's transitions are logged at INFO where they happen, one line each, with a stable
`transition` key and the item's ids (harness.trace checks runs against them; docs/design.md):
`claimed` or `adopted` (with `claimed_at`; `checked_at`: when the claim began, before it read the
record), `sent` (its call succeeded; `recorded`: whether its COMPLETED record was saved) and
`duplicate` (completed before).
"""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    IdempotencyConfig,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

BatchCall = Callable[[list[dict]], Mapping[int, Exception]]


class CallMayHaveHappened(Exception):
    """The item was claimed at `claimed_at` (epoch seconds) and never recorded: its call may have
    happened, too long ago for a repeat to be absorbed. Not called again."""

    def __init__(self, key: str, claimed_at: float):
        super().__init__(
            f"claimed at {_iso(claimed_at, 'seconds')} "
            f"and never recorded: it may have been done; not done again ({key})"
        )
        self.claimed_at = claimed_at


@dataclass
class Outcomes:
    """Positions in the batch: called and recorded; completed before (by an earlier invocation or
    an earlier item of this batch); failed, with the error."""

    done: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    failed: dict[int, Exception] = field(default_factory=dict)


class BatchClaims:
    """Build once per execution environment."""

    def __init__(
        self,
        persistence: BasePersistenceLayer,
        config: IdempotencyConfig,
        *,
        key_prefix: str,
        result: Callable[[dict], dict],
        adopt_within: float,
        name: str,
        log_fields: Callable[[dict], dict],
    ):
        """`name` the items' kind in the log's messages (`<name> claimed`, `<name> sent`, ...),
        `log_fields` an item's ids for its lines (never personal data)."""
        persistence.configure(config=config, key_prefix=key_prefix)
        self._store = persistence
        self._config = config
        self._key = persistence.event_key_compiled_jmespath  # the key Powertools hashes
        self._result = result  # what the record of a completed item stores
        self._adopt_within = adopt_within
        self._name = name
        self._log_fields = log_fields
        # A child of the handler's Logger: the same service, its JSON format and context keys.
        self._logger = Logger(child=True)

    def around(self, items: list[dict], call: BatchCall) -> Outcomes:
        """`call` the items not completed before, each under its claim (a failed claim fails its
        item, the rest go on); `call` returns its failed items by position in what it was given."""
        outcomes = Outcomes()
        first: dict[Any, int] = {}  # key -> position of its first item
        claimed: list[int] = []
        for position, item in enumerate(items):
            key = self._key.search(item)
            if key in first:
                continue
            first[key] = position
            try:
                if self._claim(item):
                    claimed.append(position)
                else:
                    outcomes.duplicates.append(position)
                    self._log(f"{self._name} already sent", "duplicate", item)
            except Exception as error:  # the claim's own failure fails its item
                outcomes.failed[position] = error
        if claimed:
            self._record(items, claimed, call([items[p] for p in claimed]), outcomes)
        for position, item in enumerate(items):
            origin = first[self._key.search(item)]
            if origin == position:
                continue
            if origin in outcomes.failed:
                outcomes.failed[position] = outcomes.failed[origin]
            else:
                outcomes.duplicates.append(position)
        return outcomes

    def _record(
        self,
        items: list[dict],
        claimed: list[int],
        call_failures: Mapping[int, Exception],
        outcomes: Outcomes,
    ) -> None:
        """Each claimed item's record: COMPLETED if its call succeeded, deleted if it failed."""
        for index, position in enumerate(claimed):
            item, error = items[position], call_failures.get(index)
            try:
                if error is None:
                    try:
                        self._store.save_success(data=item, result=self._result(item))
                    except Exception:  # sent all the same: the line says it is unrecorded
                        self._log(f"{self._name} sent", "sent", item, recorded=False)
                        raise
                    self._log(f"{self._name} sent", "sent", item, recorded=True)
                    outcomes.done.append(position)
                else:
                    outcomes.failed[position] = error
                    self._store.delete_record(data=item, exception=error)
            except Exception as record_error:  # unrecorded: retried; the claim expires
                outcomes.failed.setdefault(position, record_error)

    def _claim(self, item: dict) -> bool:
        """True: claimed now, or a claim young enough adopted; False: completed before. Raises
        CallMayHaveHappened for an older claim never recorded."""
        life = self._config.expires_after_seconds
        checked_at = time.time()  # before the claim reads the record: the trace's order
        try:
            # Held for the record's whole life: only this class decides to adopt a claim.
            self._store.save_inprogress(data=item, remaining_time_in_millis=life * 1000)
        except IdempotencyItemAlreadyExistsError as exists:
            record = exists.old_data_record or self._store.get_record(data=item)
            if record.status == STATUS_CONSTANTS["COMPLETED"]:
                return False
            claimed_at = claim_time(record, life)
            if time.time() - claimed_at >= self._adopt_within:
                raise CallMayHaveHappened(record.idempotency_key, claimed_at) from None
            self._log(
                f"{self._name} claim adopted: never recorded",
                "adopted",
                item,
                claimed_at=_iso(claimed_at),
                checked_at=_iso(checked_at),
            )
            return True
        self._log(f"{self._name} claimed", "claimed", item, checked_at=_iso(checked_at))
        return True

    def _log(self, message: str, transition: str, item: dict, **fields: Any) -> None:
        self._logger.info(message, transition=transition, **self._log_fields(item), **fields)


def _iso(epoch_seconds: float, timespec: str = "milliseconds") -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec=timespec)


def claim_time(record: DataRecord, expires_after_seconds: int) -> float:
    """When a record was claimed (epoch seconds): Powertools sets its expiry from that moment."""
    return int(record.expiry_timestamp) - expires_after_seconds
