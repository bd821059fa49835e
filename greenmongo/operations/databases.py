"""Database administration: listDatabases (Enumerating Databases spec) and dropDatabase.

listDatabases runs on ``admin`` against the primary and returns its
``databases`` array as a client-side cursor; ``name_only`` serves
``list_database_names``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.operations.arguments import validate_boolean, validate_is_mapping
from greenmongo.operations.base import Command, Operation, WireInfo
from greenmongo.operations.cursor_state import CursorState
from greenmongo.operations.indexes import _WritingCommand
from greenmongo.wire import reply_fields


class ListDatabasesOperation(Operation[CursorState]):
    """``listDatabases``: a retryable read whose result is a fake cursor over ``databases``."""

    name = "listDatabases"
    retryable = True

    def __init__(self, *, filter: Optional[Mapping[str, Any]] = None, name_only: Optional[bool] = None,
                 authorized_databases: Optional[bool] = None, comment: Any = None,
                 codec_options: Optional[CodecOptions] = None, extra: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__("admin", codec_options=codec_options)
        if filter is not None:
            validate_is_mapping("filter", filter)
        if name_only is not None:
            validate_boolean("name_only", name_only)
        if authorized_databases is not None:
            validate_boolean("authorized_databases", authorized_databases)
        self.filter = filter
        self.name_only = name_only
        self.authorized_databases = authorized_databases
        self.comment = comment
        self.extra = dict(extra or {})

    def build(self, wire: WireInfo) -> Command:
        body: dict[str, Any] = {"listDatabases": 1}
        if self.name_only is not None:
            body["nameOnly"] = self.name_only
        if self.filter is not None:
            body["filter"] = self.filter
        if self.authorized_databases is not None:
            body["authorizedDatabases"] = self.authorized_databases
        if self.comment is not None:
            body["comment"] = self.comment
        body.update(self.extra)
        return Command(self.dbname, body)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        if reply is None:
            raise ValueError("listDatabases is always acknowledged")
        self.check_reply(reply, wire)
        databases = reply_fields.documents(reply, "databases", document_class=self.codec_options.document_class)
        return CursorState.closed("admin.$cmd", list(databases), address=wire.address,
                                  codec_options=self.codec_options)


class DropDatabaseOperation(_WritingCommand):
    """``dropDatabase``; returns the reply."""

    name = "dropDatabase"

    def build(self, wire: WireInfo) -> Command:
        return self._finish_body({"dropDatabase": 1}, wire)
