"""What every figure shares: paths, the functions' Lambda-like environment, result rows."""

import os
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from emulator.process import REGION

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / ".aws-sam" / "build"

FUNCTIONS = {
    "IngestFunction": "ingest",
    "LastAgentFunction": "last_agent",
    "SurveyFunction": "survey",
    "GoodwillFunction": "goodwill",
    "NotifierFunction": "notifier",
    "RouteFunction": "route",
}


@dataclass
class Figure:
    id: str
    name: str
    value: float
    unit: str
    budget: str
    holds: bool | None  # None: reported, no budget
    detail: str = ""
    mode: str | None = None  # the local stack's fan-out mode, for figures measured per mode

    def as_dict(self) -> dict:
        figure = asdict(self)
        if figure["mode"] is None:
            del figure["mode"]
        return figure

    def for_mode(self, mode: str | None) -> "Figure":
        """This figure as measured in fan-out mode ``mode`` (None: the stack's default)."""
        if mode is None:
            return self
        return replace(self, name=f"{self.name} [{mode}]", mode=mode)


def layer_path() -> Path:
    """The built layer when `sam build` ran (what Lambda mounts at /opt/python), else the source."""
    built = BUILD / "SharedLayer" / "python"
    return built if built.is_dir() else ROOT / "layers" / "shared"


def function_env(function_name: str, endpoint_url: str | None = None) -> dict[str, str]:
    """The environment a function sees on Lambda, with dummy credentials and local names."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "POWERTOOLS_", "PYTHON"))
    }
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
        AWS_LAMBDA_FUNCTION_NAME=function_name,
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE="256",
        CONTACTS_TABLE_NAME="bench-contacts",
        IDEMPOTENCY_TABLE_NAME="bench-idempotency",
        INGEST_QUEUE_URL=f"https://sqs.{REGION}.amazonaws.com/123456789012/bench-ingest",
        NOTIFICATION_QUEUE_URL=f"https://sqs.{REGION}.amazonaws.com/123456789012/bench-notifications",
        NOTIFICATIONS_TOPIC_ARN=f"arn:aws:sns:{REGION}:123456789012:bench-notifications",
        GOODWILL_WAIT_SECONDS="600",
        POWERTOOLS_SERVICE_NAME=function_name,
        POWERTOOLS_METRICS_NAMESPACE="ContactCenter",
        POWERTOOLS_LOG_LEVEL="WARNING",
    )
    if endpoint_url:
        env["AWS_ENDPOINT_URL"] = endpoint_url
    return env


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


PYTHON = sys.executable
