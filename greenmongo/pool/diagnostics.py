"""Pool-exhaustion diagnostics: who holds a pool's connections, and the text that says so.

Always on, and free: the pool counts its in-use connections by use ("cursor", "transaction", other) as
it checks them out and in, and each wait-queue entry remembers when it joined; a WaitQueueTimeoutError
and the pool's "Connection checkout failed" log read those counters (:func:`exhaustion_details`).

Opt-in (``MongoClient(pool_debug=True)`` or ``GREENMONGO_POOL_DEBUG=1``, a greenmongo extension): each
checkout also records a :class:`Holder` - the greenlet, the time, and a short stack of the code that
asked for the connection - shown by the timeout error and ``MongoClient.pool_holders()``. When off, a
checkout pays one attribute test.
"""

from __future__ import annotations

import os
import sys
import weakref
from time import monotonic
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import gevent

from greenmongo.pool.model import address_text

#: How many frames of the caller's own code a Holder keeps, and how many holders a timeout error names.
STACK_FRAMES = 5
TOP_HOLDERS = 3

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_GEVENT_DIR = os.path.dirname(os.path.abspath(gevent.__file__))
_SKIPPED = (_PACKAGE_DIR + os.sep, _GEVENT_DIR + os.sep)

Frame = Tuple[str, int, str]  # (file name, line, function)


class Holder:
    """Who checked a connection out, when, and from where (pool debug mode)."""

    __slots__ = ("_greenlet", "greenlet_name", "since", "entry", "stack")

    def __init__(self, greenlet: Any, since: float, entry: Optional[Frame], stack: Sequence[Frame]) -> None:
        try:
            self._greenlet: Any = weakref.ref(greenlet)
        except TypeError:  # pragma: no cover - greenlets support weak references
            self._greenlet = lambda: greenlet
        self.greenlet_name = _greenlet_name(greenlet)
        self.since = since
        self.entry = entry  # the outermost greenmongo frame: the API call that checked out
        self.stack = tuple(stack)  # the caller's frames, innermost first

    @classmethod
    def capture(cls) -> "Holder":
        """The current greenlet and call stack; frames are walked, never formatted (no file reads)."""
        frame: Any = sys._getframe(1)
        entry: Optional[Frame] = None
        stack: List[Frame] = []
        while frame is not None and len(stack) < STACK_FRAMES:
            code = frame.f_code
            if code.co_filename.startswith(_SKIPPED):
                if not stack and code.co_filename.startswith(_PACKAGE_DIR):
                    entry = (code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name))
            else:
                stack.append((code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name)))
            frame = frame.f_back
        return cls(gevent.getcurrent(), monotonic(), entry, stack)

    @property
    def greenlet(self) -> Any:
        """The holding greenlet, or None once it was garbage collected."""
        return self._greenlet()

    @property
    def alive(self) -> bool:
        """False when the greenlet that checked the connection out has ended (it leaked the connection,
        or handed it to a cursor or transaction that outlived it)."""
        glet = self._greenlet()
        return glet is not None and not glet.dead

    def where(self) -> str:
        """``file:line in function`` of the innermost caller frame (the API entry if none)."""
        frame = self.stack[0] if self.stack else self.entry
        return _frame_text(frame) if frame is not None else "?"


def _greenlet_name(glet: Any) -> str:
    name = getattr(glet, "name", None)
    if isinstance(name, str) and name:
        return name
    return f"{type(glet).__name__}-{id(glet):#x}"


def _frame_text(frame: Frame) -> str:
    return f"{_short_path(frame[0])}:{frame[1]} in {frame[2]}"


def _short_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def holder_info(record: Any, address: Any, now: float) -> Dict[str, Any]:
    """One checked-out connection as plain data (``MongoClient.pool_holders()``)."""
    holder: Holder = record.holder
    return {
        "address": address_text(address),
        "connection_id": record.id,
        "use": record.use or "other",
        "greenlet": holder.greenlet_name,
        "greenlet_alive": holder.alive,
        "held_for": now - holder.since,
        "api": _frame_text(holder.entry) if holder.entry is not None else None,
        "stack": [_frame_text(frame) for frame in holder.stack],
    }


def holder_line(info: Mapping[str, Any]) -> str:
    """One holder as text for an error message or a log."""
    state = "" if info["greenlet_alive"] else " (ended)"
    via = f" via {info['api']}" if info["api"] else ""
    where = " <- ".join(info["stack"]) or "?"
    return (f"connection {info['connection_id']} ({info['use']}) held {info['held_for']:.3f} s "
            f"by greenlet {info['greenlet']}{state}, checked out at {where}{via}")


def exhaustion_details(max_pool_size: int, in_use: int, uses: Mapping[str, int], available: int, pending: int,
                       waiters: int, longest_wait: float) -> Dict[str, Any]:
    """The counters a WaitQueueTimeoutError and the checkout-failed log report (log field names)."""
    cursors, transactions = uses.get("cursor", 0), uses.get("transaction", 0)
    return {
        "maxPoolSize": max_pool_size,
        "inUse": in_use,
        "inUseByCursors": cursors,
        "inUseByTransactions": transactions,
        "inUseByOtherOperations": in_use - cursors - transactions,
        "available": available,
        "pending": pending,
        "waitQueueLength": waiters,
        "longestWaitMS": round(longest_wait * 1000.0, 3),
    }


def exhaustion_text(details: Mapping[str, Any], waited: Optional[float]) -> str:
    """The part of the timeout message after the in-use counts: what else the pool and its queue hold."""
    text = (f", connections available: {details['available']}, connections being established: "
            f"{details['pending']}, wait queue length: {details['waitQueueLength']}, longest current wait: "
            f"{details['longestWaitMS'] / 1000.0:.3f} s")
    if waited is not None:
        text += f", this checkout waited: {waited:.3f} s"
    return text


def holders_text(infos: Sequence[Mapping[str, Any]], total: int) -> str:
    if not infos:
        return ""
    more = f" (of {total})" if total > len(infos) else ""
    return f". Longest holders{more}: " + "; ".join(holder_line(info) for info in infos)
