"""What GridIn, GridOut, GridOutCursor and GridFSBucket all check about the objects they are given."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

from greenmongo.client_session import ClientSession
from greenmongo.collection import Collection
from greenmongo.engine.deadline import resolve, scoped
from greenmongo.errors import InvalidOperation

F = TypeVar("F", bound=Callable[..., Any])


def one_operation(method: F) -> F:
    """A bucket method that sends several commands has one timeoutMS for the whole (the GridFS spec):
    the enclosing ``greenmongo.timeout()`` block's, else the bucket's database's."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with scoped(resolve(self._files._timeout)):
            return method(self, *args, **kwargs)
    return run  # type: ignore[return-value]


def within_stream_deadline(method: F) -> F:
    """A GridIn/GridOut method runs under the stream's deadline: its timeoutMS caps the stream's life,
    from opening to closing (the GridFS spec)."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with scoped(self._deadline):
            return method(self, *args, **kwargs)
    return run  # type: ignore[return-value]


def refuse_transaction(session: Optional[ClientSession]) -> None:
    """GridFS spreads one file over many documents and commands: it is not for transactions (as in PyMongo)."""
    if session is not None and getattr(session, "in_transaction", False):
        raise InvalidOperation("GridFS does not support multi-document transactions")


def gridfs_root(collection: Any) -> Collection:
    """The bucket's root collection (``fs``) with the application's custom type codecs removed.

    GridFS reads and writes its own documents; a type registry meant for application documents
    must not turn chunk data or file ids into something else.
    """
    if not isinstance(collection, Collection):
        raise TypeError(f"root_collection must be an instance of Collection, not {type(collection).__name__}")
    codec_options = collection.codec_options
    if not codec_options.type_registry.is_empty:
        collection = collection.with_options(codec_options=codec_options.with_options(type_registry=None))
    return collection


__all__ = ["gridfs_root", "one_operation", "refuse_transaction", "within_stream_deadline"]
