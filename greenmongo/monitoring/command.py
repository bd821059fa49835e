"""Command monitoring (Command Logging and Monitoring spec): events, listener base, redaction.

The executor builds one CommandStartedEvent per command it sends and exactly
one CommandSucceededEvent or CommandFailedEvent for it, with the same
``request_id``; bulk writes share one ``operation_id``. It passes the full
command and reply: the events redact sensitive ones themselves (the
``command``/``reply`` of authentication commands, and of hello/legacy hello
carrying ``speculativeAuthenticate``, become empty documents; a server error
from such a command keeps only ``code``, ``codeName`` and ``errorLabels``).
Durations are given as ``datetime.timedelta`` (or float seconds) and exposed
as ``duration_micros``, as in PyMongo.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Iterable, Mapping, Optional, Union

from greenmongo.errors import OperationFailure
from greenmongo.monitoring.topology import _EventListener

_LOGGER = logging.getLogger("greenmongo.command")

#: Commands whose documents never reach listeners or logs (compared case-insensitively).
SENSITIVE_COMMANDS = frozenset({"authenticate", "saslstart", "saslcontinue", "getnonce", "createuser",
                                "updateuser", "copydbgetnonce", "copydbsaslstart", "copydb"})
HELLO_COMMANDS = frozenset({"hello", "ismaster"})
REDACTED_FAILURE_FIELDS = ("code", "codeName", "errorLabels")

Duration = Union[datetime.timedelta, float, int]


def is_sensitive_command(command_name: str, document: Optional[Mapping[str, Any]] = None,
                         speculative_hello: bool = False) -> bool:
    """True for the spec's sensitive commands, and for hello/legacy hello with speculativeAuthenticate.

    ``document`` is the command (or its reply); ``speculative_hello`` says the
    command carried speculativeAuthenticate when only the reply is at hand.
    """
    name = command_name.lower()
    if name in SENSITIVE_COMMANDS:
        return True
    if name in HELLO_COMMANDS:
        return speculative_hello or (document is not None and "speculativeAuthenticate" in document)
    return False


def redact_command(command_name: str, command: Mapping[str, Any]) -> Mapping[str, Any]:
    return {} if is_sensitive_command(command_name, command) else command


def redact_reply(command_name: str, reply: Mapping[str, Any], speculative_hello: bool = False) -> Mapping[str, Any]:
    return {} if is_sensitive_command(command_name, reply, speculative_hello) else reply


def redact_failure(failure: Mapping[str, Any]) -> dict[str, Any]:
    """A server error document reduced to the fields the spec lets through."""
    return {key: failure[key] for key in REDACTED_FAILURE_FIELDS if key in failure}


def failure_document(error: BaseException) -> dict[str, Any]:
    """``CommandFailedEvent.failure`` for an exception: the server's reply, or ``{errmsg, errtype}``."""
    details = getattr(error, "details", None)
    if isinstance(details, Mapping) and details:
        return dict(details)
    return {"errmsg": str(error), "errtype": type(error).__name__}


def is_server_error(error: BaseException) -> bool:
    """True when the failure came from a server reply (so redaction applies), not from the network."""
    return isinstance(error, OperationFailure)


def to_micros(duration: Duration) -> int:
    if isinstance(duration, datetime.timedelta):
        return (duration.days * 86400 + duration.seconds) * 1_000_000 + duration.microseconds
    return int(round(float(duration) * 1_000_000))


class CommandListener(_EventListener):
    """Subclass and override ``started``, ``succeeded`` and ``failed``."""

    def started(self, event: "CommandStartedEvent") -> None:
        raise NotImplementedError

    def succeeded(self, event: "CommandSucceededEvent") -> None:
        raise NotImplementedError

    def failed(self, event: "CommandFailedEvent") -> None:
        raise NotImplementedError


class _CommandEvent:
    __slots__ = ("__command_name", "__request_id", "__connection_id", "__operation_id", "__service_id",
                 "__database_name", "__server_connection_id")

    def __init__(self, command_name: str, request_id: int, connection_id: Any, operation_id: Optional[int],
                 service_id: Any = None, database_name: str = "",
                 server_connection_id: Optional[int] = None) -> None:
        self.__command_name = command_name
        self.__request_id = request_id
        self.__connection_id = connection_id
        self.__operation_id = operation_id
        self.__service_id = service_id
        self.__database_name = database_name
        self.__server_connection_id = server_connection_id

    @property
    def command_name(self) -> str:
        return self.__command_name

    @property
    def request_id(self) -> int:
        return self.__request_id

    @property
    def connection_id(self) -> Any:
        """The server address ``(host, port)`` the command went to."""
        return self.__connection_id

    @property
    def operation_id(self) -> Optional[int]:
        """Shared by every command of one operation (e.g. the batches of a bulk write)."""
        return self.__operation_id

    @property
    def service_id(self) -> Any:
        """The ObjectId of the service behind a load balancer, else None."""
        return self.__service_id

    @property
    def database_name(self) -> str:
        return self.__database_name

    @property
    def server_connection_id(self) -> Optional[int]:
        """The server's id for the connection (hello's ``connectionId``), when known."""
        return self.__server_connection_id


class CommandStartedEvent(_CommandEvent):
    """A command is about to be sent; ``command`` includes document sequences as arrays."""

    __slots__ = ("__cmd",)

    def __init__(self, command: Mapping[str, Any], database_name: str, request_id: int, connection_id: Any,
                 operation_id: Optional[int], service_id: Any = None,
                 server_connection_id: Optional[int] = None) -> None:
        if not command:
            raise ValueError(f"{command!r} is not a valid command")
        command_name = next(iter(command))
        super().__init__(command_name, request_id, connection_id, operation_id, service_id=service_id,
                         database_name=database_name, server_connection_id=server_connection_id)
        self.__cmd = redact_command(command_name, command)

    @property
    def command(self) -> Mapping[str, Any]:
        return self.__cmd

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.connection_id} db: {self.database_name!r}, command: "
                f"{self.command_name!r}, operation_id: {self.operation_id}, service_id: {self.service_id}, "
                f"server_connection_id: {self.server_connection_id}>")


class CommandSucceededEvent(_CommandEvent):
    """The server answered ``ok: 1`` (write errors included); an unacknowledged write reports ``{ok: 1}``."""

    __slots__ = ("__duration_micros", "__reply")

    def __init__(self, duration: Duration, reply: Mapping[str, Any], command_name: str, request_id: int,
                 connection_id: Any, operation_id: Optional[int], service_id: Any = None,
                 speculative_hello: bool = False, database_name: str = "",
                 server_connection_id: Optional[int] = None) -> None:
        super().__init__(command_name, request_id, connection_id, operation_id, service_id=service_id,
                         database_name=database_name, server_connection_id=server_connection_id)
        self.__duration_micros = to_micros(duration)
        self.__reply = redact_reply(command_name, reply, speculative_hello)

    @property
    def duration_micros(self) -> int:
        return self.__duration_micros

    @property
    def reply(self) -> Mapping[str, Any]:
        return self.__reply

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.connection_id} db: {self.database_name!r}, command: "
                f"{self.command_name!r}, operation_id: {self.operation_id}, duration_micros: "
                f"{self.duration_micros}, service_id: {self.service_id}, server_connection_id: "
                f"{self.server_connection_id}>")


class CommandFailedEvent(_CommandEvent):
    """The command failed: ``ok: 0`` from the server, or an error sending or receiving it."""

    __slots__ = ("__duration_micros", "__failure")

    def __init__(self, duration: Duration, failure: Mapping[str, Any], command_name: str, request_id: int,
                 connection_id: Any, operation_id: Optional[int], service_id: Any = None,
                 database_name: str = "", server_connection_id: Optional[int] = None, *,
                 is_server_side_error: bool = True, speculative_hello: bool = False) -> None:
        super().__init__(command_name, request_id, connection_id, operation_id, service_id=service_id,
                         database_name=database_name, server_connection_id=server_connection_id)
        self.__duration_micros = to_micros(duration)
        if is_server_side_error and is_sensitive_command(command_name, None, speculative_hello):
            failure = redact_failure(failure)
        self.__failure = failure

    @classmethod
    def from_exception(cls, duration: Duration, error: BaseException, command_name: str, request_id: int,
                       connection_id: Any, operation_id: Optional[int], **kwargs: Any) -> "CommandFailedEvent":
        """The event for ``error``, its failure document redacted if the command was sensitive."""
        return cls(duration, failure_document(error), command_name, request_id, connection_id, operation_id,
                   is_server_side_error=is_server_error(error), **kwargs)

    @property
    def duration_micros(self) -> int:
        return self.__duration_micros

    @property
    def failure(self) -> Mapping[str, Any]:
        return self.__failure

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.connection_id} db: {self.database_name!r}, command: "
                f"{self.command_name!r}, operation_id: {self.operation_id}, duration_micros: "
                f"{self.duration_micros}, failure: {self.failure!r}, service_id: {self.service_id}, "
                f"server_connection_id: {self.server_connection_id}>")


_METHODS = {CommandStartedEvent: "started", CommandSucceededEvent: "succeeded", CommandFailedEvent: "failed"}


def publish(listeners: Iterable[Any], event: _CommandEvent) -> None:
    """Deliver ``event`` to each CommandListener; one that raises is logged and skipped."""
    method = _METHODS[type(event)]
    for listener in listeners:
        if isinstance(listener, CommandListener):
            try:
                getattr(listener, method)(event)
            except Exception:
                _LOGGER.exception("command listener %r raised on %r", listener, event)


__all__ = ["CommandFailedEvent", "CommandListener", "CommandStartedEvent", "CommandSucceededEvent",
           "failure_document", "is_sensitive_command", "publish", "redact_command", "redact_failure",
           "redact_reply"]
