"""PyMongo's ``pymongo.common``: the base object Database and Collection share.

Both are cheap handles: a parent (the client, or the database), a name and four
option objects. They compare and hash by (parent, name), expose their options
read-only, build aggregate operations from PyMongo's keyword options the same
way and, like PyMongo's, refuse ``bool()``, iteration and ``next()``, so that
``if db:`` or ``for doc in collection`` fails loudly instead of surprising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NoReturn, Optional, Tuple

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.engine.deadline import Deadline, resolve
from greenmongo.engine.session_state import SessionState
from greenmongo.operations.aggregate import AggregateOperation
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.options.write_concern import WriteConcern

if TYPE_CHECKING:
    from greenmongo.engine.core import ClientCore


class BaseObject:
    """Base of Database and Collection; a subclass sets ``_kind`` and the four option attributes."""

    #: The public class name PyMongo's messages use: "Database" or "Collection".
    _kind: str = ""
    _codec_options: CodecOptions
    _read_preference: ServerMode
    _write_concern: WriteConcern
    _read_concern: ReadConcern
    #: timeoutMS in seconds (0: no limit; None: not set, CSOT off), inherited client -> database -> collection.
    _timeout: Optional[float] = None
    _core: "ClientCore"

    def _identity(self) -> Tuple[Any, str]:
        """(parent, name): (client, database name) or (database, collection name)."""
        raise NotImplementedError

    @property
    def codec_options(self) -> CodecOptions:
        return self._codec_options

    @property
    def read_preference(self) -> ServerMode:
        return self._read_preference

    @property
    def write_concern(self) -> WriteConcern:
        return self._write_concern

    @property
    def read_concern(self) -> ReadConcern:
        return self._read_concern

    @property
    def timeout_ms(self) -> Optional[int]:
        """This handle's timeoutMS (0: no limit; None: not set), inherited from its database and client."""
        return None if self._timeout is None else round(self._timeout * 1000)

    def _deadline(self, session: Optional[SessionState]) -> Deadline:
        """The deadline of one operation through this handle (see ``engine.deadline.resolve``)."""
        return resolve(self._timeout, session)

    def _aggregate_operation(self, database_name: str, collection_name: Optional[str], pipeline: list,
                             let: Optional[Mapping[str, Any]], comment: Any, options: dict[str, Any],
                             codec_options: CodecOptions) -> AggregateOperation:
        """An aggregate with this handle's concerns and read preference; ``options`` are the command's
        camelCase ones (``hint`` and ``maxTimeMS`` are taken out, the rest go to the command as given)."""
        return AggregateOperation(
            database_name, collection_name, pipeline, let=let, comment=comment, hint=options.pop("hint", None),
            max_time_ms=options.pop("maxTimeMS", None), read_concern=self._read_concern,
            write_concern=self._write_concern, read_preference=self._read_preference, codec_options=codec_options,
            extra=options)

    # -- dunder ----------------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BaseObject) and other._kind == self._kind:
            return self._identity() == other._identity()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        parent, name = self._identity()
        return f"{self._kind}({parent!r}, {name!r})"

    def __bool__(self) -> bool:
        raise NotImplementedError(f"{self._kind} objects do not implement truth value testing or bool(). Please "
                                  f"compare with None instead: {self._kind.lower()} is not None")

    def __iter__(self) -> "BaseObject":
        return self

    def __next__(self) -> NoReturn:
        raise TypeError(f"'{self._kind}' object is not iterable")

    next = __next__


def timeout_seconds(timeout_ms: Optional[int], inherited: Optional[float]) -> Optional[float]:
    """A handle's timeoutMS keyword (milliseconds, 0: no limit) in seconds; None inherits ``inherited``."""
    if timeout_ms is None:
        return inherited
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)):
        raise TypeError(f"timeout_ms must be a non-negative number of milliseconds, not {type(timeout_ms).__name__}")
    if timeout_ms < 0:
        raise ValueError("timeout_ms cannot be negative")
    return timeout_ms / 1000.0
