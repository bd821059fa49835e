"""Cursor (``Collection.find``) and RawBatchCursor (``find_raw_batches``), with PyMongo's builders.

A Cursor is lazy: ``find()`` only records the options, the find command goes out at the first
``next()`` and each getMore only when the buffered batch runs out. Builder methods
(``sort``, ``limit``, ...) may be chained until then; after it they raise InvalidOperation, as
in PyMongo. ``rewind()`` forgets the server cursor so the query runs again; ``clone()`` copies
the options into an unstarted cursor.

Killing and batching are shared with CommandCursor (greenmongo/command_cursor.py).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

from greenmongo.bson.code import Code
from greenmongo.bson.codec_options import CodecOptions
from greenmongo.client_session import ClientSession, session_state
from greenmongo.command_cursor import (
    CommandCursor,
    RawBatchCommandCursor,
    _CursorBase,
    core_of,
    join_raw_batch,
    raw_codec_options,
)
from greenmongo.engine.deadline import CursorTimeout
from greenmongo.errors import InvalidOperation
from greenmongo.operations.arguments import (
    collation_document,
    hint_value,
    index_document,
    index_list,
    validate_boolean,
    validate_integer,
    validate_is_mapping,
)
from greenmongo.operations.count import DistinctOperation
from greenmongo.operations.find import CursorType, ExplainOperation, FindOperation, FindSpec

if TYPE_CHECKING:
    from greenmongo.collection import Collection

# Wire-protocol query flags (PyMongo's add_option/remove_option masks).
_TAILABLE = 2
_OPLOG_REPLAY = 8
_NO_CURSOR_TIMEOUT = 16
_AWAIT_DATA = 32
_EXHAUST = 64
_PARTIAL = 128
_CURSOR_TYPE_BITS = _TAILABLE | _AWAIT_DATA | _EXHAUST



class Cursor(_CursorBase[Any]):
    """The result of ``Collection.find``: iterate it, or chain builders first."""

    def __init__(
        self,
        collection: "Collection",
        filter: Optional[Mapping[str, Any]] = None,
        projection: Any = None,
        skip: int = 0,
        limit: int = 0,
        no_cursor_timeout: bool = False,
        cursor_type: int = CursorType.NON_TAILABLE,
        sort: Any = None,
        allow_partial_results: bool = False,
        oplog_replay: bool = False,
        batch_size: int = 0,
        collation: Any = None,
        hint: Any = None,
        max_scan: Optional[int] = None,
        max_time_ms: Optional[int] = None,
        max: Any = None,
        min: Any = None,
        return_key: Optional[bool] = None,
        show_record_id: Optional[bool] = None,
        snapshot: Optional[bool] = None,
        comment: Any = None,
        session: Optional[ClientSession] = None,
        allow_disk_use: Optional[bool] = None,
        let: Optional[Mapping[str, Any]] = None,
        *,
        timeout_mode: Optional[str] = None,
    ) -> None:
        core = core_of(collection)
        super().__init__(core)
        self._session_state = session_state(session, core)
        if self._session_state is not None:
            core.check_usable(self._session_state)
        self._explicit_session = session
        if snapshot:
            raise InvalidOperation("the snapshot query option was removed in MongoDB 4.0")
        if isinstance(batch_size, int) and batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        self._collection = collection
        # The options as given; builders change them until the first batch is asked for.
        self._spec = FindSpec(
            {} if filter is None else filter, projection, skip, limit, no_cursor_timeout, cursor_type, sort,
            allow_partial_results, oplog_replay, batch_size, collation, hint, max_scan, max_time_ms, None, max, min,
            return_key, show_record_id, comment, allow_disk_use, let)
        self._empty = False
        # Validates every option now (PyMongo raises at find() time); reused unless a builder runs.
        self._prepared: Optional[FindOperation] = self._operation()
        # The timeoutMS in force where find() is called governs the cursor, wherever it is iterated.
        self._timeout = CursorTimeout(collection._timeout, self._session_state, timeout_mode)
        self._configure_timeout()

    def _configure_timeout(self) -> None:
        spec = self._spec
        await_data = spec.cursor_type & CursorType.TAILABLE_AWAIT == CursorType.TAILABLE_AWAIT
        self._timeout.configure(tailable=bool(spec.cursor_type & _TAILABLE), await_data=await_data,
                                max_await_time_ms=spec.max_await_time_ms if await_data else None)

    # -- the find command ----------------------------------------------------------------------

    def _codec_options(self) -> CodecOptions:
        return self._collection.codec_options

    def _operation(self, codec_options: Optional[CodecOptions] = None, limit: Optional[int] = None) -> FindOperation:
        collection = self._collection
        spec = self._spec if limit is None else replace(self._spec, limit=limit)
        return FindOperation(collection.database.name, collection.name, spec, read_concern=collection.read_concern,
                             read_preference=collection.read_preference,
                             codec_options=codec_options or self._codec_options())

    def _start(self) -> None:
        operation = self._prepared or self._operation()
        self._prepared = None
        self._configure_timeout()  # builders may have made it tailable or set maxAwaitTimeMS since find()
        operation.timeout_max_time_ms = self._timeout.sends_max_time_ms
        self._state = self._core.execute(operation, session=self._session_state, deadline=self._timeout.first())
        self._accept(self._state.first_batch)
        self._state.first_batch = []

    def _can_fetch(self) -> bool:
        if self._closed or self._empty:
            return False
        state = self._state
        return state is None or state.needs_get_more

    @property
    def _stop_on_empty_batch(self) -> bool:  # type: ignore[override]
        return bool(self._spec.cursor_type & _TAILABLE)

    @property
    def alive(self) -> bool:
        if self._empty and not self._buffer:
            return False
        return super().alive

    # -- builders ---------------------------------------------------------------------------------

    def _check_okay_to_chain(self) -> None:
        if self._state is not None or self._closed:
            raise InvalidOperation("cannot set options after executing query")
        self._prepared = None

    def limit(self, limit: int) -> "Cursor":
        """At most ``limit`` documents (0: no limit; negative: one batch of at most ``-limit``)."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError("limit must be an integer")
        if self._spec.cursor_type & _EXHAUST:
            raise InvalidOperation("Can't use limit and exhaust together.")
        self._check_okay_to_chain()
        self._empty = False
        self._spec.limit = limit
        return self

    def batch_size(self, batch_size: int) -> "Cursor":
        """Documents per batch (0: the server's default)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise TypeError("batch_size must be an integer")
        if batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        self._check_okay_to_chain()
        self._spec.batch_size = batch_size
        return self

    def skip(self, skip: int) -> "Cursor":
        if isinstance(skip, bool) or not isinstance(skip, int):
            raise TypeError("skip must be an integer")
        if skip < 0:
            raise ValueError("skip must be >= 0")
        self._check_okay_to_chain()
        self._spec.skip = skip
        return self

    def max_time_ms(self, max_time_ms: Optional[int]) -> "Cursor":
        """The server-side time limit of the find command (and of nothing else)."""
        if max_time_ms is not None and (isinstance(max_time_ms, bool) or not isinstance(max_time_ms, int)):
            raise TypeError("max_time_ms must be an integer or None")
        self._check_okay_to_chain()
        self._spec.max_time_ms = max_time_ms
        return self

    def max_await_time_ms(self, max_await_time_ms: Optional[int]) -> "Cursor":
        """How long a TAILABLE_AWAIT getMore waits for new documents; ignored for other cursor types."""
        if max_await_time_ms is not None and (isinstance(max_await_time_ms, bool)
                                              or not isinstance(max_await_time_ms, int)):
            raise TypeError("max_await_time_ms must be an integer or None")
        self._check_okay_to_chain()
        if self._spec.cursor_type & _AWAIT_DATA:
            self._spec.max_await_time_ms = max_await_time_ms
        return self

    def max_scan(self, max_scan: Optional[int]) -> "Cursor":
        """Deprecated by the server (removed in 4.2); kept for PyMongo compatibility."""
        self._check_okay_to_chain()
        self._spec.max_scan = max_scan
        return self

    def sort(self, key_or_list: Any, direction: Any = None) -> "Cursor":
        """``sort("a")``, ``sort("a", -1)``, ``sort([("a", 1), ("b", -1)])`` or ``sort({"a": 1})``."""
        self._check_okay_to_chain()
        self._spec.sort = index_document(index_list(key_or_list, direction))
        return self

    def hint(self, index: Any) -> "Cursor":
        """An index name or key spec for the server to use; None clears it."""
        self._check_okay_to_chain()
        self._spec.hint = hint_value(index)
        return self

    def min(self, spec: Any) -> "Cursor":
        """Inclusive lower index bound, a list of (key, value) pairs (needs ``hint``)."""
        if not isinstance(spec, (list, tuple)):
            raise TypeError("spec must be an instance of list or tuple")
        self._check_okay_to_chain()
        self._spec.min = dict(spec)
        return self

    def max(self, spec: Any) -> "Cursor":
        """Exclusive upper index bound, a list of (key, value) pairs (needs ``hint``)."""
        if not isinstance(spec, (list, tuple)):
            raise TypeError("spec must be an instance of list or tuple")
        self._check_okay_to_chain()
        self._spec.max = dict(spec)
        return self

    def collation(self, collation: Any) -> "Cursor":
        self._check_okay_to_chain()
        self._spec.collation = collation_document(collation)
        return self

    def comment(self, comment: Any) -> "Cursor":
        self._check_okay_to_chain()
        self._spec.comment = comment
        return self

    def allow_disk_use(self, allow_disk_use: bool) -> "Cursor":
        validate_boolean("allow_disk_use", allow_disk_use)
        self._check_okay_to_chain()
        self._spec.allow_disk_use = allow_disk_use
        return self

    def where(self, code: Union[str, Code]) -> "Cursor":
        """Add a ``$where`` JavaScript clause to the filter."""
        self._check_okay_to_chain()
        if not isinstance(code, Code):
            code = Code(code)
        spec = dict(self._spec.filter or {})
        spec["$where"] = code
        self._spec.filter = spec
        return self

    def _flags(self) -> int:
        spec = self._spec
        flags = spec.cursor_type
        if spec.oplog_replay:
            flags |= _OPLOG_REPLAY
        if spec.no_cursor_timeout:
            flags |= _NO_CURSOR_TIMEOUT
        if spec.allow_partial_results:
            flags |= _PARTIAL
        return flags

    def _set_flags(self, flags: int) -> None:
        cursor_type = flags & _CURSOR_TYPE_BITS
        spec = self._spec
        if cursor_type & _EXHAUST and spec.limit:
            raise InvalidOperation("Can't use limit and exhaust together.")
        self._check_okay_to_chain()
        spec.cursor_type = cursor_type
        spec.oplog_replay = bool(flags & _OPLOG_REPLAY)
        spec.no_cursor_timeout = bool(flags & _NO_CURSOR_TIMEOUT)
        spec.allow_partial_results = bool(flags & _PARTIAL)

    def add_option(self, mask: int) -> "Cursor":
        """Set wire-protocol query flags (PyMongo's masks: 2 tailable, 32 await data, ...)."""
        validate_integer("mask", mask)
        self._set_flags(self._flags() | mask)
        return self

    def remove_option(self, mask: int) -> "Cursor":
        validate_integer("mask", mask)
        self._set_flags(self._flags() & ~mask)
        return self

    # -- indexing, copies, helpers --------------------------------------------------------------

    def __getitem__(self, index: Union[int, slice]) -> Any:
        """``cursor[n]``: the n-th document (its own query); ``cursor[a:b]``: skip/limit on this cursor."""
        if isinstance(index, slice):
            if index.step is not None:
                raise IndexError("Cursor instances do not support slice steps")
            start = index.start or 0
            if start < 0:
                raise IndexError("Cursor instances do not support negative indices")
            self._check_okay_to_chain()
            limit = 0
            if index.stop is not None:
                limit = index.stop - start
                if limit < 0:
                    raise IndexError(f"stop index must be greater than start index for slice {index!r}")
            self._spec.skip = start
            self._spec.limit = limit
            self._empty = index.stop is not None and limit == 0
            return self
        if isinstance(index, int) and not isinstance(index, bool):
            if index < 0:
                raise IndexError("Cursor instances do not support negative indices")
            clone = self.clone()
            clone.skip(index + self._spec.skip)
            clone.limit(-1)
            for document in clone:
                return document
            raise IndexError("no such item for Cursor instance")
        raise TypeError(f"index {index!r} cannot be applied to Cursor instances")

    def clone(self) -> "Cursor":
        """An unstarted cursor with the same options."""
        clone = type(self).__new__(type(self))
        _CursorBase.__init__(clone, self._core)
        clone._collection = self._collection
        clone._explicit_session = self._explicit_session
        clone._session_state = self._session_state
        clone._timeout = self._timeout.restarted()
        clone._spec = self._spec.copy()
        clone._empty = self._empty
        clone._prepared = None
        return clone

    __copy__ = clone

    def __deepcopy__(self, memo: Any) -> "Cursor":
        clone = self.clone()
        clone._spec = copy.deepcopy(self._spec, memo)
        return clone

    def rewind(self) -> "Cursor":
        """Forget the server cursor (killing it) so that the next iteration runs the query again."""
        state = self._state
        try:
            self._kill_and_unpin(state)
        finally:
            if state is not None:
                self._release_session()
        self._state = None
        self._buffer.clear()
        self._closed = False
        self._timeout = self._timeout.restarted()
        return self

    def explain(self) -> Any:
        """The server's explain output for this query (verbosity: the server's default)."""
        limit = -abs(self._spec.limit) if self._spec.limit else None
        operation = ExplainOperation(self._operation(self._collection.codec_options, limit=limit))
        return self._core.execute(operation, session=self._session_state,
                                  deadline=self._collection._deadline(self._session_state))

    def distinct(self, key: str) -> list:
        """Distinct values of ``key`` among the documents this cursor's filter matches."""
        collection = self._collection
        spec = self._spec
        filter = spec.filter or None
        if filter is not None:
            validate_is_mapping("filter", filter)
        operation = DistinctOperation(
            collection.database.name, collection.name, key, filter, collation=spec.collation,
            max_time_ms=spec.max_time_ms, comment=spec.comment, read_concern=collection.read_concern,
            read_preference=collection.read_preference, codec_options=collection.codec_options)
        return self._core.execute(operation, session=self._session_state,
                                  deadline=collection._deadline(self._session_state))

    @property
    def collection(self) -> "Collection":
        return self._collection

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._collection.full_name} filter={self._spec.filter!r} alive={self.alive}>"

    __class_getitem__: Any = classmethod(GenericAlias)  # Cursor[dict], as PyMongo's Cursor[_DocumentType]


class RawBatchCursor(Cursor):
    """A find cursor yielding each batch as concatenated BSON bytes (``find_raw_batches``)."""

    def _codec_options(self) -> CodecOptions:
        return raw_codec_options(self._collection.codec_options)

    def _accept(self, documents: Sequence[Any]) -> None:
        if documents:
            self._buffer.append(join_raw_batch(documents))

    def __getitem__(self, index: Any) -> Any:
        raise InvalidOperation("Cannot call __getitem__ on RawBatchCursor")


__all__ = ["CommandCursor", "Cursor", "CursorType", "RawBatchCommandCursor", "RawBatchCursor"]
