"""Index creation before a bucket's first write (GridFS spec "Indexes").

Once per GridFSBucket (or per stand-alone GridIn), immediately before the first chunk or files
document is inserted: if the files collection is empty (asked of the primary), each of the two
indexes is created unless an equivalent one exists already (listIndexes first, so that an
application allowed only to write data still works). A failure to create raises; the check is
repeated by the next write only if it did not complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from greenmongo.errors import OperationFailure
from greenmongo.gridfs.layout import CHUNKS_INDEX, FILES_INDEX, index_key_matches
from greenmongo.options.read_preferences import ReadPreference

if TYPE_CHECKING:
    from greenmongo.client_session import ClientSession
    from greenmongo.collection import Collection


def _index_exists(collection: "Collection", wanted: Sequence[tuple[str, int]],
                  session: Optional[ClientSession]) -> bool:
    try:
        indexes = list(collection.list_indexes(session=session))
    except OperationFailure as exc:
        if exc.timeout:
            raise  # out of time (timeoutMS): creating would only time out too
        return False  # cannot tell (e.g. not allowed to list): try to create, as PyMongo does
    return any(index_key_matches(index.get("key"), wanted) for index in indexes)


def _create_missing(collection: "Collection", wanted: Sequence[tuple[str, int]], unique: bool,
                    session: Optional[ClientSession]) -> None:
    if not _index_exists(collection, wanted, session):
        options = {"unique": True} if unique else {}
        collection.create_index(list(wanted), session=session, **options)


class IndexGuard:
    """Remembers whether a bucket's indexes were checked; shared by the uploads the bucket opens."""

    __slots__ = ("_checked",)

    def __init__(self) -> None:
        self._checked = False

    def ensure(self, files: "Collection", chunks: "Collection", session: Optional[ClientSession]) -> None:
        """Check (and create) the indexes if no write has done it yet."""
        if self._checked:
            return
        primary_files = files.with_options(read_preference=ReadPreference.PRIMARY)
        if primary_files.find_one({}, projection={"_id": 1}, session=session) is None:
            primary_chunks = chunks.with_options(read_preference=ReadPreference.PRIMARY)
            _create_missing(primary_files, FILES_INDEX, False, session)
            _create_missing(primary_chunks, CHUNKS_INDEX, True, session)
        self._checked = True


__all__ = ["IndexGuard"]
