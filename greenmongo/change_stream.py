"""Change streams: ``Collection.watch``, ``Database.watch`` and ``MongoClient.watch`` (PyMongo's shape).

A ChangeStream owns one tailable awaitData aggregate cursor at a time. ``try_next`` makes at most
one getMore (the server waits up to ``max_await_time_ms`` for changes) and returns None when the
batch is empty, so ``resume_token`` can be saved even while nothing changes; ``next`` and
iteration call it until a change arrives.

After a resumable error (a network error, CursorNotFound, a labelled server error: see
``is_resumable_error``) the stream resumes once: it kills the old cursor, selects a server with the
original read preference and re-runs the aggregate from the cached resume token
(greenmongo/operations/change_stream.py decides what is sent). Any other error closes the stream.
An interrupted call (``gevent.Timeout``, ``GreenletExit``) leaves the stream open: the interrupted
cursor is handed to the client to kill and the next call resumes.

The aggregate and all getMores of a stream share one session: the user's, or an implicit one the
stream keeps for its whole life (so that a resume uses the same session, as the spec asks) and
ends when it is closed. The cursor never ends it.

Prefer these helpers to a raw aggregate with ``$changeStream``: only they resume. The server
accepts only the "majority" read concern or none for change streams. To store a resume token that
is never behind, call ``try_next`` in a loop and save ``resume_token`` after every call, including
the calls that return None.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Generic, Iterator, Mapping, Optional, TypeVar

from greenmongo.client_session import ClientSession, session_state
from greenmongo.command_cursor import CommandCursor, core_of
from greenmongo.engine.deadline import CursorTimeout, Deadline
from greenmongo.engine.session_state import SessionState
from greenmongo.errors import GreenMongoError
from greenmongo.operations.arguments import (
    collation_document,
    validate_list,
    validate_optional_non_negative_integer,
)
from greenmongo.operations.change_stream import (
    ChangeStreamAggregateOperation,
    ResumePoint,
    is_resumable_error,
    stage_options,
)

DocumentT = TypeVar("DocumentT")


def _validate_optional_string(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be an instance of str")


class _StreamCursor(CommandCursor):
    """The stream's current aggregate cursor: serves one buffered document at a time and leaves the
    session to the stream (a resume must reuse it)."""

    def _release_session(self) -> None:
        state = self._state
        if state is not None:
            state.session = None

    def take_buffered(self) -> Any:
        """The next document already received, without a round trip; None if there is none."""
        return self._buffer.popleft() if self._buffer else None

    @property
    def batch_drained(self) -> bool:
        return not self._buffer

    @property
    def post_batch_resume_token(self) -> Any:
        state = self._state
        return None if state is None else state.post_batch_resume_token


@dataclass(frozen=True)
class WatchOptions:
    """The options of ``watch()``, the same on a Collection, a Database and a MongoClient."""

    pipeline: Optional[list] = None
    full_document: Optional[str] = None
    resume_after: Optional[Mapping[str, Any]] = None
    max_await_time_ms: Optional[int] = None
    batch_size: Optional[int] = None
    collation: Any = None
    start_at_operation_time: Any = None
    start_after: Optional[Mapping[str, Any]] = None
    comment: Any = None
    full_document_before_change: Optional[str] = None
    show_expanded_events: Optional[bool] = None


class ChangeStream(Generic[DocumentT]):
    """A change stream over a collection, a database or the whole cluster (use the ``watch`` helpers).

    Iterating blocks until the next change; ``try_next`` does not. ``resume_token`` is the token a
    new ``watch(resume_after=...)`` (or ``start_after=...``) should use to continue after the
    last returned change. ``close()`` (or ``with``) kills the server cursor.
    """

    #: The ``$changeStream`` option that widens the stream to every database (ClusterChangeStream).
    _all_changes_for_cluster = False

    def __init__(self, target: Any, options: "WatchOptions", session: Optional[ClientSession] = None) -> None:
        pipeline = [] if options.pipeline is None else options.pipeline
        validate_list("pipeline", pipeline)
        _validate_optional_string("full_document", options.full_document)
        _validate_optional_string("full_document_before_change", options.full_document_before_change)
        validate_optional_non_negative_integer("batch_size", options.batch_size)
        validate_optional_non_negative_integer("max_await_time_ms", options.max_await_time_ms)
        self._target = target
        self._core = core_of(target)
        self._pipeline = copy.deepcopy(pipeline)
        self._collation = collation_document(options.collation)
        self._batch_size = options.batch_size
        self._max_await_time_ms = options.max_await_time_ms
        self._comment = options.comment
        self._point = ResumePoint(
            stage_options(options.full_document, options.full_document_before_change, options.show_expanded_events,
                          self._all_changes_for_cluster),
            resume_after=options.resume_after, start_after=options.start_after,
            start_at_operation_time=options.start_at_operation_time)
        self._session = session_state(session, self._core)
        self._implicit_session: Optional[SessionState] = None
        # timeoutMS (the enclosing timeout() block's, else the collection's, database's or client's) bounds
        # the first aggregate and then each next()/try_next() call, resumes included (timeoutMode iteration).
        self._timeout = CursorTimeout(target._timeout, self._session)
        self._timeout.configure(tailable=True, await_data=True, max_await_time_ms=options.max_await_time_ms)
        self._cursor: Optional[_StreamCursor] = None
        self._closed = False
        self._cursor = self._open(self._timeout.first())

    # -- what subclasses say ------------------------------------------------------------------

    def _namespace(self) -> tuple[str, Optional[str]]:
        """(database, collection) for the aggregate; collection None means ``aggregate: 1``."""
        raise NotImplementedError

    # -- state ------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """False once the stream is closed (by ``close``, an error or an invalidate event)."""
        return not self._closed

    @property
    def resume_token(self) -> Optional[Mapping[str, Any]]:
        """The token to resume after the last returned change (or the latest postBatchResumeToken)."""
        return copy.deepcopy(self._point.resume_token)

    # -- opening and resuming ---------------------------------------------------------------------

    def _open(self, deadline: Deadline) -> _StreamCursor:
        """Run the aggregate: the first one, or a resume on a newly selected server."""
        session = self._session if self._session is not None else self._implicit_session
        dbname, collection = self._namespace()
        target = self._target
        operation = ChangeStreamAggregateOperation(
            self._point, dbname, collection, self._pipeline, batch_size=self._batch_size,
            collation=self._collation, max_await_time_ms=self._max_await_time_ms, comment=self._comment,
            read_concern=target.read_concern, read_preference=target.read_preference,
            codec_options=target.codec_options)
        state = self._core.execute(operation, session=session, deadline=deadline)
        if session is None and state.session is not None and state.session.implicit:
            self._implicit_session = state.session  # the executor's implicit session: ours from now on
        return _StreamCursor(target, state, timeout=self._timeout)

    def _resume(self) -> None:
        old, self._cursor = self._cursor, None
        if old is not None:
            try:
                old.close()  # kills the server cursor if it is still open there
            except Exception:
                pass
        self._cursor = self._open(self._timeout.for_fetch())

    def _resumable(self, error: BaseException) -> bool:
        return is_resumable_error(error, self._point.max_wire_version)

    # -- iteration --------------------------------------------------------------------------------

    def try_next(self) -> Optional[DocumentT]:
        """The next change, or None if none arrived: at most one getMore and at most one resume.

        Under a timeoutMS the call (its resume included) has one deadline; a timeout leaves the stream
        open, and the next call resumes it.
        """
        with self._timeout.iteration():
            return self._try_next()

    def _try_next(self) -> Optional[DocumentT]:
        if self._closed:
            return None
        try:
            if self._cursor is None or not self._cursor.alive:
                self._resume()  # an earlier call was interrupted or could not resume
            cursor = self._cursor
            assert cursor is not None
            try:
                change = cursor.try_next()
            except GreenMongoError as exc:
                if exc.timeout and self._timeout.csot:
                    cursor._kill_later()  # out of time: the next call resumes (queued kill, no I/O)
                    raise
                if not self._resumable(exc):
                    raise
                self._resume()
                cursor = self._cursor
                assert cursor is not None
                change = cursor.take_buffered()
        except GreenMongoError as exc:
            if not self._resumable(exc) and not exc.timeout:
                self.close()
            raise
        except Exception:
            self.close()
            raise
        if not cursor.alive:
            self._finish()  # the server closed the cursor (an invalidate event)
        if change is None:
            self._point.batch_drained(cursor.post_batch_resume_token)
            return None
        try:
            self._point.document_returned(change, cursor.batch_drained, cursor.post_batch_resume_token)
        except GreenMongoError:
            self.close()
            raise
        return change

    def next(self) -> DocumentT:
        """The next change, waiting for it (StopIteration once the stream is closed); under a timeoutMS
        the whole wait has one deadline."""
        with self._timeout.iteration():
            while not self._closed:
                change = self._try_next()
                if change is not None:
                    return change
        raise StopIteration

    __next__ = next

    def __iter__(self) -> Iterator[DocumentT]:
        return self

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the server cursor and end the stream's implicit session; idempotent."""
        self._closed = True
        cursor, self._cursor = self._cursor, None
        try:
            if cursor is not None:
                cursor.close()
        finally:
            self._end_implicit_session()

    def _finish(self) -> None:
        """The server cursor is gone: nothing to kill."""
        self._closed = True
        self._end_implicit_session()

    def _end_implicit_session(self) -> None:
        session, self._implicit_session = self._implicit_session, None
        if session is not None:
            session.end()  # no I/O: the server session goes back to the client's pool

    def __enter__(self) -> "ChangeStream[DocumentT]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # No I/O here: the cursor's own __del__ hands its server cursor to the client to kill.
        try:
            self._end_implicit_session()
        except Exception:
            pass


class CollectionChangeStream(ChangeStream[DocumentT]):
    """The changes to one collection (``Collection.watch``)."""

    def _namespace(self) -> tuple[str, Optional[str]]:
        return self._target.database.name, self._target.name


class DatabaseChangeStream(ChangeStream[DocumentT]):
    """The changes to every collection of one database (``Database.watch``, server 4.0+)."""

    def _namespace(self) -> tuple[str, Optional[str]]:
        return self._target.name, None


class ClusterChangeStream(DatabaseChangeStream[DocumentT]):
    """The changes to every database but admin, config and local (``MongoClient.watch``, server 4.0+).

    ``target`` is the client's admin database: the aggregate runs there with ``allChangesForCluster``.
    """

    _all_changes_for_cluster = True


class Watchable:
    """``watch()`` for Collection, Database and MongoClient: one signature (PyMongo's), one place."""

    def _change_stream(self, options: WatchOptions, session: Optional[ClientSession]) -> ChangeStream[Any]:
        raise NotImplementedError

    def watch(self, pipeline: Optional[list] = None, full_document: Optional[str] = None,
              resume_after: Optional[Mapping[str, Any]] = None, max_await_time_ms: Optional[int] = None,
              batch_size: Optional[int] = None, collation: Any = None, start_at_operation_time: Any = None,
              session: Optional[ClientSession] = None, start_after: Optional[Mapping[str, Any]] = None,
              comment: Any = None, full_document_before_change: Optional[str] = None,
              show_expanded_events: Optional[bool] = None) -> ChangeStream[Any]:
        """A change stream over this collection, database (server 4.0+) or whole deployment (every database
        but admin, config and local); ``pipeline`` stages follow ``$changeStream``. Iterate it, or poll
        ``try_next()`` and save ``resume_token`` after each call."""
        options = WatchOptions(pipeline, full_document, resume_after, max_await_time_ms, batch_size, collation,
                               start_at_operation_time, start_after, comment, full_document_before_change,
                               show_expanded_events)
        return self._change_stream(options, session)


__all__ = ["ChangeStream", "ClusterChangeStream", "CollectionChangeStream", "DatabaseChangeStream", "Watchable",
           "WatchOptions"]
