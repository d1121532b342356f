"""Powertools' BatchProcessor with one step after the records: what their handlers returned, sent
in as few calls as the service allows (SendMessageBatch, PublishBatch), each failed send failing
its own record exactly as if its handler had raised (Powertools' failure_handler, so the partial
batch response and the "all records failed" error are Powertools' own).

A record handler returns what its record sends, or None (nothing to send). `send_batch` gets
those in record order and returns the ones that failed, by position, each with its error (an
entry the service refused, or every entry of a call that raised: the adapter's business). A
crash (a BaseException) propagates untouched, as from a record handler.
"""

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

SendBatch = Callable[[list[Any]], Mapping[int, Exception]]


class BatchSends(BatchProcessor):
    """Build once per execution environment (module level), as a BatchProcessor."""

    def __init__(self, event_type: EventType, send_batch: SendBatch):
        super().__init__(event_type=event_type)
        self._send_batch = send_batch
        self._to_send: list[tuple[dict, Any]] = []  # (record, what its handler returned)

    def _prepare(self) -> None:
        super()._prepare()
        self._to_send = []

    def success_handler(self, record, result: Any):
        if result is not None:
            self._to_send.append((record, result))
        return super().success_handler(record, result)

    def process(self) -> list[tuple]:
        responses = super().process()
        if not self._to_send:
            return responses
        failures = self._send_batch([result for _, result in self._to_send])
        for position, error in sorted(failures.items()):
            record = self._to_send[position][0]
            index = next(i for i, r in enumerate(self.records) if r is record)
            self.success_messages.remove(record)
            # as _process_record fails a record: with its data class
            data = self._to_batch_type(record=record, event_type=self.event_type, model=self.model)
            responses[index] = self.failure_handler(data, (type(error), error, error.__traceback__))
        return responses
