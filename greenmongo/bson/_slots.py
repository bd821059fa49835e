"""Pickling for the BSON types that use ``__slots__`` (no ``__dict__``).

Without these, pickle protocols 0 and 1 refuse slotted classes, and a class with ``__getattr__``
(DBRef) recurses while unpickling. Values pickled inside documents (a cache, a task queue's
results) must round-trip under every protocol.
"""

from __future__ import annotations

from typing import Any


def _slot_names(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{klass.__name__.lstrip('_')}{name}"  # the mangled attribute name
            names.append(name)
    return names


def getstate_slots(self: Any) -> dict[str, Any]:
    state = {}
    for name in _slot_names(type(self)):
        try:
            state[name] = object.__getattribute__(self, name)
        except AttributeError:
            pass
    return state


def setstate_slots(self: Any, state: dict[str, Any]) -> None:
    for name, value in state.items():
        object.__setattr__(self, name, value)
