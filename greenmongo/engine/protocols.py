"""The typed seams between the engine and the layers around it.

The executor runs operations against whatever satisfies these: tests hand it fakes, the client
hands it a Topology whose servers check out pooled ``net.connection.Connection`` objects. Each
Protocol names exactly what the engine uses, so mypy holds both sides to it.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    ContextManager,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

from greenmongo.sdam.address import Address

if TYPE_CHECKING:
    from greenmongo.bson.codec_options import CodecOptions
    from greenmongo.bson.objectid import ObjectId
    from greenmongo.engine.server_session import ServerSession
    from greenmongo.engine.session_state import SessionState
    from greenmongo.operations.base import Command, WireInfo
    from greenmongo.options.connection_settings import ConnectionSettings
    from greenmongo.options.read_preferences import ServerMode
    from greenmongo.sdam.server_description import ServerDescription
    from greenmongo.sdam.topology_description import TopologyDescription

__all__ = ["Address", "AutoEncryption", "ClusterTimeSource", "CommandConnection", "PinnedConnection", "SelectedServer",
           "ServerSelector", "ServerSessionSource", "SessionSource"]


class ServerSessionSource(Protocol):
    """Where a session takes its server session from and gives it back (the client's LIFO pool)."""

    def take_server_session(self) -> "ServerSession": ...

    def return_server_session(self, server_session: "ServerSession") -> None: ...


class SessionSource(ServerSessionSource, Protocol):
    """What the executor asks for an implicit session when an operation has no explicit one."""

    def implicit_session(self) -> "SessionState": ...


class ClusterTimeSource(Protocol):
    """The client's $clusterTime gossip: the highest cluster time seen, advanced by every reply."""

    @property
    def cluster_time(self) -> Optional[Mapping[str, Any]]: ...

    def advance(self, cluster_time: Mapping[str, Any]) -> None: ...


class CommandConnection(Protocol):
    """A checked-out connection as the executor uses it (``net.connection.Connection``)."""

    id: int
    address: Address
    service_id: Optional["ObjectId"]
    settings: "ConnectionSettings"
    max_wire_version: int
    max_bson_size: int
    max_message_size: int
    max_write_batch_size: int

    @property
    def hello(self) -> Optional[Mapping[str, Any]]: ...

    def command(self, dbname: str, spec: Mapping[str, Any], *,
                sequences: Optional[Mapping[str, Sequence[Any]]] = None,
                codec_options: Optional["CodecOptions"] = None,
                check: bool = True, unacknowledged: bool = False, timeout: Any = ..., apply_server_api: bool = True,
                request_id: Optional[int] = None, deadline: Optional[float] = None,
                deadline_timeout: Optional[float] = None, lazy_batches: bool = False) -> Optional[dict[str, Any]]: ...

    def close(self, reason: Optional[str] = None) -> None: ...


class PinnedConnection(Protocol):
    """A connection a cursor or transaction keeps between commands (load-balanced mode)."""

    conn: Any
    kind: str
    released: bool

    @property
    def broken(self) -> bool: ...

    def release(self) -> None: ...


class SelectedServer(Protocol):
    """A server chosen by selection: check out a connection, report errors, then end the operation."""

    @property
    def address(self) -> Address: ...

    @property
    def description(self) -> "ServerDescription": ...

    def checkout(self, deadline: Optional[float] = None) -> ContextManager[CommandConnection]: ...

    def check_out(self, deadline: Optional[float] = None, use: Optional[str] = None) -> Any:
        """A connection of this server's pool (establishment errors already reported to SDAM), counted as in
        use for ``use`` ("cursor", "transaction", None: other) until it is checked in."""

    def check_in(self, conn: Any) -> None: ...

    def pin(self, conn: Any, kind: str) -> "PinnedConnection":
        """Keep ``conn`` checked out for a cursor or a transaction (``kind``) until the pin is released."""

    def handle_error(self, error: BaseException, conn: Any = None, *,
                     reply: Optional[Mapping[str, Any]] = None) -> object:
        """``conn``: the connection this server's ``checkout`` gave (its own type), or None."""

    def end_operation(self) -> None: ...


class ServerSelector(Protocol):
    """The topology as the executor uses it: server selection and the current description."""

    @property
    def description(self) -> "TopologyDescription": ...

    @property
    def topology_id(self) -> Any: ...

    @property
    def selection_timeout(self) -> float: ...

    def select_server(self, read_preference: "ServerMode", *, is_write: bool = False,
                      deprioritized: Tuple[Address, ...] = (), operation: Optional[str] = None,
                      deadline: Optional[float] = None) -> SelectedServer: ...

    def select_server_by_address(self, address: Address, *, operation: Optional[str] = None,
                                 deadline: Optional[float] = None) -> SelectedServer: ...


class AutoEncryption(Protocol):
    """What the executor asks of automatic encryption (``crypt.auto.AutoEncrypter``): the rules that are
    encryption's (batch size, how replies are read and shown) stay there."""

    #: How the reply is read off the wire: raw, for ``shown_reply`` and ``decrypt_reply``.
    reply_codec_options: "CodecOptions"

    def batch_wire_info(self, wire: "WireInfo") -> "WireInfo": ...

    def encrypt_command(self, command: "Command") -> "Command": ...

    def shown_reply(self, raw: Any) -> Optional[Mapping[str, Any]]: ...

    def decrypt_reply(self, raw: Any, codec_options: "CodecOptions") -> Optional[Mapping[str, Any]]: ...

    def close(self) -> None: ...
