"""What the patches read of the running stack, set by its server: the runtime that Lambda Invoke
runs on (none: moto's own behaviour) and the fault switches (none: no faults)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.core.faults import Faults
    from emulator.lambda_.workers import Runtime

_runtime: Runtime | None = None
_faults: Faults | None = None


def set_runtime(runtime: Runtime | None) -> None:
    global _runtime  # noqa: PLW0603
    _runtime = runtime


def set_faults(faults: Faults | None) -> None:
    global _faults  # noqa: PLW0603
    _faults = faults


def release(runtime: Runtime | None, faults: Faults | None) -> None:
    """Forget the runtime and the faults if they are still these (a server that stops leaves
    another's in place)."""
    if _runtime is runtime:
        set_runtime(None)
    if _faults is faults:
        set_faults(None)


def runtime() -> Runtime | None:
    return _runtime


def duplicate_deliveries() -> int:
    """How many times each S3 event record goes out (the ``duplicate_deliveries`` switch)."""
    return _faults.duplicate_deliveries if _faults is not None else 1
