"""greenmongo as the unified runner's driver (the default).

greenmongo keeps PyMongo's public names, so this adapter mostly says where each
name lives. Names are looked up in the places PyMongo puts them first, then in
greenmongo's own option modules.

The three session questions (transaction state, pinned, dirty) have no public
API in PyMongo either; the adapter reads greenmongo's engine state directly
(``session._state``), so a rename fails the tests instead of skipping them.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping, Optional

from spec.unified.drivers import BsonTypes, DriverAdapter, DriverUnavailable
from spec.unified.outcomes import NotSupported

_STATE_NAMES = {1: "none", 2: "starting", 3: "in_progress", 4: "committed", 5: "committed", 6: "aborted"}


def _lookup(*dotted: str) -> Optional[Any]:
    """The first of ``module.attr`` paths that exists, else None."""
    for path in dotted:
        module_name, _, attr = path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        value = getattr(module, attr, None)
        if value is not None:
            return value
    return None


def _require(what: str, *dotted: str) -> Any:
    value = _lookup(*dotted)
    if value is None:
        raise DriverUnavailable(f"greenmongo has no {what} yet (looked for {', '.join(dotted)})")
    return value


def _state_name(state: Any) -> str:
    name = getattr(state, "name", None)
    if isinstance(name, str):
        return {"committed_empty": "committed"}.get(name.lower(), name.lower())
    return _STATE_NAMES[state]


def _csfle_available() -> bool:
    try:
        from greenmongo.crypt.binding import available
    except ImportError:
        return False
    return available()


def load() -> DriverAdapter:
    import greenmongo

    client_class = getattr(greenmongo, "MongoClient", None)
    if client_class is None:
        raise DriverUnavailable("greenmongo has no MongoClient yet (issue 7): the greenmongo-driven unified "
                                "tests are skipped; run them against PyMongo with GREENMONGO_UNIFIED_DRIVER=pymongo")
    for what, path in (("Database", "greenmongo.database.Database"),
                       ("Collection", "greenmongo.collection.Collection")):
        _require(what, path)  # the runner's internal client needs both before anything runs
    from greenmongo import bson, errors
    from greenmongo.bson import json_util

    json_options = json_util.JSONOptions(tz_aware=False)

    def json_loads(text: str) -> Any:
        return json_util.loads(text, json_options=json_options)

    make_read_preference = _require("make_read_preference", "greenmongo.read_preferences.make_read_preference",
                                    "greenmongo.options.read_preferences.make_read_preference")
    mode_from_name = _require("read_pref_mode_from_name", "greenmongo.read_preferences.read_pref_mode_from_name",
                              "greenmongo.options.read_preferences.read_pref_mode_from_name")

    def read_preference(doc: Mapping[str, Any]) -> Any:
        return make_read_preference(mode_from_name(doc["mode"]), doc.get("tagSets"),
                                    doc.get("maxStalenessSeconds", -1), doc.get("hedge"))

    def log_record_data(record: Any) -> Optional[dict]:
        message = record.msg
        return dict(message) if isinstance(message, Mapping) else None

    def log_record_owner(data: Mapping[str, Any]) -> Any:
        return data.get("clientId") or data.get("topologyId")

    # greenmongo's own internals, read directly: a rename must fail these tests, never skip them.
    def client_log_owner(client: Any) -> Any:
        return client._core.topology.topology_id

    def session_transaction_state(session: Any) -> str:
        return _state_name(session._state.transaction.state)

    def session_pinned_address(session: Any) -> Any:
        return session._state.transaction.pinned_address

    def session_dirty(session: Any) -> bool:
        server_session = session._state.server_session
        if server_session is None:
            raise NotSupported("the session has not used a server session yet")
        return bool(server_session.dirty)

    def cursor_timeout(cursor: Any) -> Optional[float]:
        # Cursor, CommandCursor and GridOutCursor keep their CursorTimeout there; ChangeStream too.
        return cursor._timeout.timeout

    listener_bases = {
        family: base
        for family, base in (
            ("command", _lookup("greenmongo.monitoring.CommandListener")),
            ("pool", _lookup("greenmongo.monitoring.ConnectionPoolListener",
                             "greenmongo.monitoring.pool.ConnectionPoolListener")),
            ("server", _lookup("greenmongo.monitoring.ServerListener")),
            ("heartbeat", _lookup("greenmongo.monitoring.ServerHeartbeatListener")),
            ("topology", _lookup("greenmongo.monitoring.TopologyListener")),
        )
        if base is not None
    }
    write_models = {
        name: _require(cls, f"greenmongo.operations.{cls}", f"greenmongo.{cls}")
        for name, cls in (("insertOne", "InsertOne"), ("updateOne", "UpdateOne"), ("updateMany", "UpdateMany"),
                          ("replaceOne", "ReplaceOne"), ("deleteOne", "DeleteOne"), ("deleteMany", "DeleteMany"))
    }
    return DriverAdapter(
        name="greenmongo",
        version=greenmongo.__version__,
        MongoClient=client_class,
        json_loads=json_loads,
        bson=BsonTypes(
            ObjectId=bson.ObjectId, Int64=bson.Int64, Decimal128=bson.Decimal128, Binary=bson.Binary,
            Timestamp=bson.Timestamp, Regex=bson.Regex, Code=bson.Code, MinKey=bson.MinKey,
            MaxKey=bson.MaxKey, DBRef=bson.DBRef, DBPointer=bson.DBPointer, Symbol=bson.Symbol,
            Undefined=bson.Undefined, DatetimeMS=bson.DatetimeMS,
        ),
        errors=errors,
        listener_bases=listener_bases,
        ReadConcern=_require("ReadConcern", "greenmongo.read_concern.ReadConcern",
                             "greenmongo.options.read_concern.ReadConcern"),
        WriteConcern=_require("WriteConcern", "greenmongo.write_concern.WriteConcern",
                              "greenmongo.options.write_concern.WriteConcern"),
        read_preference=read_preference,
        ServerApi=_require("ServerApi", "greenmongo.server_api.ServerApi", "greenmongo.options.server_api.ServerApi"),
        TransactionOptions=_lookup("greenmongo.client_session.TransactionOptions"),
        write_models=write_models,
        IndexModel=_lookup("greenmongo.operations.IndexModel", "greenmongo.IndexModel"),
        SearchIndexModel=_lookup("greenmongo.operations.SearchIndexModel", "greenmongo.SearchIndexModel"),
        ReturnDocument=_require("ReturnDocument", "greenmongo.ReturnDocument", "greenmongo.collection.ReturnDocument"),
        CursorType=_require("CursorType", "greenmongo.CursorType", "greenmongo.cursor.CursorType"),
        GridFSBucket=_lookup("greenmongo.gridfs.GridFSBucket"),
        DriverInfo=_lookup("greenmongo.driver_info.DriverInfo", "greenmongo.DriverInfo"),
        logger_names={
            "command": "greenmongo.command", "topology": "greenmongo.topology",
            "serverSelection": "greenmongo.serverSelection", "connection": "greenmongo.connection",
        },
        log_record_data=log_record_data,
        log_record_owner=log_record_owner,
        client_log_owner=client_log_owner,
        session_transaction_state=session_transaction_state,
        session_pinned_address=session_pinned_address,
        session_dirty=session_dirty,
        blocking_io=False,
        # What these name is not in PyMongo 4.20's API, so not in greenmongo's (spec/skip_ledger.py allows the skips).
        unsupported_arguments={
            "rawData": "PyMongo 4.20 has no rawData option (time-series bucket access), so greenmongo has none",
        },
        unsupported_operations={
            "listDatabaseObjects": "PyMongo-shaped API: list_databases returns documents",
            "listCollectionObjects": "PyMongo-shaped API: list_collections returns documents",
            "mapReduce": "PyMongo-shaped API: PyMongo 4 removed map_reduce",
            "count": "PyMongo-shaped API: PyMongo 4 removed Collection.count (count_documents and "
                     "estimated_document_count replace it)",
            "getSnapshotTime": "PyMongo-shaped API: PyMongo 4.20's ClientSession has no public snapshot time "
                               "(the Snapshot Reads spec's snapshotTime)",
        },
        # Client-side encryption: with the encryption extra (pymongocrypt) installed.
        csfle_available=_csfle_available(),
        ClientEncryption=_lookup("greenmongo.encryption.ClientEncryption"),
        AutoEncryptionOpts=_lookup("greenmongo.encryption_options.AutoEncryptionOpts"),
        codec_options_standard=bson.CodecOptions(uuid_representation=bson.STANDARD),
        tracing=True,
        timeout=greenmongo.timeout,
        TimeoutMode=greenmongo.TimeoutMode,
        entity_timeout_keyword="timeout_ms",
        session_timeout_keyword="default_timeout_ms",
        cursor_timeout=cursor_timeout,
        cursors_keep_timeout=True,  # a cursor's CursorTimeout is decided where it is created
    )
