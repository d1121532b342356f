"""The one way a moto patch is installed and undone.

``replace(owner, name, new)`` sets an attribute of a class or module and remembers what was there
(the raw class ``__dict__`` entry, so properties and static methods come back as they were, or
nothing at all); ``restore_all()`` undoes every replacement, newest first. Every service module
patches through ``replace``; moto_patches.uninstall() calls ``restore_all``.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()
_applied: list[tuple[Any, str, Any]] = []


def replace(owner: Any, name: str, new: Any) -> None:
    if isinstance(owner, type):
        original = owner.__dict__.get(name, _MISSING)
    else:
        original = getattr(owner, name, _MISSING)
    _applied.append((owner, name, original))
    setattr(owner, name, new)


def original(owner: Any, name: str) -> Any:
    """What ``name`` was before the first replace() of it (the attribute itself if never
    replaced)."""
    for patched_owner, patched_name, value in _applied:
        if patched_owner is owner and patched_name == name:
            return None if value is _MISSING else value
    return owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)


def restore_all() -> None:
    while _applied:
        owner, name, value = _applied.pop()
        if value is _MISSING:
            if name in vars(owner):
                delattr(owner, name)
        else:
            setattr(owner, name, value)
