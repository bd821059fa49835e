"""PyMongo's ``pymongo.common``: the base object Database and Collection share, and PyMongo's
option validators and defaults, which libraries import from here.

Database and Collection are cheap handles: a parent (the client, or the database), a name and four
option objects. They compare and hash by (parent, name), expose their options read-only, build
aggregate operations from PyMongo's keyword options the same way and, like PyMongo's, refuse
``bool()``, iteration and ``next()``, so that ``if db:`` or ``for doc in collection`` fails loudly.

The ``validate_*(option, value)`` functions keep PyMongo's contract (what they accept, what they
return, TypeError for a wrong type and ValueError for a wrong value), because ODMs call them on their
own arguments (MongoEngine: ``validate_read_preference("read_preference", value)``); they live in
``greenmongo.common.validators``, with the option tables that drive ``greenmongo.uri_parser``.
"""

from __future__ import annotations

from types import GenericAlias
from typing import TYPE_CHECKING, Any, Mapping, NoReturn, Optional, Sequence, Tuple

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.bson.son import SON as SON  # PyMongo's pymongo.common has it
from greenmongo.pool import ORDERED_TYPES as _pool_ordered_types
from greenmongo.engine.deadline import Deadline, resolve
from greenmongo.engine.session_state import SessionState
from greenmongo.operations.aggregate import AggregateOperation
from greenmongo.common.validators import (  # noqa: F401  (PyMongo's names at PyMongo's path)
    INTERNAL_URI_OPTION_NAME_MAP,
    KW_VALIDATORS,
    NONSPEC_OPTIONS_VALIDATOR_MAP,
    SENSITIVE_OPTIONS_FOR_REPR,
    TIMEOUT_OPTIONS,
    URI_OPTIONS_ALIAS_MAP,
    URI_OPTIONS_DEPRECATION_MAP,
    URI_OPTIONS_VALIDATOR_MAP,
    VALIDATORS,
    WRITE_CONCERN_OPTIONS,
    get_validated_options,
    raise_config_error,
    redact_auth_mechanism_properties_for_repr,
    validate,
    validate_appname_or_none,
    validate_auth_mechanism,
    validate_auth_mechanism_properties,
    validate_auto_encryption_opts_or_none,
    validate_boolean,
    validate_boolean_or_string,
    validate_compressors,
    validate_datetime_conversion,
    validate_document_class,
    validate_driver_or_none,
    validate_integer,
    validate_is_callable_or_none,
    validate_is_document_type,
    validate_is_mapping,
    validate_list,
    validate_list_or_mapping,
    validate_list_or_none,
    validate_max_staleness,
    validate_non_negative_int_or_basestring,
    validate_non_negative_integer,
    validate_non_negative_integer_or_none,
    validate_ok_for_replace,
    validate_ok_for_update,
    validate_positive_float,
    validate_positive_float_or_zero,
    validate_positive_integer,
    validate_read_preference,
    validate_read_preference_mode,
    validate_read_preference_tags,
    validate_readable,
    validate_server_api_or_none,
    validate_server_monitoring_mode,
    validate_string,
    validate_string_or_none,
    validate_timeout_or_none,
    validate_timeout_or_none_or_zero,
    validate_timeout_or_zero,
    validate_timeoutms,
    validate_type_registry,
    validate_tzinfo,
    validate_unicode_decode_error_handler,
    validate_uuid_representation,
    validate_zlib_compression_level,
    _CaseInsensitiveDictionary,
    _UUID_REPRESENTATIONS,
    _validate_event_listeners,
)
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.options.write_concern import WriteConcern
from greenmongo.sdam import settings as _sdam_settings
from greenmongo.wire import versions as _wire
from greenmongo.wire.batching import DEFAULT_MAX_BSON_SIZE, DEFAULT_MAX_WRITE_BATCH_SIZE
from greenmongo.wire.header import DEFAULT_MAX_MESSAGE_SIZE

# -- defaults (PyMongo's names; the values are greenmongo's, which match PyMongo's but for the wire range) --

#: Document classes whose key order PyMongo treats as meaningful.
ORDERED_TYPES: Sequence[type] = _pool_ordered_types
#: Limits assumed until a server's hello says otherwise.
MAX_BSON_SIZE = DEFAULT_MAX_BSON_SIZE
MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_SIZE
MIN_WIRE_VERSION = 0
MAX_WIRE_VERSION = 0
MAX_WRITE_BATCH_SIZE = DEFAULT_MAX_WRITE_BATCH_SIZE
#: The servers this driver speaks to (greenmongo still supports MongoDB 4.2; PyMongo 4.20 starts at 4.4).
MIN_SUPPORTED_SERVER_VERSION = _wire.CLIENT_MIN_SERVER_VERSION
MIN_SUPPORTED_WIRE_VERSION = _wire.CLIENT_MIN_WIRE_VERSION
MAX_SUPPORTED_WIRE_VERSION = _wire.CLIENT_MAX_WIRE_VERSION
#: MongoDB 7.1: the first mongos that keeps streaming exhaust getMore replies.
MONGOS_EXHAUST_WIRE_VERSION = 22
#: Seconds between server checks (heartbeatFrequencyMS default) and the spec's floor between them.
HEARTBEAT_FREQUENCY = int(_sdam_settings.DEFAULT_HEARTBEAT_FREQUENCY)
MIN_HEARTBEAT_INTERVAL = _sdam_settings.MIN_HEARTBEAT_FREQUENCY
#: Seconds between sends of the killCursors queued by garbage-collected cursors, and between event
#: queue runs (PyMongo's background threads; greenmongo sends queued kills with the next operation).
KILL_CURSOR_FREQUENCY = 1
EVENTS_QUEUE_FREQUENCY = 1
#: serverSelectionTimeoutMS default, in seconds.
SERVER_SELECTION_TIMEOUT = 30
#: The SRV polling spec's minimum rescan interval, in seconds.
MIN_SRV_RESCAN_INTERVAL = 60
#: connectTimeoutMS default, in seconds.
CONNECT_TIMEOUT = 20.0
MAX_POOL_SIZE = 100
MIN_POOL_SIZE = 0
MAX_CONNECTING = 2
MAX_IDLE_TIME_MS: Optional[int] = None
MAX_IDLE_TIME_SEC: Optional[int] = None
WAIT_QUEUE_TIMEOUT: Optional[int] = None
LOCAL_THRESHOLD_MS = 15
RETRY_WRITES = True
RETRY_READS = True
#: The server's "no such command" code, and the codes GridFS ignores when it may not create indexes.
COMMAND_NOT_FOUND_CODES: Sequence[int] = (59,)
UNAUTHORIZED_CODES: Sequence[int] = (13, 16547, 16548)
SRV_SERVICE_NAME = "mongodb"
SERVER_MONITORING_MODE = "auto"
#: Client Backpressure defaults.
MAX_ADAPTIVE_RETRIES = 2
ENABLE_OVERLOAD_RETARGETING = False
# -- node names ----------------------------------------------------------------------------------------

def partition_node(node: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``, or a bare host: port 27017) -> (host, port)."""
    host, port = node, 27017
    cut = node.rfind(":")
    if cut != -1:
        host, port = node[:cut], int(node[cut + 1:])
    if host.startswith("["):
        host = host[1:-1]
    return host, port


def clean_node(node: str) -> tuple[str, int]:
    """A hello reply's member name as an address: host lower-cased (DNS names are case-insensitive)."""
    host, port = partition_node(node)
    return host.lower(), port


# -- versions and the C extension -------------------------------------------------------------------------

def has_c() -> bool:
    """Is the C extension installed? (greenmongo's is the BSON accelerator, greenmongo.bson._speedups.)"""
    from greenmongo.bson import has_c as bson_has_c

    return bson_has_c()


class Version(tuple):
    """A server or package version as a comparable tuple of four ints (major, minor, patch, pre-release
    flag: -1 for a pre-release or development build, 0 for a release)."""

    def __new__(cls, *version: int) -> "Version":
        parts = list(version) + [0] * (4 - len(version))
        return super().__new__(cls, tuple(parts))

    @classmethod
    def _padded(cls, iterable: Any, length: int, padding: int = 0) -> list[int]:
        parts = list(iterable)
        return parts + [padding] * (length - len(parts))

    @classmethod
    def from_string(cls, version_string: str) -> "Version":
        """``"4.4.1"``, ``"7.0.0-rc1"``, ``"5.0.0-pre-"``, ``"6.1.0-12-gabcdef"`` (git describe: next patch,
        pre-release), ``"4.2+"`` -> a Version."""
        text, flag, bump = version_string, 0, False
        if text.endswith("+"):
            text, flag = text[:-1], 1
        elif text.endswith("-pre-"):
            text, flag = text[:-5], -1
        elif text.endswith("-"):
            text, flag = text[:-1], -1
        if ".dev" in text:
            text, flag = text[:text.find(".dev")], -1
        if "-rc" in text:
            text, flag = text[:text.find("-rc")], -1
        elif "-" in text:
            text, flag, bump = text[:text.find("-")], -1, True
        parts = cls._padded((int(part) for part in text.split(".")), 3)
        if bump:
            parts[-1] += 1
        return Version(*parts, flag)

    @classmethod
    def from_version_array(cls, version_array: Any) -> "Version":
        """buildInfo's ``versionArray`` ([4, 4, 1, 0]; a negative last element marks a pre-release)."""
        parts = list(version_array)
        if parts[-1] < 0:
            parts[-1] = -1
        return Version(*cls._padded(parts, 3))

    def at_least(self, *other_version: Any) -> bool:
        return self >= Version(*other_version)

    def __str__(self) -> str:
        return ".".join(str(part) for part in self)


def check_for_min_version(package_name: str) -> tuple[str, str, bool]:
    """(installed version, the minimum greenmongo's distribution requires, whether it is met) for one of
    greenmongo's dependencies (PackageNotFoundError when either is not installed)."""
    from importlib.metadata import requires, version

    installed = version(package_name)
    requirement = next(line for line in requires("greenmongo") or () if line.startswith(package_name))
    requirement = requirement.split(";")[0]
    minimum = requirement[requirement.find(">=") + 2:].split(",")[0] if ">=" in requirement else "0"
    return installed, minimum, Version.from_string(installed) >= Version.from_string(minimum)

if TYPE_CHECKING:
    from greenmongo.engine.core import ClientCore


class BaseObject:
    """Base of Database and Collection; a subclass sets ``_kind`` and the four option attributes."""

    #: The public class name PyMongo's messages use: "Database" or "Collection".
    _kind: str = ""
    #: ``Database[dict]``, ``Collection[dict]``: generic aliases, as PyMongo's generic classes.
    __class_getitem__: Any = classmethod(GenericAlias)
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
