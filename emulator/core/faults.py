"""Fault switches of the local stack (docs/local-stack.md: GET/POST /_emulator/faults, POST
/_emulator/faults/reset, `up` flags).

One shared, thread-safe instance per running stack: the control endpoint updates it, the ESM
engine reads the delivery switches, the runtime consumes crash injections, the server's WSGI
middleware asks ``take_call_fault`` about every AWS call a function worker makes, and
moto_patches reads ``duplicate_deliveries`` for S3 event notifications.

Each switch is declared once, as a field of ``Faults``: its default, and in its metadata
(``_switch``) how its JSON value is read and validated and its `up` flag if it has one. The names
POST accepts, what GET shows (``SWITCHES``, in field order) and the `up` flags
(emulator/__main__.py) derive from these fields; ``reset`` puts every switch back to its
start-up value.

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

import copy
import functools
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

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


# --- how a switch is declared --------------------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    """A switch's `python -m emulator up` flag: its value is the switch's start-up value (flag
    not given: the switch's default)."""

    name: str  # e.g. "--duplicate-rate"
    help: str
    metavar: str = "N"
    text: Callable[[str], Any] = int  # the flag's text -> the switch's JSON value
    repeatable: bool = False  # each use adds one entry (``text`` gives the entry) to a list


@dataclass(frozen=True)
class Switch:
    """How POST reads a switch: ``parse(name, value)`` returns what the switch holds or raises
    ValueError naming it. ``merge``: the JSON object is merged key by key into the current one
    (a 0 removes the key); otherwise the value replaces the current one."""

    parse: Callable[[str, Any], Any]
    merge: bool = False
    flag: Flag | None = None


def _switch(
    parse: Callable[[str, Any], Any], *, merge: bool = False, flag: Flag | None = None
) -> dict[str, Switch]:
    """The metadata that makes a field of ``Faults`` a fault switch."""
    return {"switch": Switch(parse, merge, flag)}


# --- reading switches' JSON values ---------------------------------------------------------------
def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(name: str, value: Any) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1")
    return value


def _pollers(name: str, value: Any) -> int | None:
    if value is not None and (not _is_int(value) or value < 1):
        raise ValueError(f"{name} must be an integer >= 1 (or null: scaled as Lambda does)")
    return value


def _rate(name: str, value: Any) -> float:
    if not _is_number(value) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number with 0 <= p <= 1")
    return float(value)


def _seed(name: str, value: Any) -> int | None:
    if value is not None and not _is_int(value):
        raise ValueError(f"{name} must be an integer (or null: unseeded)")
    return value


def _side_effect_crashes(name: str, value: Any) -> dict[str, int]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and _is_int(v) and v >= 0 for k, v in value.items()
    ):
        raise ValueError(f"{name} must map logical ids to integers >= 0")
    return dict(value)


def _invocation_crash(name: str, value: Any) -> InvocationCrash | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{name}: must be {{function, probability, within_calls}} or null")
    unknown = set(value) - _INVOCATION_CRASH_FIELDS
    if unknown:
        raise ValueError(f"{name}.{sorted(unknown)[0]}: unknown field")
    function = value.get("function", "*")
    if not isinstance(function, str) or not function:
        raise ValueError(f'{name}.function: must be a function\'s logical id or "*"')
    probability = value.get("probability")
    if not _is_number(probability) or not 0 < probability <= 1:
        raise ValueError(f"{name}.probability: must be a number with 0 < p <= 1")
    within = value.get("within_calls", 10)
    if not _is_int(within) or within < 1:
        raise ValueError(f"{name}.within_calls: must be an integer >= 1")
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
    if "times" in entry and (not _is_int(times) or times < 1):
        raise ValueError(f"{where}.times: must be an integer >= 1")
    probability = entry.get("probability")
    if "probability" in entry and (not _is_number(probability) or not 0 < probability <= 1):
        raise ValueError(f"{where}.probability: must be a number with 0 < p <= 1")
    return CallFault(
        function,
        operation,
        times,
        float(probability) if probability is not None else None,
    )


def call_fault_from_text(text: str) -> dict[str, Any]:
    """A call fault `up` flag's value, ``FUNCTION:OPERATION[:TIMES]`` (OPERATION: service:Name,
    service:* or *) or one JSON entry, as the JSON entry (validated with the switch)."""
    if text.lstrip().startswith("{"):
        try:
            return dict(json.loads(text))
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from exc
    parts = text.split(":")
    function, rest = parts[0], parts[1:]
    operation_parts = 1 if rest[:1] == ["*"] else 2
    if len(rest) not in (operation_parts, operation_parts + 1):
        raise ValueError(
            "expected FUNCTION:OPERATION[:TIMES] (e.g. NotifierFunction:sns:PublishBatch:2) or a "
            "JSON entry"
        )
    entry: dict[str, Any] = {"function": function, "operation": ":".join(rest[:operation_parts])}
    if len(rest) > operation_parts:
        try:
            entry["times"] = int(rest[-1])
        except ValueError as exc:
            raise ValueError(f"TIMES must be an integer, not {rest[-1]!r}") from exc
    return entry


def _call_fault_flag(name: str, what: str) -> Flag:
    return Flag(
        name,
        f"{what} (repeatable): FUNCTION:OPERATION[:TIMES], FUNCTION a logical id or *, OPERATION "
        "service:Name as in IAM (dynamodb:PutItem, sns:Publish, s3:GetObject), service:* or *; "
        'or a JSON entry such as \'{"function": "*", "operation": "*", "probability": 0.05}\'',
        "FUNCTION:OPERATION[:TIMES]",
        call_fault_from_text,
        repeatable=True,
    )


def _json(value: Any) -> Any:
    """A switch's value as GET shows it (a copy: the switch may change after the lock)."""
    if isinstance(value, list):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return dict(value)
    return value.to_json() if isinstance(value, CallFault | InvocationCrash) else value


# --- the switches --------------------------------------------------------------------------------
@dataclass
class Faults:
    # Each SQS batch / stream batch delivered N times (delivery/mappings.py
    # EngineContext.deliveries), each S3 event notification sent N times (moto_patches).
    duplicate_deliveries: int = field(
        default=1,
        metadata=_switch(
            _count,
            flag=Flag(
                "--duplicate-deliveries",
                "deliver every SQS batch, stream batch and S3 event N times",
            ),
        ),
    )
    # Chance that a batch (SQS or stream) is delivered once more, drawn per batch.
    duplicate_rate: float = field(
        default=0.0,
        metadata=_switch(
            _rate,
            flag=Flag(
                "--duplicate-rate",
                "deliver each SQS / stream batch once more with probability P (0-1)",
                "P",
                float,
            ),
        ),
    )
    # Chance that a message of an SQS batch is held back to its poller's next batch; every
    # batch is shuffled (delivery/sqs_poller.py; standard queues: a FIFO queue keeps its order).
    reorder_rate: float = field(
        default=0.0,
        metadata=_switch(
            _rate,
            flag=Flag(
                "--reorder-rate",
                "shuffle every SQS batch and hold each message back to a later batch with "
                "probability P (0-1; FIFO queues keep their order)",
                "P",
                float,
            ),
        ),
    )
    # A fixed number of pollers per SQS mapping; None: scaled as Lambda does
    # (delivery/sqs_poller.py).
    sqs_pollers: int | None = field(
        default=None,
        metadata=_switch(
            _pollers,
            flag=Flag(
                "--sqs-pollers",
                "a fixed number of pollers per SQS mapping (default: 5, scaled with the backlog "
                "as Lambda does)",
            ),
        ),
    )
    # Per logical id: the next K invocations run to their end, then fail (Runtime, take_crash).
    crash_after_side_effects: dict[str, int] = field(
        default_factory=dict, metadata=_switch(_side_effect_crashes, merge=True)
    )
    # Per logical id: the next K invocations fail at once with an error, the function not run
    # and its worker kept warm, as a broken release fails (Runtime, take_failure).
    fail_invocations: dict[str, int] = field(
        default_factory=dict, metadata=_switch(_side_effect_crashes, merge=True)
    )
    # Call faults (the server's middleware, take_call_fault).
    crash_after_call: list[CallFault] = field(
        default_factory=list,
        metadata=_switch(
            parse_call_faults,
            flag=_call_fault_flag(
                "--crash-after-call",
                "kill the function's worker right after a matching AWS call was applied",
            ),
        ),
    )
    throttle: list[CallFault] = field(
        default_factory=list,
        metadata=_switch(
            parse_call_faults,
            flag=_call_fault_flag(
                "--throttle",
                "answer a matching AWS call with the service's throttling error, not applied",
            ),
        ),
    )
    # Invocations that crash after a random call (Runtime, draw_invocation_crash).
    crash_invocations: InvocationCrash | None = field(
        default=None, metadata=_switch(_invocation_crash)
    )
    # Reseeds the random choices (every probability) when set.
    seed: int | None = field(
        default=None,
        metadata=_switch(_seed, flag=Flag("--fault-seed", "seed of the faults' random choices")),
    )
    # Faults that struck since the start, by kind ("crash", "throttle"): what a chaos run
    # reports. Not a switch: reset keeps it.
    injected: dict[str, int] = field(default_factory=dict, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _random: random.Random = field(default_factory=random.Random, repr=False, compare=False)
    _start: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seed is not None:
            self._random.seed(self.seed)
        self._start = {name: copy.deepcopy(getattr(self, name)) for name in SWITCHES}

    @classmethod
    def from_json(cls, switches: Any) -> Faults:
        """Start-up switches from JSON, as POST takes them (ValueError naming the switch)."""
        return cls(**_parsed(switches))

    def take_crash(self, logical_id: str) -> bool:
        """Consume one injected crash for ``logical_id``; True when this invocation must fail."""
        return self._take(self.crash_after_side_effects, logical_id)

    def take_failure(self, logical_id: str) -> bool:
        """Consume one injected failure for ``logical_id``; True when this invocation must fail
        without running (``fail_invocations``)."""
        return self._take(self.fail_invocations, logical_id)

    def _take(self, counts: dict[str, int], logical_id: str) -> bool:
        """One of ``logical_id``'s injections of ``counts`` consumed; False when none is left."""
        with self._lock:
            left = counts.get(logical_id, 0)
            if left <= 0:
                return False
            if left == 1:
                del counts[logical_id]
            else:
                counts[logical_id] = left - 1
            return True

    def reorder(self, batch: list, held: list) -> tuple[list, list]:
        """``reorder_rate`` for an SQS batch about to be delivered: (what goes now: ``held``, the
        poller's messages held back from before, and the rest of ``batch``, shuffled; what is
        held back for the poller's next batch: each message of ``batch`` with probability p)."""
        if self.reorder_rate <= 0:
            return held + batch, []
        with self._lock:
            later = [self._random.random() < self.reorder_rate for _ in batch]
            now = held + [item for item, hold in zip(batch, later, strict=True) if not hold]
            self._random.shuffle(now)
        return now, [item for item, hold in zip(batch, later, strict=True) if hold]

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
    def update(self, changes: Any) -> dict[str, Any]:
        """Apply a (partial) JSON update from the control endpoint; return the new state.

        ``crash_after_side_effects`` entries are merged per logical id (K=0 clears one);
        ``crash_after_call`` / ``throttle`` replace the whole list (``[]`` clears it); ``seed``
        reseeds the random choices. Raises ValueError (its message names the switch) on unknown
        names or invalid values, leaving the state untouched.
        """
        parsed = _parsed(changes)
        with self._lock:
            for name, value in parsed.items():
                if not SWITCHES[name].merge:
                    setattr(self, name, value)
                    continue
                current = getattr(self, name)
                for key, count in value.items():
                    if count:
                        current[key] = count
                    else:
                        current.pop(key, None)
            if "seed" in parsed:
                self._random.seed(self.seed)
        return self.snapshot()

    def reset(self) -> dict[str, Any]:
        """Every switch back to its start-up value (the constructor's: the `up` flags, else the
        defaults), the random choices reseeded; ``injected`` kept. Returns the new state."""
        with self._lock:
            for name, value in self._start.items():
                setattr(self, name, copy.deepcopy(value))
            self._random.seed(self.seed)
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """The state as GET /_emulator/faults shows it: every switch, then ``injected``."""
        with self._lock:
            state = {name: _json(getattr(self, name)) for name in SWITCHES}
            state["injected"] = dict(self.injected)
        return state


# Every switch by name, in declaration order.
SWITCHES: dict[str, Switch] = {
    f.name: f.metadata["switch"] for f in fields(Faults) if "switch" in f.metadata
}


def _parsed(changes: Any) -> dict[str, Any]:
    """Each switch of a JSON object, read (ValueError naming the switch, or the unknown names)."""
    if not isinstance(changes, dict):
        raise ValueError("faults must be a JSON object")
    unknown = sorted(set(changes) - set(SWITCHES))
    if unknown:
        raise ValueError(
            f"unknown fault switch(es): {', '.join(unknown)} (known: {', '.join(SWITCHES)})"
        )
    return {name: SWITCHES[name].parse(name, value) for name, value in changes.items()}


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
