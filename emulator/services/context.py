"""What the patches read of the running stack: the runtime that Lambda Invoke runs on (none: moto's
own behaviour) and the fault switches (none: no faults), set by its server; the event source
mapping engine (none: mappings are reported as moto holds them), set by the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.core.faults import Faults
    from emulator.lambda_.workers import Runtime

_runtime: Runtime | None = None
_faults: Faults | None = None
# the event source mapping engine's EventSourceMappingEngine.transition (services/ never
# imports delivery/: the engine hands it over when it starts)
_transition: Callable[[str, bool], str | None] | None = None


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


def set_mapping_transition(transition: Callable[[str, bool], str | None]) -> None:
    global _transition  # noqa: PLW0603
    _transition = transition


def release_mapping_transition(transition: Callable[[str, bool], str | None]) -> None:
    """Forget the engine's transition if it is still this one (a stopped engine leaves
    another's in place)."""
    global _transition  # noqa: PLW0603
    if _transition == transition:
        _transition = None


def mapping_transition(uuid: str, enabled: bool) -> str | None:
    """Creating, Enabling or Disabling while the engine's pollers follow a mapping's setting;
    None when they match or no engine runs."""
    return _transition(uuid, enabled) if _transition is not None else None


def runtime() -> Runtime | None:
    return _runtime


def duplicate_deliveries() -> int:
    """How many times each S3 event record goes out (the ``duplicate_deliveries`` switch)."""
    return _faults.duplicate_deliveries if _faults is not None else 1
