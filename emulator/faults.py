"""Fault switches of the local stack (docs/local-stack.md: POST/GET /_emulator/faults, `up` flags).

One shared, thread-safe instance per running stack: the control endpoint updates it, the ESM
engine reads ``duplicate_deliveries`` / ``duplicate_rate`` / ``sqs_pollers`` (None: Lambda's own
scaling, an integer: that many pollers per SQS mapping), the runtime consumes crash injections,
the server's WSGI middleware asks ``take_call_fault`` about every AWS call a function worker makes
(``crash_after_call``, ``throttle``), and moto_patches reads ``duplicate_deliveries`` for S3 event
notifications.

Call faults: ``crash_after_call`` and ``throttle`` are lists of entries
``{"function": "<LogicalId>" | "*", "operation": "<service>:<Operation>" | "<service>:*" | "*",
"times": N, "probability": p}`` (``times`` and ``probability`` both optional: without ``times``
an entry never runs out; without ``probability`` every matching call is faulted). Operation names
are the API's (for DynamoDB, SQS and SNS also IAM's action names), e.g. ``dynamodb:PutItem``,
``sqs:SendMessage``, ``sns:Publish``, ``s3:GetObject``. Random choices come from one
``random.Random`` that the ``seed`` switch reseeds, so a chaos run repeats its choices for the
same sequence of calls.

Invocation crashes: ``crash_invocations`` ``{"function": "<LogicalId>" | "*", "probability": p,
"within_calls": K}`` makes each invocation of a matching function, with probability p, crash
after its k-th AWS call, k drawn uniformly from 1..K (an invocation that makes fewer calls runs to
its end): "a crash after a random call in p of the invocations", whatever number of calls a
function makes. ``null`` clears it.
"""

from __future__ import annotations

import functools
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any

CALL_FAULT_SWITCHES = ("crash_after_call", "throttle")
_SWITCHES = frozenset(
    {
        "duplicate_deliveries",
        "duplicate_rate",
        "sqs_pollers",
        "crash_after_side_effects",
        "seed",
        "crash_invocations",
    }
    | set(CALL_FAULT_SWITCHES)
)
_INVOCATION_CRASH_FIELDS = frozenset({"function", "probability", "within_calls"})
_ENTRY_FIELDS = frozenset({"function", "operation", "times", "probability"})
_OPERATION = re.compile(r"^(?P<service>[a-z0-9][a-z0-9-]*):(?P<name>[A-Z][A-Za-z0-9]*|\*)$")
# IAM service prefixes whose API lives in more than one botocore model.
_EXTRA_MODELS = {"dynamodb": ("dynamodbstreams",)}

# The S3 operations the server's middleware tells apart (emulator/server.py s3_operation).
S3_OPERATIONS = frozenset(
    {
        "AbortMultipartUpload",
        "CompleteMultipartUpload",
        "CopyObject",
        "CreateBucket",
        "CreateMultipartUpload",
        "DeleteBucket",
        "DeleteObject",
        "DeleteObjectTagging",
        "DeleteObjects",
        "GetBucketLocation",
        "GetBucketNotificationConfiguration",
        "GetBucketVersioning",
        "GetObject",
        "GetObjectAcl",
        "GetObjectAttributes",
        "GetObjectTagging",
        "HeadBucket",
        "HeadObject",
        "ListBuckets",
        "ListMultipartUploads",
        "ListObjectVersions",
        "ListObjects",
        "ListObjectsV2",
        "ListParts",
        "PutObject",
        "PutObjectAcl",
        "PutObjectTagging",
        "RestoreObject",
        "UploadPart",
        "UploadPartCopy",
    }
)


@dataclass
class CallFault:
    """One entry of ``crash_after_call`` / ``throttle``."""

    function: str  # logical id or "*"
    operation: str  # "<service>:<Operation>", "<service>:*" or "*"
    times: int | None = None  # calls left to fault; None: no limit
    probability: float | None = None  # chance that a matching call is faulted; None: 1

    def matches(self, logical_id: str, operation: str) -> bool:
        if self.function not in ("*", logical_id):
            return False
        wanted = self.operation
        if wanted in ("*", operation):
            return True
        return wanted.endswith(":*") and operation.startswith(wanted[:-1])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"function": self.function, "operation": self.operation}
        if self.times is not None:
            out["times"] = self.times
        if self.probability is not None:
            out["probability"] = self.probability
        return out


@dataclass
class InvocationCrash:
    """``crash_invocations``: which invocations crash, and within how many calls."""

    function: str  # logical id or "*"
    probability: float
    within_calls: int

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "probability": self.probability,
            "within_calls": self.within_calls,
        }


@dataclass
class Faults:
    duplicate_deliveries: int = 1
    # chance that a batch (SQS or stream) is delivered once more, drawn per batch
    duplicate_rate: float = 0.0
    sqs_pollers: int | None = None  # None: scaled as Lambda does (emulator/esm_sqs.py)
    crash_after_side_effects: dict[str, int] = field(default_factory=dict)
    crash_after_call: list[CallFault] = field(default_factory=list)
    throttle: list[CallFault] = field(default_factory=list)
    crash_invocations: InvocationCrash | None = None
    seed: int | None = None
    # Faults that struck so far, by kind ("crash", "throttle"): what a chaos run reports.
    injected: dict[str, int] = field(default_factory=dict, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _random: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seed is not None:
            self._random.seed(self.seed)

    def take_crash(self, logical_id: str) -> bool:
        """Consume one injected crash for ``logical_id``; True when this invocation must fail."""
        with self._lock:
            left = self.crash_after_side_effects.get(logical_id, 0)
            if left <= 0:
                return False
            if left == 1:
                del self.crash_after_side_effects[logical_id]
            else:
                self.crash_after_side_effects[logical_id] = left - 1
            return True

    def draw_duplicate(self) -> bool:
        """For a batch about to be delivered: whether it goes out once more (``duplicate_rate``)."""
        if self.duplicate_rate <= 0:
            return False
        with self._lock:
            return self._random.random() < self.duplicate_rate

    # --- call faults (the server's middleware) -----------------------------------------------
    @property
    def call_faults_active(self) -> bool:
        """Any call fault set (cheap: read on every request)."""
        return bool(self.crash_after_call or self.throttle or self.crash_invocations)

    def count(self, kind: str) -> None:
        """One more fault of ``kind`` struck."""
        with self._lock:
            self.injected[kind] = self.injected.get(kind, 0) + 1

    def draw_invocation_crash(self, logical_id: str) -> int | None:
        """For an invocation of ``logical_id`` about to start: the AWS call it crashes after
        (``crash_invocations``), or None."""
        with self._lock:
            crash = self.crash_invocations
            if crash is None or crash.function not in ("*", logical_id):
                return None
            if self._random.random() >= crash.probability:
                return None
            return self._random.randint(1, crash.within_calls)

    def take_call_fault(self, logical_id: str, operation: str) -> str | None:
        """The fault for one AWS call of a worker of ``logical_id``: "throttle", "crash" or None.

        Throttle entries are looked at first (a throttled call is not applied, so a crash entry
        for the same call waits for the retry); within a list, the first entry that matches and
        (with a probability) wins its draw is consumed: its ``times`` counts down and the entry
        is removed when it reaches 0."""
        with self._lock:
            for kind, entries in (("throttle", self.throttle), ("crash", self.crash_after_call)):
                for index, entry in enumerate(entries):
                    if not entry.matches(logical_id, operation):
                        continue
                    if entry.probability is not None and (
                        self._random.random() >= entry.probability
                    ):
                        continue
                    if entry.times is not None:
                        entry.times -= 1
                        if entry.times <= 0:
                            del entries[index]
                    return kind
        return None

    # --- control endpoint --------------------------------------------------------------------
    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply a (partial) JSON update from the control endpoint; return the new state.

        ``crash_after_side_effects`` entries are merged per logical id (K=0 clears one);
        ``crash_after_call`` / ``throttle`` replace the whole list (``[]`` clears it); ``seed``
        reseeds the random choices. Raises ValueError (its message names the field) on unknown
        keys or invalid values, leaving the state untouched.
        """
        ints, crashes, lists = _validated(changes)
        rate = _parse_rate(changes["duplicate_rate"]) if "duplicate_rate" in changes else None
        invocation_crash = (
            _parse_invocation_crash(changes["crash_invocations"])
            if "crash_invocations" in changes
            else None
        )
        seed = changes.get("seed")
        with self._lock:
            for name, value in ints.items():
                setattr(self, name, value)
            if rate is not None:
                self.duplicate_rate = rate
            for logical_id, count in crashes.items():
                if count:
                    self.crash_after_side_effects[logical_id] = count
                else:
                    self.crash_after_side_effects.pop(logical_id, None)
            for name, entries in lists.items():
                setattr(self, name, entries)
            if "crash_invocations" in changes:
                self.crash_invocations = invocation_crash
            if "seed" in changes:
                self.seed = seed
                self._random.seed(seed)
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "duplicate_deliveries": self.duplicate_deliveries,
                "duplicate_rate": self.duplicate_rate,
                "sqs_pollers": self.sqs_pollers,
                "crash_after_side_effects": dict(self.crash_after_side_effects),
                "crash_after_call": [entry.to_json() for entry in self.crash_after_call],
                "throttle": [entry.to_json() for entry in self.throttle],
                "crash_invocations": (
                    self.crash_invocations.to_json() if self.crash_invocations else None
                ),
                "seed": self.seed,
                "injected": dict(self.injected),
            }


def _validated(
    changes: Any,
) -> tuple[dict[str, int | None], dict[str, int], dict[str, list[CallFault]]]:
    if not isinstance(changes, dict):
        raise ValueError("faults must be a JSON object")
    unknown = set(changes) - _SWITCHES
    if unknown:
        raise ValueError(f"unknown fault switch(es): {', '.join(sorted(unknown))}")
    ints: dict[str, int | None] = {}
    for name in ("duplicate_deliveries", "sqs_pollers"):
        if name in changes:
            value = changes[name]
            if value is None and name == "sqs_pollers":  # back to Lambda's scaling
                ints[name] = None
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                suffix = " (or null: scaled as Lambda does)" if name == "sqs_pollers" else ""
                raise ValueError(f"{name} must be an integer >= 1{suffix}")
            ints[name] = value
    crashes = changes.get("crash_after_side_effects", {})
    if not isinstance(crashes, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in crashes.items()
    ):
        raise ValueError("crash_after_side_effects must map logical ids to integers >= 0")
    lists = {
        name: parse_call_faults(name, changes[name])
        for name in CALL_FAULT_SWITCHES
        if name in changes
    }
    seed = changes.get("seed")
    if "seed" in changes and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError("seed must be an integer")
    return ints, crashes, lists


def _parse_rate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError("duplicate_rate must be a number with 0 <= p <= 1")
    return float(value)


def _parse_invocation_crash(value: Any) -> InvocationCrash | None:
    where = "crash_invocations"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: must be {{function, probability, within_calls}} or null")
    unknown = set(value) - _INVOCATION_CRASH_FIELDS
    if unknown:
        raise ValueError(f"{where}.{sorted(unknown)[0]}: unknown field")
    function = value.get("function", "*")
    if not isinstance(function, str) or not function:
        raise ValueError(f'{where}.function: must be a function\'s logical id or "*"')
    probability = value.get("probability")
    if (
        isinstance(probability, bool)
        or not isinstance(probability, int | float)
        or not 0 < probability <= 1
    ):
        raise ValueError(f"{where}.probability: must be a number with 0 < p <= 1")
    within = value.get("within_calls", 10)
    if isinstance(within, bool) or not isinstance(within, int) or within < 1:
        raise ValueError(f"{where}.within_calls: must be an integer >= 1")
    return InvocationCrash(function, float(probability), within)


def parse_call_faults(name: str, value: Any) -> list[CallFault]:
    """Validate one ``crash_after_call`` / ``throttle`` list; ValueError names the bad field."""
    if not isinstance(value, list):
        raise ValueError(f"{name}: must be a list of {{function, operation, times, probability}}")
    return [_parse_entry(f"{name}[{index}]", entry) for index, entry in enumerate(value)]


def _parse_entry(where: str, entry: Any) -> CallFault:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be an object with function and operation")
    unknown = set(entry) - _ENTRY_FIELDS
    if unknown:
        raise ValueError(f"{where}.{sorted(unknown)[0]}: unknown field")
    function = entry.get("function")
    if not isinstance(function, str) or not function:
        raise ValueError(f'{where}.function: must be a function\'s logical id or "*"')
    operation = entry.get("operation")
    if not isinstance(operation, str):
        raise ValueError(f'{where}.operation: must be "<service>:<Operation>" or "*"')
    if operation != "*":
        problem = operation_problem(operation)
        if problem:
            raise ValueError(f"{where}.operation: {problem}")
    times = entry.get("times")
    if "times" in entry and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise ValueError(f"{where}.times: must be an integer >= 1")
    probability = entry.get("probability")
    if "probability" in entry and (
        isinstance(probability, bool)
        or not isinstance(probability, int | float)
        or not 0 < probability <= 1
    ):
        raise ValueError(f"{where}.probability: must be a number with 0 < p <= 1")
    return CallFault(
        function,
        operation,
        times,
        float(probability) if probability is not None else None,
    )


def operation_problem(operation: str) -> str | None:
    """Why ``operation`` ("<service>:<Operation>" or "<service>:*") names no operation the
    local stack can identify; None when it does."""
    match = _OPERATION.match(operation)
    if match is None:
        return f'must be "<service>:<Operation>" (e.g. dynamodb:PutItem) or "*", not {operation!r}'
    service, name = match["service"], match["name"]
    known = _operations(service)
    if known is None:
        return f"unknown service {service!r}"
    if not known:
        return (
            f"the local stack cannot tell {service} operations apart (REST protocol); it "
            "identifies JSON and query protocol operations and S3's"
        )
    if name != "*" and name not in known:
        return f"{service} has no operation {name!r}"
    return None


@functools.cache
def _operations(service: str) -> frozenset[str] | None:
    """Operation names of an IAM service prefix (None: unknown service; empty: a REST protocol
    the middleware cannot identify). botocore is imported here only, when a switch is set."""
    if service == "s3":
        return S3_OPERATIONS
    import botocore.session  # noqa: PLC0415 - only needed to validate a switch

    session = botocore.session.get_session()
    available = set(session.get_available_services())
    names: set[str] = set()
    found = False
    for model_name in (service, *_EXTRA_MODELS.get(service, ())):
        if model_name not in available:
            continue
        found = True
        model = session.get_service_model(model_name)
        if model.protocol in ("json", "query", "ec2"):
            names.update(model.operation_names)
    return frozenset(names) if found else None
