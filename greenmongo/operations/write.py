"""Single-statement writes: insert_one, update_one/update_many/replace_one, delete_one/delete_many.

Each sends one ``insert``/``update``/``delete`` command whose statement goes
in an OP_MSG document sequence (``documents``/``updates``/``deletes``). A w=0
write is sent with ``moreToCome`` and yields an unacknowledged result. Options
the server cannot report on for an unacknowledged write are refused here, as
the CRUD spec requires (a hint before 4.2 for updates / 4.4 for deletes, a
sort before 8.0).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.errors import ConfigurationError
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    sort_document,
    validate_array_filters,
    validate_boolean,
    validate_is_document_type,
    validate_is_mapping,
    validate_replacement,
    validate_update,
)
from greenmongo.operations.base import (
    WIRE_4_2,
    WIRE_4_4,
    WIRE_8_0,
    Command,
    DocumentSequence,
    Operation,
    WireInfo,
    raw_data_field,
    reply_codec_options,
    write_concern_field,
)
from greenmongo.operations.replies import check_write_reply
from greenmongo.operations.requests import delete_statement, ensure_id, update_statement
from greenmongo.operations.results import DeleteResult, InsertOneResult, UpdateResult
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern


def check_unacknowledged_options(kind: str, wire: WireInfo, *, hint: bool = False, sort: bool = False) -> None:
    """Client-side errors for options an unacknowledged write cannot have on this server (CRUD spec)."""
    if kind == "update" and hint and wire.max_wire_version < WIRE_4_2:
        raise ConfigurationError("Must be connected to MongoDB 4.2+ to use hint on unacknowledged update "
                                 "commands.")
    if kind == "delete" and hint and wire.max_wire_version < WIRE_4_4:
        raise ConfigurationError("Must be connected to MongoDB 4.4+ to use hint on unacknowledged delete "
                                 "commands.")
    if kind == "update" and sort and wire.max_wire_version < WIRE_8_0:
        raise ConfigurationError("Must be connected to MongoDB 8.0+ to use sort on unacknowledged update "
                                 "commands.")


def validate_write_options(bypass_document_validation: Optional[bool], let: Optional[Mapping[str, Any]]) -> None:
    """PyMongo's checks of the options every write command (single, bulk, client bulk) shares."""
    if bypass_document_validation is not None:
        validate_boolean("bypass_document_validation", bypass_document_validation)
    if let is not None:
        validate_is_mapping("let", let)


def write_option_fields(body: dict[str, Any], bypass_document_validation: Optional[bool], comment: Any,
                        let: Optional[Mapping[str, Any]]) -> None:
    """``bypassDocumentValidation``, ``comment`` and ``let``, each only when given."""
    if bypass_document_validation is not None:
        body["bypassDocumentValidation"] = bypass_document_validation
    if comment is not None:
        body["comment"] = comment
    if let is not None:
        body["let"] = let


def write_command_body(kind: str, collection: str, ordered: bool, write_concern: WriteConcern, wire: WireInfo, *,
                       bypass_document_validation: Optional[bool], comment: Any, let: Optional[Mapping[str, Any]],
                       raw_data: Optional[bool]) -> dict[str, Any]:
    """An ``insert``/``update``/``delete`` command's fields around its document sequence."""
    body: dict[str, Any] = {kind: collection, "ordered": ordered}
    write_concern_field(body, write_concern)
    write_option_fields(body, bypass_document_validation, comment, let)
    raw_data_field(body, raw_data, wire)
    return body


class WriteCommandOperation(Operation[Any]):
    """Shared fields of insert/update/delete: write concern, comment, let, bypass, rawData."""

    is_write = True
    supports_write_concern = True
    statement_field = ""

    def __init__(self, dbname: str, collection: str, *, write_concern: Optional[WriteConcern] = None,
                 bypass_document_validation: Optional[bool] = None, comment: Any = None,
                 let: Optional[Mapping[str, Any]] = None, codec_options: Optional[CodecOptions] = None,
                 raw_data: Optional[bool] = None) -> None:
        super().__init__(dbname, codec_options=reply_codec_options(codec_options))
        validate_write_options(bypass_document_validation, let)
        self.collection = collection
        self.write_concern = write_concern or DEFAULT_WRITE_CONCERN
        self.bypass_document_validation = bypass_document_validation
        self.comment = comment
        self.let = let
        self.raw_data = raw_data
        self.encode_options = codec_options or self.codec_options

    @property
    def acknowledged(self) -> bool:
        return self.write_concern.acknowledged

    def _body(self, wire: WireInfo) -> dict[str, Any]:
        return write_command_body(self.name, self.collection, True, self.write_concern, wire,
                                  bypass_document_validation=self.bypass_document_validation,
                                  comment=self.comment, let=self.let, raw_data=self.raw_data)

    def _command(self, wire: WireInfo, statement: Mapping[str, Any]) -> Command:
        sequence = DocumentSequence.encode(self.statement_field, [statement], self.encode_options)
        return Command(self.dbname, self._body(wire), [sequence], acknowledged=self.acknowledged)

    def _checked(self, reply: Mapping[str, Any], wire: WireInfo) -> Mapping[str, Any]:
        self.check_reply(reply, wire)
        check_write_reply(reply, statements=1)
        return reply


class InsertOneOperation(WriteCommandOperation):
    """``insert`` of one document; the document gains an ``_id`` if it has none (as with PyMongo)."""

    name = "insert"
    retryable = True
    statement_field = "documents"

    def __init__(self, dbname: str, collection: str, document: Any, **options: Any) -> None:
        validate_is_document_type("document", document)
        super().__init__(dbname, collection, **options)
        self.document = document
        self.inserted_id = ensure_id(document)

    def build(self, wire: WireInfo) -> Command:
        return self._command(wire, self.document)

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> InsertOneResult:
        if reply is None:
            return InsertOneResult(self.inserted_id, False)
        self._checked(reply, wire)
        return InsertOneResult(self.inserted_id, True)


class UpdateOperation(WriteCommandOperation):
    """``update`` of one statement: update_one/update_many (operators or pipeline) or replace_one."""

    name = "update"
    statement_field = "updates"

    def __init__(self, dbname: str, collection: str, filter: Mapping[str, Any], update: Any, *,
                 multi: bool = False, replacement: bool = False, upsert: Optional[bool] = None,
                 collation: Any = None, array_filters: Optional[list[Mapping[str, Any]]] = None, hint: Any = None,
                 sort: Any = None, **options: Any) -> None:
        validate_is_mapping("filter", filter)
        if replacement:
            validate_replacement(update)
        else:
            validate_update(update)
        if upsert is not None:
            validate_boolean("upsert", upsert)
        if multi and sort is not None:
            raise ValueError("sort is only supported for single-document updates")
        super().__init__(dbname, collection, **options)
        self.filter = filter
        self.update = update
        self.multi = multi
        self.upsert = upsert
        self.collation = collation_document(collation)
        self.array_filters = validate_array_filters(array_filters)
        self.hint = hint_value(hint)
        self.sort = sort_document(sort)
        self.retryable = not multi

    def statement(self) -> dict[str, Any]:
        return update_statement(self.filter, self.update, multi=self.multi, upsert=self.upsert,
                                collation=self.collation, array_filters=self.array_filters, hint=self.hint,
                                sort=self.sort)

    def build(self, wire: WireInfo) -> Command:
        if not self.acknowledged:
            check_unacknowledged_options("update", wire, hint=self.hint is not None, sort=self.sort is not None)
        return self._command(wire, self.statement())

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> UpdateResult:
        if reply is None:
            return UpdateResult(None, False)
        raw = dict(self._checked(reply, wire))
        upserted = raw.get("upserted")
        if upserted:
            raw["upserted"] = upserted[0]["_id"]
        raw["updatedExisting"] = bool(raw.get("n")) and "upserted" not in raw
        return UpdateResult(raw, True)


class DeleteOperation(WriteCommandOperation):
    """``delete`` of one statement: delete_one (limit 1) or delete_many (limit 0)."""

    name = "delete"
    statement_field = "deletes"

    def __init__(self, dbname: str, collection: str, filter: Mapping[str, Any], *, multi: bool = False,
                 collation: Any = None, hint: Any = None, **options: Any) -> None:
        validate_is_mapping("filter", filter)
        super().__init__(dbname, collection, **options)
        self.filter = filter
        self.multi = multi
        self.collation = collation_document(collation)
        self.hint = hint_value(hint)
        self.retryable = not multi

    def statement(self) -> dict[str, Any]:
        return delete_statement(self.filter, multi=self.multi, collation=self.collation, hint=self.hint)

    def build(self, wire: WireInfo) -> Command:
        if not self.acknowledged:
            check_unacknowledged_options("delete", wire, hint=self.hint is not None)
        return self._command(wire, self.statement())

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> DeleteResult:
        if reply is None:
            return DeleteResult(None, False)
        return DeleteResult(self._checked(reply, wire), True)
