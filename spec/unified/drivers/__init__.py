"""The driver the unified runner drives: one small adapter module per driver.

Both drivers share PyMongo's public API, so an adapter only names where things
live (the client class, the Extended JSON loader, the error and monitoring
modules, option classes) and answers the few questions the public API cannot
(a session's transaction state, which client a log record belongs to).

``GREENMONGO_UNIFIED_DRIVER=pymongo|greenmongo`` picks the adapter; the default
is greenmongo. An adapter whose driver cannot run raises ``DriverUnavailable``
with the reason, which the fixtures turn into a skip.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

ENV_VAR = "GREENMONGO_UNIFIED_DRIVER"
DEFAULT_DRIVER = "greenmongo"
KNOWN_DRIVERS = ("greenmongo", "pymongo")


class DriverUnavailable(Exception):
    """The selected driver cannot run the unified tests (the message says why)."""


@dataclass(frozen=True)
class BsonTypes:
    """The driver's BSON classes, for ``$$type`` checks and model conversion (None: not available)."""

    ObjectId: type
    Int64: type
    Decimal128: type
    Binary: type
    Timestamp: type
    Regex: type
    Code: type
    MinKey: type
    MaxKey: type
    DBRef: type
    DBPointer: Optional[type] = None
    Symbol: Optional[type] = None
    Undefined: Optional[type] = None
    DatetimeMS: Optional[type] = None


@dataclass(frozen=True)
class DriverAdapter:
    """Everything the runner needs to know about one driver."""

    name: str
    version: str
    MongoClient: type
    json_loads: Callable[[str], Any]
    """Extended JSON text -> Python values (relaxed and canonical accepted)."""
    bson: BsonTypes
    errors: Any
    """The errors module: PyMongoError, OperationFailure, BulkWriteError, ... by PyMongo's names."""
    listener_bases: Mapping[str, type]
    """Listener base class per family: command, pool, server, heartbeat, topology (absent: not supported)."""
    ReadConcern: type
    WriteConcern: type
    read_preference: Callable[[Mapping[str, Any]], Any]
    """A unified-format readPreference document -> the driver's read preference object."""
    ServerApi: type
    TransactionOptions: Optional[type]
    write_models: Mapping[str, type]
    """insertOne/updateOne/... -> the driver's write model class (PyMongo's InsertOne, ...)."""
    IndexModel: Optional[type]
    SearchIndexModel: Optional[type]
    ReturnDocument: Any
    CursorType: Any
    GridFSBucket: Optional[type]
    DriverInfo: Optional[type]
    """For appendMetadata (PyMongo's DriverInfo(name, version, platform))."""
    logger_names: Mapping[str, str]
    """Log component (command, topology, serverSelection, connection) -> logger name."""
    log_record_data: Callable[[Any], Optional[dict]]
    """A logging.LogRecord -> its structured fields, or None when the record is not a spec message."""
    log_record_owner: Callable[[Mapping[str, Any]], Any]
    """Structured log fields -> an id of the client that logged them (None: unknown, so every client)."""
    client_log_owner: Callable[[Any], Any]
    """A client -> the id ``log_record_owner`` reports for its messages (None: unknown)."""
    session_transaction_state: Callable[[Any], str]
    """none / starting / in_progress / committed / aborted."""
    session_pinned_address: Callable[[Any], Any]
    """The mongos address a session is pinned to, or None."""
    session_dirty: Callable[[Any], bool]
    blocking_io: bool = False
    """True when the driver blocks the OS thread (PyMongo without monkey-patching): thread
    entities then run their operations in gevent's thread pool to stay concurrent."""
    unsupported_arguments: Mapping[str, str] = field(default_factory=dict)
    """Spec arguments this driver does not implement -> why (the test is skipped, not failed)."""
    unsupported_operations: Mapping[str, str] = field(default_factory=dict)
    """Spec operations this driver deliberately lacks -> why (the test is skipped)."""
    unsupported_uri_options: Mapping[str, str] = field(default_factory=dict)
    csfle_available: bool = False
    tracing: bool = False
    """The client takes ``tracing={"enabled": ..., "query_text_max_length": ...}`` (OpenTelemetry spec)."""
    ClientEncryption: Optional[type] = None
    """The driver's ClientEncryption (clientEncryption entities; None: not available)."""
    AutoEncryptionOpts: Optional[type] = None
    """The driver's AutoEncryptionOpts (client autoEncryptOpts; None: not available)."""
    codec_options_standard: Any = None
    """CodecOptions with the standard UUID representation, for ClientEncryption."""
    # -- Client Side Operations Timeout (CSOT) -------------------------------------------------
    timeout: Optional[Callable[[Optional[float]], Any]] = None
    """The driver's ``timeout(seconds)`` block (``pymongo.timeout``): an operation's ``timeoutMS``
    argument runs the operation inside it (None: the driver has no such block)."""
    TimeoutMode: Any = None
    """The driver's timeoutMode values, ``CURSOR_LIFETIME`` and ``ITERATION`` (None: no timeoutMode)."""
    entity_timeout_keyword: Optional[str] = None
    """The get_database/get_collection keyword taking databaseOptions/collectionOptions ``timeoutMS``
    (milliseconds; None: the driver has no Database/Collection-level timeout)."""
    session_timeout_keyword: Optional[str] = None
    """The start_session keyword taking sessionOptions ``defaultTimeoutMS`` (None: none)."""
    cursor_timeout: Callable[[Any], Optional[float]] = lambda cursor: None
    """A cursor -> the timeoutMS (seconds) it was created with, None without one: iterateUntilDocumentOrError
    on a tailable cursor loops under one such block, as a blocking ``next`` would."""
    cursors_keep_timeout: bool = False
    """True when a cursor keeps the timeout in force where it was created (greenmongo): the runner then
    iterates a cursor-creating operation's result outside the operation's timeout block, so an
    ``iteration`` cursor's ``next`` calls are not capped by it. False (PyMongo reads the enclosing block at
    each call): the iteration stays inside the block."""


def selected_driver_name() -> str:
    name = (os.environ.get(ENV_VAR) or DEFAULT_DRIVER).strip().lower()
    if name not in KNOWN_DRIVERS:
        raise DriverUnavailable(f"{ENV_VAR}={name!r}: expected one of {', '.join(KNOWN_DRIVERS)}")
    return name


def load_driver(name: Optional[str] = None) -> DriverAdapter:
    """The adapter for ``name`` (default: the environment's choice); raises DriverUnavailable."""
    name = name or selected_driver_name()
    if name not in KNOWN_DRIVERS:
        raise DriverUnavailable(f"unknown driver {name!r}: expected one of {', '.join(KNOWN_DRIVERS)}")
    module = importlib.import_module(f"spec.unified.drivers.{name}_driver")
    return module.load()
