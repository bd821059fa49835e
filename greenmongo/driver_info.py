"""PyMongo's ``pymongo.driver_info``: how a library wrapping the driver names itself to the server.

``MongoClient(driver=DriverInfo("MyODM", "1.2", "extra platform text"))`` appends the three
strings to the ``client.driver.name``/``version`` and ``platform`` fields of every handshake
(Handshake spec, "Supporting Wrapping Libraries"); ``MongoClient.append_metadata(info)`` does it
later, for connections opened from then on. ``DriverInfoChain`` is the client's ordered list of
them, which the handshake reads each time it builds its ``client`` document.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional


class _DriverInfoFields(NamedTuple):
    name: str
    version: Optional[str] = None
    platform: Optional[str] = None


class DriverInfo(_DriverInfoFields):
    """``DriverInfo(name, version=None, platform=None)``: a named tuple of strings (or None).

    The ``|`` character joins the appended segments in the handshake, so a field containing it is
    refused with ValueError (and a non-string with TypeError), as in PyMongo.
    """

    __slots__ = ()

    def __new__(cls, name: str, version: Optional[str] = None, platform: Optional[str] = None) -> "DriverInfo":
        self = super().__new__(cls, name, version, platform)
        for field, value in zip(self._fields, self):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Wrong type for DriverInfo {field} option, value must be an instance of str, "
                                f"not {type(value)}")
            if value and "|" in value:
                raise ValueError(f"DriverInfo {field} must not contain the '|' delimiter")
        return self


class DriverInfoChain:
    """The DriverInfo a client appends to its handshake metadata: ``driver=`` first, then each
    ``append_metadata()`` in order.

    Each info adds a name and a version segment (empty when unset), so the two fields keep the same
    number of segments, and a platform segment only when set (PyMongo 4.14's rules). Appending an
    info equal to one already there (None and "" counted alike) changes nothing. Mutable, hashed by
    identity: the connection settings that carry it stay one cache key while new connections see
    what was appended.
    """

    __slots__ = ("_entries", "__weakref__")

    def __init__(self, driver: Optional[DriverInfo] = None) -> None:
        #: (name, version, platform) per info, oldest first ("" for an unset field).
        self._entries: tuple[tuple[str, str, str], ...] = ()
        if driver is not None:
            self.append(driver)

    def append(self, driver: DriverInfo) -> None:
        entry = (driver.name or "", driver.version or "", driver.platform or "")
        if entry not in self._entries:
            self._entries = self._entries + (entry,)

    @property
    def entries(self) -> tuple[tuple[str, str, str], ...]:
        """A snapshot: the handshake builds its document (and its cache key) from it."""
        return self._entries

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __repr__(self) -> str:
        return f"DriverInfoChain({list(self._entries)!r})"

    def __eq__(self, other: Any) -> bool:
        return self is other

    __hash__ = object.__hash__


__all__ = ["DriverInfo"]
