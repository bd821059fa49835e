"""CommandCursor and RawBatchCommandCursor: iterate the cursor of a command that already ran.

aggregate, listIndexes, listCollections, listDatabases and ``Database.cursor_command`` hand
back a ``CursorState`` (greenmongo/operations/cursor_state.py) holding the first batch; the
cursor here serves that batch, then asks for more with getMore only when the buffer is empty,
always on the server that created the cursor.

Closing kills the server-side cursor there and then. Garbage collection never does I/O (a
``__del__`` may run inside any greenlet, even inside the hub): it hands the cursor id to the
client, which sends the killCursors with its next operation. A getMore interrupted by
``gevent.Timeout`` or ``GreenletExit`` is handled the same way, because the interrupted
greenlet must not block again, and so is one that failed on the network (killing at once
could wait out server selection). A getMore the server refused is followed by a killCursors
unless the server has already dropped the cursor.

``_CursorBase`` is shared with ``greenmongo.cursor.Cursor``, which adds the find command.
"""

from __future__ import annotations

from collections import deque
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Generic, Iterable, Iterator, Optional, Sequence, TypeVar

from greenmongo.bson.codec import DocumentBatch
from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.engine.core import release_pin
from greenmongo.engine.deadline import CursorTimeout
from greenmongo.errors import ConnectionFailure, InvalidBSON, InvalidOperation
from greenmongo.operations.arguments import validate_integer
from greenmongo.client_session import session_state
from greenmongo.operations.base import Operation
from greenmongo.operations.cursor_state import CursorState, KillCursorsOperation
from greenmongo.wire.op_msg import not_valid_bson

if TYPE_CHECKING:
    from greenmongo.client_session import ClientSession
    from greenmongo.engine.core import ClientCore

DocumentT = TypeVar("DocumentT")

#: Codec options that keep documents as BSON bytes (raw batch cursors).
RAW_BATCH_CODEC_OPTIONS = DEFAULT_CODEC_OPTIONS.with_options(document_class=RawBSONDocument)


def core_of(owner: Any) -> "ClientCore":
    """The ClientCore behind a Collection, Database or MongoClient (each keeps it as ``_core``)."""
    return owner._core


def raw_codec_options(codec_options: Optional[CodecOptions]) -> CodecOptions:
    """The user's codec options with RawBSONDocument documents (for the raw batch cursors)."""
    if codec_options is None:
        return RAW_BATCH_CODEC_OPTIONS
    return codec_options.with_options(document_class=RawBSONDocument)


def join_raw_batch(documents: Sequence[Any]) -> bytes:
    """One batch of RawBSONDocuments as the concatenated BSON PyMongo's raw batch cursors yield."""
    return b"".join(document.raw for document in documents)


class DocumentBuffer:
    """The documents a cursor has received and not yet handed out, batch by batch, in order.

    A batch still encoded (``bson.codec.DocumentBatch``) is decoded one document per ``popleft``: a cursor
    that hands each document on never holds its batch decoded (see DocumentBatch for what that saves).
    A document that does not decode is the server's protocol error, raised for that document alone: the
    ones before it were handed out, and the next ``popleft`` goes on after it.
    """

    __slots__ = ("_batch", "_pos", "_end", "_later")

    def __init__(self) -> None:
        self._batch: Sequence[Any] = ()
        self._pos = self._end = 0
        self._later: deque = deque()  # batches behind the current one

    def __bool__(self) -> bool:
        return self._pos < self._end  # the current batch is never left empty while a later one waits

    def extend(self, documents: Iterable[Any]) -> None:
        """Queue a batch (a list, a DocumentBatch or any iterable, read into a list)."""
        if type(documents) is not list and type(documents) is not DocumentBatch:
            documents = list(documents)
        if not documents:
            return
        if self._pos < self._end:
            self._later.append(documents)
        else:
            self._batch, self._pos, self._end = documents, 0, len(documents)

    def append(self, document: Any) -> None:
        self.extend([document])

    def popleft(self) -> Any:
        pos = self._pos
        if pos >= self._end:
            raise IndexError("pop from an empty DocumentBuffer")
        batch = self._batch
        self._pos = pos + 1  # first: a document that fails to decode is not served again
        if pos + 1 == self._end:
            self._advance()
        try:
            return batch[pos]
        except InvalidBSON as exc:
            raise not_valid_bson(exc, f"document {pos} of a cursor batch") from exc

    def _advance(self) -> None:
        later = self._later
        if later:
            self._batch = later.popleft()
            self._pos, self._end = 0, len(self._batch)
        else:
            self._batch, self._pos, self._end = (), 0, 0

    def __iter__(self) -> Iterator[Any]:
        """Takes the documents left, one by one, as ``popleft`` does."""
        while self:
            yield self.popleft()

    def clear(self) -> None:
        self._batch, self._pos, self._end = (), 0, 0
        self._later.clear()


class _CursorBase(Generic[DocumentT]):
    """Buffering, getMore, kill and the iteration protocol shared by every cursor class."""

    #: Whether one empty getMore ends ``next()`` (tailable find cursors) instead of fetching again.
    _stop_on_empty_batch = False
    #: The session the user passed; None means the executor's implicit one (kept in the CursorState).
    _explicit_session: Optional["ClientSession"] = None

    def __init__(self, core: "ClientCore", timeout: Optional[CursorTimeout] = None) -> None:
        self._core = core
        #: The cursor's timeoutMS and timeoutMode: which deadline each getMore and the killCursors get.
        self._timeout = timeout if timeout is not None else CursorTimeout.legacy()
        self._state: Optional[CursorState] = None
        self._buffer = DocumentBuffer()
        self._closed = False

    # -- state ----------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """Whether the cursor could still return documents (``next()`` may still raise StopIteration)."""
        if self._buffer:
            return True
        if self._closed:
            return False
        state = self._state
        return state is None or state.alive

    @property
    def cursor_id(self) -> Optional[int]:
        """The server's cursor id (0 once the server has closed it), None before the first batch."""
        return None if self._state is None else self._state.cursor_id

    @property
    def address(self) -> Optional[tuple]:
        """The (host, port) of the server that holds the cursor; None before the first batch."""
        return None if self._state is None else self._state.address

    @property
    def retrieved(self) -> int:
        """How many documents the server has returned so far."""
        return 0 if self._state is None else self._state.retrieved

    @property
    def session(self) -> Optional["ClientSession"]:
        """The explicit session this cursor was opened with, else None (an implicit one is not shown)."""
        return self._explicit_session

    # -- fetching ---------------------------------------------------------------------------

    def _start(self) -> None:
        """Send the command that opens the cursor (find cursors only: command cursors start open)."""
        raise InvalidOperation("this cursor has no command to start")

    def _can_fetch(self) -> bool:
        if self._closed:
            return False
        state = self._state
        return state is None or state.needs_get_more

    def _accept(self, documents: Sequence[Any]) -> None:
        self._buffer.extend(documents)

    def _fetch(self) -> None:
        """One round trip: the opening command or one getMore."""
        if self._state is None:
            self._start()
        else:
            self._get_more()
        self._kill_if_finished()
        state = self._state
        if state is not None and not state.alive:
            self._release_session()

    def _release_session(self) -> None:
        """An implicit session goes back to the pool once the server cursor is gone (no I/O)."""
        state = self._state
        session = state.session if state is not None else None
        if state is not None and session is not None:
            state.session = None
            if session.implicit:
                session.end()

    def _get_more(self) -> None:
        state = self._state
        assert state is not None
        try:
            batch = self._core.get_more(state, self._timeout.for_fetch())
        except Exception as exc:
            pin = state.pin
            if pin is not None and pin.broken:
                # Load balanced, the pinned connection failed (Load Balancer spec): no killCursors, since no
                # other connection reaches that service; the cursor keeps the connection until it is closed.
                state.close()
                self._release_session()
                raise
            if getattr(exc, "timeout", False) and self._timeout.csot:
                # Out of time (a network timeout, a timeout before sending, MaxTimeMSExpired), not a broken
                # server: the server cursor lives on and close() (or the next call, under timeoutMode
                # iteration) still reaches it. A killCursors here would outlive this call's deadline.
                raise
            if isinstance(exc, ConnectionFailure):
                # The server may be unreachable: waiting here to kill would block for server selection.
                self._kill_later()
                raise
            kill = state.handle_error(exc)
            if kill is not None:
                self._send_kill(kill, state, release=False)  # a pinned connection stays until close()
            self._release_session()  # the cursor is done: nothing (not even __del__) would give it back
            raise
        except BaseException:
            # Interrupted (Timeout, GreenletExit): do not block again; the client kills it later.
            self._abandon_interrupted()
            raise
        self._accept(batch)

    def _kill_if_finished(self) -> None:
        """The limit was reached (or one batch was asked for) while the server still holds the cursor."""
        state = self._state
        if state is not None and not state.alive and state.needs_kill:
            kill = state.close()
            if kill is not None:
                self._send_kill(kill, state)

    def _kill_and_unpin(self, state: Optional[CursorState]) -> None:
        """killCursors if the server may still hold the cursor, then give back a pinned connection (load
        balanced: even when nothing was killed)."""
        if state is None:
            return
        try:
            if state.needs_kill:
                kill = state.close()
                if kill is not None:
                    self._send_kill(kill, state)
        finally:
            release_pin(state)

    def _send_kill(self, kill: KillCursorsOperation, state: CursorState, release: bool = True) -> None:
        """killCursors now, in the calling greenlet; its errors are not the caller's concern. A pinned
        connection carries it and is given back after (unless ``release`` is False)."""
        self._core.kill_cursor(kill, state, self._timeout.for_close(), release=release)

    def _kill_later(self) -> None:
        """Hand the server cursor (and a pinned connection) to the client to kill with its next operation
        (no I/O and no listener call here: it may run in ``__del__``)."""
        state = self._state
        if state is None:
            return
        kill = state.close()
        pin, state.pin = state.pin, None
        if kill is not None or pin is not None:
            self._core.queue_kill(state.address, kill, pin)
        self._release_session()

    def _abandon_interrupted(self) -> None:
        """A getMore was interrupted: a pinned connection closed mid-command is given back now (nothing can
        be sent on it); otherwise the kill (and the pin) wait for the client's next operation."""
        state = self._state
        pin = state.pin if state is not None else None
        if state is not None and pin is not None and pin.broken:
            state.close()
            release_pin(state)
            self._release_session()
            return
        self._kill_later()

    # -- iteration ----------------------------------------------------------------------------

    def next(self) -> DocumentT:
        """The next document, fetching a batch only when the buffer is empty."""
        if self._buffer:
            return self._buffer.popleft()
        with self._timeout.iteration():
            return self._next()

    def _next(self) -> DocumentT:
        buffer = self._buffer
        while True:
            if buffer:
                return buffer.popleft()
            if not self._can_fetch():
                raise StopIteration
            self._fetch()
            if not buffer and self._stop_on_empty_batch:
                raise StopIteration

    __next__ = next

    def __iter__(self) -> Iterator[DocumentT]:
        return self

    def try_next(self) -> Optional[DocumentT]:
        """The next document or None, with at most one round trip (for tailable cursors)."""
        if not self._buffer and self._can_fetch():
            with self._timeout.iteration():
                self._fetch()
        if self._buffer:
            return self._buffer.popleft()
        return None

    def to_list(self, length: Optional[int] = None) -> list:
        """The remaining documents (at most ``length``); stops early at an empty batch."""
        if length is not None:
            validate_integer("length", length)
            if length < 1:
                raise ValueError("to_list() length must be greater than 0")
        with self._timeout.iteration():
            return self._to_list(length)

    def _to_list(self, length: Optional[int]) -> list:
        result: list = []
        buffer = self._buffer
        while length is None or len(result) < length:
            if buffer:
                if length is None:
                    result.extend(buffer)
                    buffer.clear()
                else:
                    while buffer and len(result) < length:
                        result.append(buffer.popleft())
                continue
            if not self._can_fetch():
                break
            self._fetch()
            if not buffer:
                break
        return result

    # -- closing --------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the server-side cursor (if the server still holds it) and drop buffered documents."""
        self._closed = True
        self._buffer.clear()
        self._kill_and_unpin(self._state)
        self._release_session()

    def __enter__(self) -> "_CursorBase[DocumentT]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            state = self.__dict__.get("_state")
            if state is not None and (state.needs_kill or state.pin is not None):
                self._kill_later()
        except Exception:
            pass


class CommandCursor(_CursorBase[DocumentT]):
    """The cursor of an aggregate, list or ``cursor_command`` (PyMongo's CommandCursor).

    ``CommandCursor(owner, state)``: ``owner`` is the Collection, Database or MongoClient the
    command ran on, ``state`` the command's CursorState.
    """

    def __init__(self, owner: Any, state: CursorState, *, codec_options: Optional[CodecOptions] = None,
                 session: Optional["ClientSession"] = None, timeout: Optional[CursorTimeout] = None) -> None:
        super().__init__(core_of(owner), timeout)
        self._explicit_session = session
        self._owner = owner
        self._state = state
        self._accept(state.first_batch)
        state.first_batch = []  # served from the buffer now
        self._kill_if_finished()

    def _can_fetch(self) -> bool:
        return not self._closed and self._state is not None and self._state.needs_get_more

    def batch_size(self, batch_size: int) -> "CommandCursor[DocumentT]":
        """The number of documents each later getMore asks for (0: the server's default)."""
        validate_integer("batch_size", batch_size)
        if batch_size < 0:
            raise ValueError("batch_size must be >= 0")
        if self._state is not None:
            self._state.batch_size = batch_size
        return self

    def __repr__(self) -> str:
        state = self._state
        namespace = state.namespace if state is not None else "?"
        return f"<{type(self).__name__} {namespace} id={self.cursor_id} alive={self.alive}>"

    @property
    def _collection(self) -> Any:
        """PyMongo's private attribute that libraries and their tests read: the Collection (or Database,
        or MongoClient) the command ran on, with its options."""
        return self._owner


class RawBatchCommandCursor(CommandCursor[bytes]):
    """A CommandCursor yielding each batch as concatenated BSON bytes (``aggregate_raw_batches``).

    The command must have been decoded with RawBSONDocument documents (``raw_codec_options``).
    """

    def _accept(self, documents: Sequence[Any]) -> None:
        if documents:
            self._buffer.append(join_raw_batch(documents))

    def __getitem__(self, index: Any) -> Any:
        raise InvalidOperation("Cannot call __getitem__ on RawBatchCommandCursor")

    __class_getitem__: Any = classmethod(GenericAlias)  # RawBatchCommandCursor[dict], as PyMongo's (generic) class


def open_command_cursor(owner: Any, operation: Operation[Any], session: Optional["ClientSession"], *,
                        timeout_mode: Optional[str] = None, read_preference: Any = None,
                        cursor_class: "type[CommandCursor[Any]]" = CommandCursor, tailable: bool = False,
                        await_data: bool = False, writes: bool = False,
                        max_await_time_ms: Optional[int] = None) -> "CommandCursor[Any]":
    """Run a command that opens a cursor through ``owner`` (a Collection, Database or MongoClient) and
        wrap its first batch: the cursor's timeoutMS and timeoutMode are decided here, before anything is
    sent, and the command gets the cursor's first deadline."""
    core = core_of(owner)
    state = session_state(session, core)
    timeout = CursorTimeout(owner._timeout, state, timeout_mode)
    timeout.configure(tailable=tailable, await_data=await_data, writes=writes, max_await_time_ms=max_await_time_ms)
    operation.timeout_max_time_ms = timeout.sends_max_time_ms
    result = core.execute(operation, session=state, read_preference=read_preference, deadline=timeout.first())
    return cursor_class(owner, result, session=session, timeout=timeout)


__all__ = ["CommandCursor", "RawBatchCommandCursor", "RAW_BATCH_CODEC_OPTIONS", "core_of", "open_command_cursor",
           "raw_codec_options"]
