"""Immutable ServerDescription: the client's view of one server after one check.

Built from a hello (or legacy hello) reply plus the measured round trip time,
or from an error (type Unknown). Field names follow PyMongo's
``ServerDescription``; times are in seconds like PyMongo's.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, FrozenSet, Iterable, List, Mapping, Optional, Tuple

from greenmongo.bson.datetime_ms import DatetimeMS
from greenmongo.bson.objectid import ObjectId
from greenmongo.sdam.address import Address, format_address, parse_address
from greenmongo.sdam.server_type import ServerType
from greenmongo.wire import reply_fields

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

#: Defaults the server documents for hello replies that omit the limits.
DEFAULT_MAX_BSON_SIZE = 16 * 1024 * 1024
DEFAULT_MAX_MESSAGE_SIZE = 2 * DEFAULT_MAX_BSON_SIZE
DEFAULT_MAX_WRITE_BATCH_SIZE = 100_000


def compare_topology_versions(current: Optional[Mapping[str, Any]],
                              incoming: Optional[Mapping[str, Any]]) -> int:
    """-1, 0 or 1 as ``current`` is older than, equal to or newer than ``incoming``.

    SDAM "topologyVersion Comparison": a missing side or a different processId
    means the incoming one is assumed newer.
    """
    if current is None or incoming is None:
        return -1
    if current.get("processId") != incoming.get("processId"):
        return -1
    a, b = int(current.get("counter", 0)), int(incoming.get("counter", 0))
    return (a > b) - (a < b)


_INT32_MAX = 2**31 - 1
_SIZE_FIELDS = ("maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize")


def check_hello(reply: Mapping[str, Any]) -> None:
    """ProtocolError unless every field of a hello reply the driver reads has its type.

    Run on each reply before it describes a server or a connection, so a malformed hello makes the
    check fail (the server is Unknown, with this error) instead of putting a wrong value (a string
    wire version, a 2**40-byte message size) into the topology or crashing the monitor.
    """
    for name in ("minWireVersion", "maxWireVersion", "logicalSessionTimeoutMinutes", "setVersion",
                 "connectionId"):
        value = reply_fields.integer(reply, name, default=None)
        if value is not None and value < 0:
            raise reply_fields.malformed(name, value, "a non-negative integer")
    for name in _SIZE_FIELDS:  # bounds on what the wire can carry: a message length is an int32
        value = reply_fields.integer(reply, name, default=None)
        if value is not None and not 0 < value <= _INT32_MAX:
            raise reply_fields.malformed(name, value, "a positive int32")
    for name in ("setName", "primary", "me", "msg"):
        reply_fields.string(reply, name, default=None)
    for name in ("hosts", "passives", "arbiters"):
        for text in reply_fields.strings(reply, name, default=()):
            try:
                parse_address(text)
            except ValueError as exc:
                raise reply_fields.malformed(name, text, f"host:port addresses ({exc})") from None
    for name in ("primary", "me"):
        text = reply.get(name)
        if text:
            try:
                parse_address(text)
            except ValueError as exc:
                raise reply_fields.malformed(name, text, f"a host:port address ({exc})") from None
    for name in ("compression", "saslSupportedMechs"):
        reply_fields.strings(reply, name, default=None)
    for name in ("tags", "speculativeAuthenticate"):
        reply_fields.document(reply, name, default=None)
    for name in ("electionId", "serviceId"):
        value = reply.get(name)
        if value is not None and not isinstance(value, ObjectId):
            raise reply_fields.malformed(name, value, "an ObjectId")
    topology_version = reply_fields.document(reply, "topologyVersion", default=None)
    if topology_version is not None:
        if not isinstance(topology_version.get("processId"), ObjectId):
            raise reply_fields.malformed("topologyVersion.processId", topology_version.get("processId"),
                                         "an ObjectId")
        reply_fields.integer(topology_version, "counter", where="topologyVersion")
    last_write = reply_fields.document(reply, "lastWrite", default=None)
    if last_write is not None:
        date = last_write.get("lastWriteDate")
        if date is not None and not isinstance(date, (datetime.datetime, DatetimeMS)):
            raise reply_fields.malformed("lastWrite.lastWriteDate", date, "a datetime")
    reply_fields.check_gossip(reply)


def _server_type(reply: Mapping[str, Any]) -> ServerType:
    if not reply.get("ok"):
        return ServerType.Unknown
    if reply.get("serviceId") is not None:
        return ServerType.LoadBalancer
    if reply.get("isreplicaset"):
        return ServerType.RSGhost
    if reply.get("setName"):
        if reply.get("hidden"):
            return ServerType.RSOther
        writable = reply.get("isWritablePrimary")
        if writable is None:
            writable = reply.get("ismaster")
        if writable:
            return ServerType.RSPrimary
        if reply.get("secondary"):
            return ServerType.RSSecondary
        if reply.get("arbiterOnly"):
            return ServerType.RSArbiter
        return ServerType.RSOther
    if reply.get("msg") == "isdbgrid":
        return ServerType.Mongos
    return ServerType.Standalone


def _addresses(values: Optional[Iterable[str]]) -> Tuple[Address, ...]:
    """Parsed, lower-cased, de-duplicated, in reply order (the order new members are added in)."""
    out: List[Address] = []
    for value in values or ():
        address = parse_address(value)
        if address not in out:
            out.append(address)
    return tuple(out)


def _seconds_since_epoch(value: Any) -> Optional[float]:
    """A BSON datetime (``datetime`` or integer milliseconds) -> float seconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        when = value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)
        return (when - _EPOCH).total_seconds()
    return int(value) / 1000.0  # int milliseconds, or a DatetimeMS-like wrapper with __int__


def _error_key(error: Optional[BaseException]) -> Optional[Tuple[str, str]]:
    if error is None:
        return None
    return type(error).__name__, str(error)


class ServerDescription:
    """Immutable description of one server; replaced, never modified."""

    __slots__ = (
        "_address", "_reply", "_server_type", "_hosts", "_passives", "_arbiters", "_tags",
        "_set_name", "_set_version", "_election_id", "_primary", "_me", "_min_wire_version",
        "_max_wire_version", "_max_bson_size", "_max_message_size", "_max_write_batch_size",
        "_logical_session_timeout_minutes", "_topology_version", "_last_write_date", "_op_time",
        "_last_update_time", "_round_trip_time", "_min_round_trip_time", "_error", "_service_id",
        "_iscryptd", "_cluster_time", "_hello_ok",
    )

    def __init__(
        self,
        address: Address,
        hello: Optional[Mapping[str, Any]] = None,
        round_trip_time: Optional[float] = None,
        error: Optional[BaseException] = None,
        min_round_trip_time: float = 0.0,
        last_update_time: Optional[float] = None,
    ) -> None:
        """``hello`` is the decoded reply (None for a failed check); ``round_trip_time`` in seconds.

        A reply without ``ok: 1`` gives a default Unknown description, as the
        spec requires. ``last_update_time`` defaults to ``time.monotonic()``.
        """
        reply: Mapping[str, Any] = hello if hello is not None and hello.get("ok") else {}
        self._address = address
        self._reply = reply
        self._error = error
        self._server_type = _server_type(reply) if reply else ServerType.Unknown
        known = self._server_type is not ServerType.Unknown
        self._hosts = _addresses(reply.get("hosts"))
        self._passives = _addresses(reply.get("passives"))
        self._arbiters = _addresses(reply.get("arbiters"))
        self._tags = dict(reply.get("tags") or {})
        self._set_name = reply.get("setName")
        set_version = reply.get("setVersion")
        self._set_version = int(set_version) if set_version is not None else None
        self._election_id = reply.get("electionId")
        primary = reply.get("primary")
        self._primary = parse_address(primary) if primary else None
        me = reply.get("me")
        self._me = parse_address(me) if me else None
        if reply:
            self._min_wire_version: Optional[int] = int(reply.get("minWireVersion", 0) or 0)
            self._max_wire_version: Optional[int] = int(reply.get("maxWireVersion", 0) or 0)
        else:
            self._min_wire_version = self._max_wire_version = None
        self._max_bson_size = int(reply.get("maxBsonObjectSize", DEFAULT_MAX_BSON_SIZE))
        self._max_message_size = int(reply.get("maxMessageSizeBytes", DEFAULT_MAX_MESSAGE_SIZE))
        self._max_write_batch_size = int(reply.get("maxWriteBatchSize", DEFAULT_MAX_WRITE_BATCH_SIZE))
        lstm = reply.get("logicalSessionTimeoutMinutes")
        self._logical_session_timeout_minutes = int(lstm) if lstm is not None else None
        tv = reply.get("topologyVersion")
        self._topology_version = dict(tv) if tv is not None else None
        last_write = reply.get("lastWrite") or {}
        self._last_write_date = _seconds_since_epoch(last_write.get("lastWriteDate"))
        self._op_time = last_write.get("opTime")
        self._last_update_time = time.monotonic() if last_update_time is None else last_update_time
        self._round_trip_time = round_trip_time if known else None
        self._min_round_trip_time = min_round_trip_time if known else 0.0
        self._service_id = reply.get("serviceId")
        self._iscryptd = reply.get("iscryptd")
        self._cluster_time = reply.get("$clusterTime")
        self._hello_ok = bool(reply.get("helloOk", False))

    # -- constructors for the I/O layer -----------------------------------

    @classmethod
    def load_balancer(cls, address: Address) -> "ServerDescription":
        """The one description of a load-balanced topology: type LoadBalancer, every other field unset."""
        sd = cls(address)
        sd._server_type = ServerType.LoadBalancer
        return sd

    def to_unknown(self, error: Optional[BaseException] = None) -> "ServerDescription":
        """A default Unknown description for this address that keeps the topologyVersion."""
        unknown = ServerDescription(self._address, error=error)
        unknown._topology_version = self._topology_version
        return unknown

    def with_topology_version(self, topology_version: Optional[Mapping[str, Any]]) -> "ServerDescription":
        """A copy carrying ``topology_version`` (an Unknown from a state-change error stores the error's)."""
        copy = object.__new__(ServerDescription)
        for name in self.__slots__:
            setattr(copy, name, getattr(self, name))
        copy._topology_version = dict(topology_version) if topology_version is not None else None
        return copy

    # -- fields -----------------------------------------------------------

    @property
    def address(self) -> Address:
        return self._address

    @property
    def server_type(self) -> ServerType:
        return self._server_type

    @property
    def server_type_name(self) -> str:
        return self._server_type.name

    @property
    def hello(self) -> Mapping[str, Any]:
        """The reply this description was built from (empty for Unknown)."""
        return self._reply

    @property
    def hosts(self) -> FrozenSet[Address]:
        return frozenset(self._hosts)

    @property
    def passives(self) -> FrozenSet[Address]:
        return frozenset(self._passives)

    @property
    def arbiters(self) -> FrozenSet[Address]:
        return frozenset(self._arbiters)

    @property
    def all_hosts(self) -> FrozenSet[Address]:
        return frozenset(self._hosts + self._passives + self._arbiters)

    def member_addresses(self) -> Tuple[Address, ...]:
        """hosts, passives then arbiters, in reply order: the order new members are added in."""
        seen: List[Address] = []
        for address in self._hosts + self._passives + self._arbiters:
            if address not in seen:
                seen.append(address)
        return tuple(seen)

    @property
    def tags(self) -> Mapping[str, Any]:
        return self._tags

    @property
    def replica_set_name(self) -> Optional[str]:
        return self._set_name

    @property
    def set_version(self) -> Optional[int]:
        return self._set_version

    @property
    def election_id(self) -> Optional[ObjectId]:
        return self._election_id

    @property
    def election_tuple(self) -> Tuple[Optional[int], Optional[ObjectId]]:
        return self._set_version, self._election_id

    @property
    def primary(self) -> Optional[Address]:
        return self._primary

    @property
    def me(self) -> Optional[Address]:
        return self._me

    @property
    def min_wire_version(self) -> Optional[int]:
        return self._min_wire_version

    @property
    def max_wire_version(self) -> Optional[int]:
        return self._max_wire_version

    @property
    def max_bson_size(self) -> int:
        return self._max_bson_size

    @property
    def max_message_size(self) -> int:
        return self._max_message_size

    @property
    def max_write_batch_size(self) -> int:
        return self._max_write_batch_size

    @property
    def logical_session_timeout_minutes(self) -> Optional[int]:
        return self._logical_session_timeout_minutes

    @property
    def topology_version(self) -> Optional[Mapping[str, Any]]:
        return self._topology_version

    @property
    def last_write_date(self) -> Optional[float]:
        """The primary's wall clock time of the last write this member has, in seconds since the epoch."""
        return self._last_write_date

    @property
    def op_time(self) -> Any:
        return self._op_time

    @property
    def last_update_time(self) -> float:
        """Monotonic seconds when this description was made."""
        return self._last_update_time

    @property
    def round_trip_time(self) -> Optional[float]:
        """Average RTT in seconds; None while Unknown."""
        return self._round_trip_time

    @property
    def min_round_trip_time(self) -> float:
        return self._min_round_trip_time

    @property
    def error(self) -> Optional[BaseException]:
        return self._error

    @property
    def service_id(self) -> Optional[ObjectId]:
        return self._service_id

    @property
    def iscryptd(self) -> Optional[bool]:
        return self._iscryptd

    @property
    def cluster_time(self) -> Optional[Mapping[str, Any]]:
        return self._cluster_time

    @property
    def hello_ok(self) -> bool:
        return self._hello_ok

    # -- derived ----------------------------------------------------------

    @property
    def is_server_type_known(self) -> bool:
        return self._server_type is not ServerType.Unknown

    @property
    def is_writable(self) -> bool:
        return self._server_type in (ServerType.RSPrimary, ServerType.Standalone,
                                     ServerType.Mongos, ServerType.LoadBalancer)

    @property
    def is_readable(self) -> bool:
        return self._server_type is ServerType.RSSecondary or self.is_writable

    @property
    def mongos(self) -> bool:
        return self._server_type is ServerType.Mongos

    @property
    def retryable_writes_supported(self) -> bool:
        """Sessions plus a server type that accepts txnNumber (not a standalone)."""
        return (self._logical_session_timeout_minutes is not None
                and self._server_type in (ServerType.Mongos, ServerType.RSPrimary)
                ) or self._server_type is ServerType.LoadBalancer

    @property
    def retryable_reads_supported(self) -> bool:
        return (self._max_wire_version or 0) >= 6

    # -- equality ---------------------------------------------------------

    def _equality_key(self) -> Tuple[Any, ...]:
        """The SDAM fields marked (=): equal keys publish no ServerDescriptionChangedEvent."""
        return (
            self._address, _error_key(self._error), self._server_type, self._min_wire_version,
            self._max_wire_version, self._me, frozenset(self._hosts), frozenset(self._passives),
            frozenset(self._arbiters), tuple(sorted(self._tags.items())), self._set_name,
            self._election_id, self._set_version, self._primary,
            self._logical_session_timeout_minutes, _frozen(self._topology_version), self._iscryptd,
        )

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ServerDescription):
            return NotImplemented
        return self._equality_key() == other._equality_key()

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        extra = ""
        if self._error is not None:
            extra = f", error={self._error!r}"
        rtt = self._round_trip_time
        return (f"<ServerDescription {format_address(self._address)} "
                f"server_type: {self.server_type_name}, rtt: {rtt}{extra}>")


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value
