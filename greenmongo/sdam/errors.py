"""Pure SDAM error-handling decisions: what an error means for the topology and the pool.

The I/O layer describes an error (:class:`ApplicationError`, or an exception
from a monitor check) and gets back a decision: the Unknown description to
feed through ``plan_update`` (if any), whether to clear the pool (for the
server or one serviceId), interrupt in-use connections, request an immediate
check or cancel the in-progress one. It applies the decision under the
topology lock, so clearing the pool stays synchronized with the update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from greenmongo.bson.objectid import ObjectId
from greenmongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    WriteConcernError,
)
from greenmongo.sdam.address import Address
from greenmongo.sdam.server_description import ServerDescription, compare_topology_versions
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.topology_type import TopologyType
from greenmongo.wire.versions import WIRE_4_2

#: "node is recovering" codes (SDAM).
RECOVERING_CODES = frozenset({11600, 11602, 13436, 189, 91})
#: "not writable primary" codes (SDAM).
NOT_WRITABLE_PRIMARY_CODES = frozenset({10107, 13435, 10058})
#: The "node is shutting down" subset of RECOVERING_CODES: these always clear the pool.
SHUTDOWN_CODES = frozenset({11600, 91})

#: Client Backpressure / CMAP: labels the pool puts on network errors and timeouts while
#: establishing a connection (not DNS, non-I/O TLS, SOCKS5 or auth failures). SDAM leaves the
#: server and its pool alone for such errors: the server may just be shedding connections.
SYSTEM_OVERLOADED_ERROR = "SystemOverloadedError"
RETRYABLE_ERROR = "RetryableError"
BACKPRESSURE_LABELS = (SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR)

COMMAND = "command"
NETWORK = "network"
TIMEOUT = "timeout"


# -- classifying server replies -------------------------------------------

def is_recovering(message: Optional[str], code: Optional[int]) -> bool:
    """A "node is recovering" error; the message is consulted only when there is no code."""
    if code:
        return code in RECOVERING_CODES
    message = message or ""
    return "not master or secondary" in message or "node is recovering" in message


def is_not_writable_primary(message: Optional[str], code: Optional[int]) -> bool:
    """A "not writable primary" error; the message is consulted only when there is no code."""
    if code:
        return code in NOT_WRITABLE_PRIMARY_CODES
    if is_recovering(message, None):
        return False
    return "not master" in (message or "")


def is_shutdown(code: Optional[int]) -> bool:
    return bool(code) and code in SHUTDOWN_CODES


def is_state_change_error(message: Optional[str], code: Optional[int]) -> bool:
    return is_recovering(message, code) or is_not_writable_primary(message, code)


def reply_error(reply: Optional[Mapping[str, Any]]) -> Optional[Tuple[Optional[int], str]]:
    """(code, errmsg) SDAM must look at in a command reply, or None.

    The top-level error of an ``ok: 0`` reply, else the writeConcernError;
    errors inside ``writeErrors`` are never state-change errors.
    """
    if not reply:
        return None
    if not reply.get("ok"):
        return reply.get("code"), str(reply.get("errmsg", reply.get("$err", "")))
    wce = reply.get("writeConcernError")
    if isinstance(wce, Mapping):
        return wce.get("code"), str(wce.get("errmsg", ""))
    return None


def add_backpressure_labels(error: BaseException) -> None:
    """Label a connection-establishment network error or timeout as the CMAP spec requires."""
    add = getattr(error, "_add_error_label", None)
    if add is not None:
        for label in BACKPRESSURE_LABELS:
            add(label)


def is_system_overloaded(error: Optional[BaseException]) -> bool:
    has = getattr(error, "has_error_label", None)
    return bool(has is not None and has(SYSTEM_OVERLOADED_ERROR))


# -- application errors ----------------------------------------------------

@dataclass(frozen=True)
class ApplicationError:
    """An error an application operation hit on a pooled connection, as SDAM needs to see it."""

    address: Address
    kind: str  # COMMAND, NETWORK or TIMEOUT
    generation: int  # the connection's pool generation (the pool's, for a connect that failed)
    completed_handshake: bool
    max_wire_version: Optional[int] = None
    reply: Optional[Mapping[str, Any]] = None  # the command reply, for COMMAND
    is_auth_error: bool = False
    service_id: Optional[ObjectId] = None
    error: Optional[BaseException] = None  # the exception, kept in the Unknown description

    @classmethod
    def from_exception(
        cls,
        address: Address,
        error: BaseException,
        *,
        generation: int,
        completed_handshake: bool,
        max_wire_version: Optional[int] = None,
        is_auth_error: bool = False,
        service_id: Optional[ObjectId] = None,
        reply: Optional[Mapping[str, Any]] = None,
    ) -> "ApplicationError":
        """Classify a greenmongo exception: NetworkTimeout, other ConnectionFailure, OperationFailure.

        ``reply`` (the whole command reply, when the caller has it) takes
        precedence over what the exception carries; it is where a
        writeConcernError's topologyVersion lives.
        """
        kind, found = _classify(error)
        return cls(address, kind, generation, completed_handshake, max_wire_version,
                   reply if reply is not None else found, is_auth_error, service_id, error)


def _classify(error: BaseException) -> Tuple[str, Optional[Mapping[str, Any]]]:
    reply: Optional[Mapping[str, Any]] = None
    if isinstance(error, NetworkTimeout):
        kind = TIMEOUT
    elif isinstance(error, NotPrimaryError):
        kind = COMMAND
        reply = _reply_of(error.details) or {"ok": 0, "code": 10107, "errmsg": str(error)}
    elif isinstance(error, ConnectionFailure):
        kind = NETWORK
    elif isinstance(error, WriteConcernError):
        kind = COMMAND
        reply = {"ok": 1, "writeConcernError": dict(error.details or {"code": error.code})}
    elif isinstance(error, OperationFailure):
        kind = COMMAND
        details = dict(error.details or {"errmsg": str(error)})
        if error.code is not None:
            details.setdefault("code", error.code)
        details.setdefault("ok", 0)
        reply = details
    else:
        kind = NETWORK
    return kind, reply


def _reply_of(details: Any) -> Optional[Mapping[str, Any]]:
    if isinstance(details, Mapping):
        return details
    if isinstance(details, list) and details and isinstance(details[-1], Mapping):
        return details[-1]
    return None


@dataclass(frozen=True)
class ErrorDecision:
    """What to do about one error; every field false/None means "nothing"."""

    ignored: bool = False  # stale (generation or topologyVersion) or not a topology-changing error
    unknown: Optional[ServerDescription] = None  # pass to plan_update, then clear the pool
    clear_pool: bool = False
    service_id: Optional[ObjectId] = None  # clear only this serviceId's connections (load-balanced mode)
    request_check: bool = False  # wake the server's monitor now (state-change errors)
    cancel_check: bool = False  # interrupt the monitor's in-progress check (network errors)


IGNORE = ErrorDecision(ignored=True)


def is_stale_error(description: TopologyDescription, pool_generation: int, error: ApplicationError) -> bool:
    """SDAM isStaleError: an older connection generation, or a topologyVersion not newer than ours."""
    current = description.get(error.address)
    if current is None:
        return True  # the server left the topology while the operation ran
    if error.generation < pool_generation:
        return True
    incoming = (error.reply or {}).get("topologyVersion") if error.kind == COMMAND else None
    return compare_topology_versions(current.topology_version, incoming) >= 0


def decide_application_error(description: TopologyDescription, pool_generation: int,
                             error: ApplicationError) -> ErrorDecision:
    """SDAM "Error handling pseudocode" (handleError), as a decision.

    ``pool_generation`` is the current generation of the server's pool (of the
    serviceId's connections, in load-balanced mode).
    """
    load_balanced = description.topology_type is TopologyType.LoadBalanced
    if load_balanced and not error.completed_handshake and error.service_id is None:
        return IGNORE  # Load Balancer spec: errors before the hello completed (no service yet) are ignored
    if is_stale_error(description, pool_generation, error):
        return IGNORE

    if error.kind == COMMAND:
        found = reply_error(error.reply)
        if found is not None and is_state_change_error(found[1], found[0]):
            code = found[0]
            unknown = None
            if not load_balanced:
                topology_version = (error.reply or {}).get("topologyVersion")
                unknown = ServerDescription(error.address, error=error.error or _describe(found)
                                            ).with_topology_version(topology_version)
            old_server = error.max_wire_version is not None and error.max_wire_version < WIRE_4_2
            return ErrorDecision(
                unknown=unknown,
                clear_pool=is_shutdown(code) or old_server,
                service_id=error.service_id if load_balanced else None,
                request_check=not load_balanced,
            )
        if not (error.is_auth_error and not error.completed_handshake):
            return IGNORE
    elif error.kind == TIMEOUT and error.completed_handshake:
        return IGNORE  # a slow operation, not an unavailable server

    # A network error, or a timeout / auth failure before the handshake completed.
    if error.kind != COMMAND and is_system_overloaded(error.error):
        return IGNORE  # backpressure: keep the server and its pool as they are
    if load_balanced:
        if error.service_id is None:
            return IGNORE  # failed before the handshake named the service: no pool to clear
        return ErrorDecision(clear_pool=True, service_id=error.service_id)
    failure = error.error if error.error is not None else AutoReconnect(f"{error.kind} error")
    return ErrorDecision(unknown=ServerDescription(error.address, error=failure), clear_pool=True,
                         cancel_check=True)


def _describe(found: Tuple[Optional[int], str]) -> NotPrimaryError:
    code, message = found
    return NotPrimaryError(message, {"ok": 0, "code": code, "errmsg": message})


# -- monitor checks --------------------------------------------------------

@dataclass(frozen=True)
class CheckFailureDecision:
    """Server Monitoring "Network or command error during server check"."""

    unknown: ServerDescription  # pass to plan_update, then clear the pool
    clear_pool: bool
    interrupt_in_use: bool  # a network timeout: in-use connections are presumed dead too
    retry_immediately: bool  # a network error on a server that was known: check again without sleeping


def decide_check_failure(previous: ServerDescription, error: BaseException) -> CheckFailureDecision:
    """A failed hello from the monitor: mark Unknown, clear the pool, maybe retry at once."""
    network = isinstance(error, ConnectionFailure) and not isinstance(error, NotPrimaryError)
    return CheckFailureDecision(
        unknown=ServerDescription(previous.address, error=error),
        clear_pool=True,
        interrupt_in_use=isinstance(error, NetworkTimeout),
        retry_immediately=network and previous.is_server_type_known,
    )


def check_again_immediately(new: ServerDescription, *, streaming_enabled: bool,
                            connection_streaming: bool) -> bool:
    """After a successful check: a streaming-capable server is read again without waiting.

    (After a failed check use ``CheckFailureDecision.retry_immediately``.)
    """
    supports_streaming = new.is_server_type_known and new.topology_version is not None
    return streaming_enabled and (supports_streaming or connection_streaming)
