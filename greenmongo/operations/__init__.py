"""Operations: every command the driver sends, as pure build/parse objects (contract in ``base``).

This package doubles as PyMongo's ``pymongo.operations``: the write models
(``InsertOne``, ``UpdateOne``, ...), ``IndexModel`` and ``SearchIndexModel``
import from here. The operation classes live in their modules (``find``,
``write``, ``bulk``, ``client_bulk``, ``aggregate``, ``count``, ``indexes``,
``collections``, ``databases``, ``find_and_modify``, ``run_command``), results
in ``results``, collation in ``collation``.
"""

from greenmongo.operations.indexes import IndexModel, SearchIndexModel
from greenmongo.operations.requests import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne

__all__ = ["DeleteMany", "DeleteOne", "IndexModel", "InsertOne", "ReplaceOne", "SearchIndexModel", "UpdateMany",
           "UpdateOne"]
