"""Database.command / Database.cursor_command (Run Command spec).

The user's command is sent as written: no read or write concern is added,
read preference defaults to primary, and it is never retried. Only the
executor's session, cluster-time and ``$readPreference`` fields join it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Union

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import InvalidOperation
from greenmongo.operations.arguments import validate_is_mapping, validate_optional_non_negative_integer
from greenmongo.operations.base import Command, Operation, WireInfo
from greenmongo.operations.cursor_state import CursorState
from greenmongo.options.read_preferences import ServerMode


def command_document(command: Union[str, Mapping[str, Any]], value: Any = 1, comment: Any = None,
                     **kwargs: Any) -> dict[str, Any]:
    """PyMongo's ``command("ping")`` / ``command({"ping": 1}, **kwargs)`` spellings, without mutating input."""
    if isinstance(command, str):
        document: dict[str, Any] = {command: value}
    else:
        validate_is_mapping("command", command)
        document = dict(command)
    document.update(kwargs)
    if comment is not None:
        document["comment"] = comment
    if not document:
        raise ValueError("command must not be empty")
    return document


class RunCommandOperation(Operation[Mapping[str, Any]]):
    """An arbitrary command; ``check=False`` returns ``ok: 0`` replies instead of raising.

    The user's document is sent as written: under a timeoutMS its maxTimeMS is replaced by the
    timeout's (and kept when the timeout has no limit), its writeConcern left alone.
    """

    session_read_concern = "snapshot"
    deprecated_max_time_ms = False

    def __init__(self, dbname: str, command: Mapping[str, Any], *, read_preference: Optional[ServerMode] = None,
                 codec_options: Optional[CodecOptions] = None, check: bool = True,
                 allowable_errors: Optional[Iterable[Union[int, str]]] = None) -> None:
        super().__init__(dbname, read_preference=read_preference, codec_options=codec_options)
        self.command = dict(command)
        if not self.command:
            raise ValueError("command must not be empty")
        self.check = check
        self.allowable_errors = tuple(allowable_errors or ())

    @property
    def name(self) -> str:  # type: ignore[override]
        return next(iter(self.command))

    def build(self, wire: WireInfo) -> Command:
        return Command(self.dbname, dict(self.command))

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        if reply is None:
            return {"ok": 1}
        if self.check:
            self.check_reply(reply, wire)
        return reply


class RunCursorCommandOperation(RunCommandOperation):
    """A command that returns a cursor (``Database.cursor_command``)."""

    def __init__(self, dbname: str, command: Mapping[str, Any], *, batch_size: Optional[int] = None,
                 max_await_time_ms: Optional[int] = None, comment: Any = None, **options: Any) -> None:
        super().__init__(dbname, command, **options)
        validate_optional_non_negative_integer("batch_size", batch_size)
        validate_optional_non_negative_integer("max_await_time_ms", max_await_time_ms)
        self.batch_size = batch_size
        self.max_await_time_ms = max_await_time_ms
        self.comment = comment if comment is not None else self.command.get("comment")

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:  # type: ignore[override]
        if reply is None:
            raise ValueError("a cursor command is always acknowledged")
        self.check_reply(reply, wire)
        if not isinstance(reply.get("cursor"), Mapping):
            raise InvalidOperation("Command does not return a cursor.")
        return CursorState.from_reply(reply, default_namespace=f"{self.dbname}.$cmd", address=wire.address,
                                      batch_size=self.batch_size or 0, get_more_max_time_ms=self.max_await_time_ms,
                                      comment=self.comment, codec_options=self.codec_options)
