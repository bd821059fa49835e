"""The connection handshake (MongoDB Handshake spec) and ``open_connection``.

``hello`` goes over OP_MSG when a server API is declared or in load-balanced
mode; otherwise the legacy hello (``isMaster`` with ``helloOk``) goes over
OP_QUERY and OP_MSG is used from then on if maxWireVersion >= 6.
Authentication plugs in through the ``Authenticator`` protocol: it may add
``saslSupportedMechs``/``speculativeAuthenticate`` to the hello and is then
called with the reply to finish (or run) the conversation.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol

from greenmongo.errors import ConfigurationError, NetworkTimeout
from greenmongo.net.connect import open_stream
from greenmongo.net.connection import Connection
from greenmongo.net.metadata import client_metadata
from greenmongo.options.connection_settings import ConnectionSettings, server_api_fields
from greenmongo.sdam.address import Address
from greenmongo.sdam.server_description import check_hello
from greenmongo.wire.batching import DEFAULT_MAX_BSON_SIZE, DEFAULT_MAX_WRITE_BATCH_SIZE
from greenmongo.wire.compression import get_compressor, negotiate
from greenmongo.wire.header import DEFAULT_MAX_MESSAGE_SIZE
from greenmongo.wire.versions import OP_MSG_MIN_WIRE_VERSION

if TYPE_CHECKING:
    from greenmongo.net import ocsp  # imported with the first TLS connection (net.connect)

LOAD_BALANCER_UNSUPPORTED = ("Driver attempted to initialize in load balancing mode, but the server does not "
                             "support this mode.")


class Authenticator(Protocol):
    """What the handshake needs from authentication (greenmongo.auth provides it)."""

    def handshake_fields(self) -> Mapping[str, Any]:
        """Fields to add to the initial hello: ``saslSupportedMechs`` and/or ``speculativeAuthenticate``."""
        ...

    def authenticate(self, conn: Connection, hello_reply: Mapping[str, Any]) -> None:
        """Authenticate ``conn``, continuing from ``hello_reply['speculativeAuthenticate']`` if present."""
        ...


def uses_op_msg_handshake(settings: ConnectionSettings) -> bool:
    return settings.server_api is not None or settings.load_balanced


def build_hello(
    settings: ConnectionSettings,
    metadata: Mapping[str, Any],
    authenticator: Optional[Authenticator] = None,
) -> dict[str, Any]:
    """The initial handshake command (without ``$db``; it runs on ``admin``)."""
    if uses_op_msg_handshake(settings):
        command: dict[str, Any] = {"hello": 1}
    else:
        command = {"isMaster": 1, "helloOk": True}
    command["client"] = dict(metadata)
    command["compression"] = list(settings.compressors)
    if settings.load_balanced:
        command["loadBalanced"] = True
    if authenticator is not None:
        for key, value in authenticator.handshake_fields().items():
            if key not in ("saslSupportedMechs", "speculativeAuthenticate"):
                raise ConfigurationError(f"authenticator tried to add non-standard hello field {key!r}")
            command[key] = value
    command.update(server_api_fields(settings.server_api))
    return command


def apply_hello(conn: Connection, reply: Mapping[str, Any], *, via_op_msg: bool) -> None:
    """Record what the hello reply says about the server on ``conn``."""
    settings = conn.settings
    check_hello(reply)
    conn.hello = dict(reply)
    conn.max_wire_version = int(reply.get("maxWireVersion", 0))
    conn.min_wire_version = int(reply.get("minWireVersion", 0))
    conn.max_bson_size = int(reply.get("maxBsonObjectSize", DEFAULT_MAX_BSON_SIZE))
    conn.max_message_size = int(reply.get("maxMessageSizeBytes", DEFAULT_MAX_MESSAGE_SIZE))
    conn.max_write_batch_size = int(reply.get("maxWriteBatchSize", DEFAULT_MAX_WRITE_BATCH_SIZE))
    conn.supports_op_msg = via_op_msg or conn.max_wire_version >= OP_MSG_MIN_WIRE_VERSION
    conn.hello_ok = via_op_msg or bool(reply.get("helloOk", False))
    conn.service_id = reply.get("serviceId")
    if conn.service_id is None and settings.load_balanced and settings.service_id_from_process_id:
        conn.service_id = _process_id(reply)
    if settings.load_balanced and conn.service_id is None:
        raise ConfigurationError(LOAD_BALANCER_UNSUPPORTED)
    chosen = negotiate(settings.compressors, reply.get("compression") or ())
    conn.compressor = get_compressor(chosen, settings.zlib_compression_level) if chosen else None


def _process_id(reply: Mapping[str, Any]) -> Any:
    """``topologyVersion.processId`` of a hello reply, or None."""
    topology_version = reply.get("topologyVersion")
    return topology_version.get("processId") if isinstance(topology_version, Mapping) else None


def perform_handshake(
    conn: Connection,
    *,
    authenticator: Optional[Authenticator] = None,
    metadata: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Send the initial hello on a fresh connection, record the reply, then authenticate.

    Returns the hello reply. Closes ``conn`` if anything fails, as the spec requires.
    """
    settings = conn.settings
    if metadata is None:
        metadata = client_metadata(settings.appname, settings.driver_info)
    via_op_msg = uses_op_msg_handshake(settings)
    command = build_hello(settings, metadata, authenticator)
    ok = False
    try:
        conn.supports_op_msg = via_op_msg
        reply = conn.command("admin", command, apply_server_api=False)
        assert reply is not None  # an acknowledged command always has a reply
        apply_hello(conn, reply, via_op_msg=via_op_msg)
        if authenticator is not None:
            authenticator.authenticate(conn, reply)
        ok = True
        return reply
    finally:
        if not ok:
            conn.close("handshake failed")


def open_connection(
    address: Address,
    settings: Optional[ConnectionSettings] = None,
    *,
    authenticator: Optional[Authenticator] = None,
    conn_id: Optional[int] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    ocsp_cache: Optional[ocsp.OcspCache] = None,
    deadline: Optional[float] = None,
) -> Connection:
    """Connect, secure, handshake and authenticate: the pool's connection factory.

    The handshake and authentication run under connectTimeoutMS; afterwards
    the connection uses socketTimeoutMS. With ``deadline`` (monotonic: what is left of an
    operation's timeoutMS for server selection and checkout) TCP and TLS get
    min(connectTimeoutMS, what is left), and every handshake and authentication command what is left.
    ``ocsp_cache``: where TLS keeps OCSP answers (None: the process-wide ``ocsp.DEFAULT_CACHE``).
    """
    settings = settings or ConnectionSettings()
    connect_timeout = settings.connect_timeout
    if deadline is not None:
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise NetworkTimeout(f"{address[0]}:{address[1]}: no time left to connect (timeoutMS)")
        connect_timeout = remaining if connect_timeout is None else min(connect_timeout, remaining)
    stream = open_stream(address, settings, ocsp_cache=ocsp_cache, connect_timeout=connect_timeout)
    conn = Connection(stream, address, settings, conn_id=conn_id)
    try:
        if deadline is not None:
            conn.default_deadline = deadline
        else:
            conn.default_timeout = settings.connect_timeout
        perform_handshake(conn, authenticator=authenticator, metadata=metadata)
        conn.default_deadline = None
        conn.default_timeout = settings.socket_timeout
    except BaseException:
        conn.close("handshake failed")
        raise
    return conn
