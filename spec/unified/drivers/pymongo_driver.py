"""PyMongo as the unified runner's driver: the reference greenmongo's results are compared with.

PyMongo is a test-time peer only (greenmongo never imports it). Unpatched, it
blocks the OS thread, hence ``blocking_io=True``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from spec.unified.drivers import BsonTypes, DriverAdapter, DriverUnavailable
from spec.unified.outcomes import NotSupported

_STATE_NAMES = {1: "none", 2: "starting", 3: "in_progress", 4: "committed", 5: "committed", 6: "aborted"}


def _pymongo_csfle() -> dict:
    """PyMongo's encryption classes, or {} without pymongocrypt."""
    try:
        import pymongocrypt  # noqa: F401
        from pymongo.encryption import ClientEncryption
        from pymongo.encryption_options import AutoEncryptionOpts
    except ImportError:
        return {}
    return {"ClientEncryption": ClientEncryption, "AutoEncryptionOpts": AutoEncryptionOpts}


def load() -> DriverAdapter:
    try:
        import bson
        import gridfs
        import pymongo
        from bson import json_util
        from pymongo import monitoring, operations
        from pymongo.client_session import TransactionOptions
        from pymongo.driver_info import DriverInfo
        from pymongo.read_concern import ReadConcern
        from pymongo.read_preferences import make_read_preference, read_pref_mode_from_name
        from pymongo.server_api import ServerApi
        from pymongo.write_concern import WriteConcern
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise DriverUnavailable(f"pymongo is not importable: {exc}") from exc

    json_options = json_util.JSONOptions(tz_aware=False, uuid_representation=bson.binary.UuidRepresentation.UNSPECIFIED)

    def json_loads(text: str) -> Any:
        return json_util.loads(text, json_options=json_options)

    def read_preference(doc: Mapping[str, Any]) -> Any:
        mode = read_pref_mode_from_name(doc["mode"])
        if "hedge" in doc:
            raise NotSupported("PyMongo 4.20 removed hedged reads (readPreference.hedge)")
        return make_read_preference(mode, doc.get("tagSets"), doc.get("maxStalenessSeconds", -1))

    def log_record_data(record: Any) -> Optional[dict]:
        message = record.msg
        if not hasattr(message, "_kwargs"):
            return None
        str(message)  # PyMongo redacts and serializes lazily, on formatting
        return dict(message._kwargs)

    def log_record_owner(data: Mapping[str, Any]) -> Any:
        return data.get("clientId") or data.get("topologyId")

    def client_log_owner(client: Any) -> Any:
        settings = getattr(client, "_topology_settings", None)
        return getattr(settings, "_topology_id", None)

    def session_transaction_state(session: Any) -> str:
        return _STATE_NAMES[session._transaction.state]

    def session_pinned_address(session: Any) -> Any:
        return session._pinned_address

    def session_dirty(session: Any) -> bool:
        return bool(session._server_session.dirty)

    csfle = _pymongo_csfle()
    return DriverAdapter(
        name="pymongo",
        version=pymongo.version,
        MongoClient=pymongo.MongoClient,
        json_loads=json_loads,
        bson=BsonTypes(
            ObjectId=bson.ObjectId, Int64=bson.Int64, Decimal128=bson.Decimal128, Binary=bson.Binary,
            Timestamp=bson.Timestamp, Regex=bson.Regex, Code=bson.Code, MinKey=bson.MinKey,
            MaxKey=bson.MaxKey, DBRef=bson.DBRef, DatetimeMS=bson.DatetimeMS,
        ),
        errors=pymongo.errors,
        listener_bases={
            "command": monitoring.CommandListener,
            "pool": monitoring.ConnectionPoolListener,
            "server": monitoring.ServerListener,
            "heartbeat": monitoring.ServerHeartbeatListener,
            "topology": monitoring.TopologyListener,
        },
        ReadConcern=ReadConcern,
        WriteConcern=WriteConcern,
        read_preference=read_preference,
        ServerApi=ServerApi,
        TransactionOptions=TransactionOptions,
        write_models={
            "insertOne": operations.InsertOne, "updateOne": operations.UpdateOne,
            "updateMany": operations.UpdateMany, "replaceOne": operations.ReplaceOne,
            "deleteOne": operations.DeleteOne, "deleteMany": operations.DeleteMany,
        },
        IndexModel=operations.IndexModel,
        SearchIndexModel=operations.SearchIndexModel,
        ReturnDocument=pymongo.ReturnDocument,
        CursorType=pymongo.CursorType,
        GridFSBucket=gridfs.GridFSBucket,
        DriverInfo=DriverInfo,
        logger_names={
            "command": "pymongo.command", "topology": "pymongo.topology",
            "serverSelection": "pymongo.serverSelection", "connection": "pymongo.connection",
        },
        log_record_data=log_record_data,
        log_record_owner=log_record_owner,
        client_log_owner=client_log_owner,
        session_transaction_state=session_transaction_state,
        session_pinned_address=session_pinned_address,
        session_dirty=session_dirty,
        blocking_io=True,
        unsupported_arguments={
            "rawData": "PyMongo 4.20 has no rawData option",
            "timeoutMode": "PyMongo 4.20 has no timeoutMode (CSOT cursor timeout modes)",
        },
        unsupported_operations={
            "count": "PyMongo 4 removed Collection.count",
            "listDatabaseObjects": "PyMongo has no listDatabaseObjects (list_databases returns documents)",
            "listCollectionObjects": "PyMongo has no listCollectionObjects",
            "mapReduce": "PyMongo 4 removed map_reduce",
        },
        unsupported_uri_options={
            "waitQueueSize": "PyMongo has no waitQueueSize",
            "waitQueueMultiple": "PyMongo has no waitQueueMultiple",
        },
        # Client-side encryption, as PyMongo offers it with pymongocrypt installed (its encryption extra).
        csfle_available=bool(csfle),
        ClientEncryption=csfle.get("ClientEncryption"),
        AutoEncryptionOpts=csfle.get("AutoEncryptionOpts"),
        codec_options_standard=bson.CodecOptions(uuid_representation=bson.binary.STANDARD),
        # CSOT: pymongo.timeout only. PyMongo 4.20 has no Database/Collection timeoutMS, no session
        # defaultTimeoutMS and no timeoutMode (its cursors read the enclosing pymongo.timeout block at
        # each call, so the runner keeps their iteration inside the operation's block).
        timeout=pymongo.timeout,
        cursors_keep_timeout=False,
    )
