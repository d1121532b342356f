"""The local stack's CloudWatch at work: one thread that, every CloudWatch minute (60 s divided
by the time factor), samples the queues' metrics and evaluates every alarm; the runtime's
observer (``metrics``) puts each invocation's and each EMF line's metrics as they happen."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.utils import utcnow
from moto.sns.models import sns_backends

from emulator.core.arns import service_of
from emulator.monitoring.alarms import AlarmEvaluator
from emulator.monitoring.service_metrics import ServiceMetrics

log = logging.getLogger("emulator.alarms")
DEFAULT_TIME_FACTOR = 60.0  # `up`: a CloudWatch minute lasts one second


class Monitor:
    def __init__(
        self,
        region: str,
        time_factor: float = DEFAULT_TIME_FACTOR,
        account_id: str = DEFAULT_ACCOUNT_ID,
    ) -> None:
        if time_factor <= 0:
            raise ValueError(f"the time factor must be positive, got {time_factor}")
        self.region = region
        self.account_id = account_id
        self.time_factor = time_factor
        self.metrics = ServiceMetrics(account_id, region)
        self.alarms = AlarmEvaluator(account_id, region, time_factor, self._publish)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def minute(self) -> float:
        """Real seconds of one CloudWatch minute."""
        return 60.0 / self.time_factor

    def tick(self, now: datetime | None = None) -> None:
        """One CloudWatch minute: the queues sampled, then every alarm evaluated (``now``: a
        naive UTC time, default the clock's)."""
        now = now or utcnow()
        self.metrics.sample_queues(now)
        self.alarms.evaluate_all(now)

    def _run(self) -> None:
        while not self._stop.wait(self.minute):
            try:
                self.tick()
            except Exception:  # the next minute tries again; the stack keeps serving
                log.exception("alarms: evaluation failed")

    def _publish(self, topic_arn: str, subject: str, message: str) -> None:
        if service_of(topic_arn) != "sns":
            log.warning("alarms: action %s is not an SNS topic: not run locally", topic_arn)
            return
        sns_backends[self.account_id][self.region].publish(message, topic_arn, subject=subject)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cloudwatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
