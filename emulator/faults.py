"""Fault switches of the local stack (docs/local-stack.md: POST/GET /_emulator/faults, `up` flags).

One shared, thread-safe instance per running stack: the control endpoint updates it, the ESM
engine reads ``duplicate_deliveries`` / ``sqs_pollers``, the runtime consumes crash injections.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Faults:
    duplicate_deliveries: int = 1
    sqs_pollers: int = 1
    crash_after_side_effects: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

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

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply a (partial) JSON update from the control endpoint; return the new state.

        ``crash_after_side_effects`` entries are merged per logical id (K=0 clears one).
        Raises ValueError on unknown keys or invalid values, leaving the state untouched.
        """
        if not isinstance(changes, dict):
            raise ValueError("faults must be a JSON object")
        unknown = set(changes) - {"duplicate_deliveries", "sqs_pollers", "crash_after_side_effects"}
        if unknown:
            raise ValueError(f"unknown fault switch(es): {', '.join(sorted(unknown))}")
        ints = {}
        for name in ("duplicate_deliveries", "sqs_pollers"):
            if name in changes:
                value = changes[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{name} must be an integer >= 1")
                ints[name] = value
        crashes = changes.get("crash_after_side_effects", {})
        if not isinstance(crashes, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in crashes.items()
        ):
            raise ValueError("crash_after_side_effects must map logical ids to integers >= 0")
        with self._lock:
            for name, value in ints.items():
                setattr(self, name, value)
            for logical_id, count in crashes.items():
                if count:
                    self.crash_after_side_effects[logical_id] = count
                else:
                    self.crash_after_side_effects.pop(logical_id, None)
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "duplicate_deliveries": self.duplicate_deliveries,
                "sqs_pollers": self.sqs_pollers,
                "crash_after_side_effects": dict(self.crash_after_side_effects),
            }
