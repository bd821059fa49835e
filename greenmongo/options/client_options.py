"""ClientOptions: everything a MongoClient was configured with, validated once, immutable.

Precedence, weakest first (documented, as the Connection String spec asks):

1. defaults (below, and ``tls=true`` for ``mongodb+srv``);
2. the TXT record of a ``mongodb+srv`` host (authSource, replicaSet, loadBalanced only);
3. the connection string;
4. keyword arguments (``MongoClient(uri, replicaSet="rs")`` beats ``?replicaSet=x``),

so one URI can be reused while code overrides single options, as in PyMongo.
TLS is also turned on implicitly when any ``tls*`` option is set and ``tls``
is not. Raw values stay available under their canonical names in
``options`` (in the URI's units); the attributes give them in the units the
driver uses (seconds for times, None for "no limit").
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from greenmongo.bson.codec_options import CodecOptions
from greenmongo.driver_info import DriverInfo, DriverInfoChain
from greenmongo.errors import ConfigurationError, _OptionTypeError, _OptionValueError
from greenmongo.monitoring import registered_listeners
from greenmongo.options import rules
from greenmongo.options.builders import read_concern_from, read_preference_from, write_concern_from
from greenmongo.options.connection_settings import ConnectionSettings, ProxySettings, TlsSettings
from greenmongo.options.credentials import MongoCredential, credentials_from_options
from greenmongo.options.mapping import OptionsMapping
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.read_preferences import ServerMode
from greenmongo.options.seedlist import SrvResolver, choose_hosts
from greenmongo.options.server_api import ServerApi
from greenmongo.options.uri import (
    DEFAULT_PORT,
    Reporter,
    options_mapping,
    parse_host,
    parse_options,
    resolve_seedlist,
    split_uri,
    srv_timeout,
)
from greenmongo.options.validators import InvalidOptionValue, validate_python_option
from greenmongo.options.write_concern import WriteConcern

Address = tuple[str, Optional[int]]


def keyword_option_error(exc: InvalidOptionValue, value: Any) -> ConfigurationError:
    """The error for a bad keyword option: a ConfigurationError that is also PyMongo's TypeError (a value of
    the wrong type) or ValueError (a string it does not take, a number out of bounds); an unknown option's
    name is a plain ConfigurationError, as in PyMongo."""
    if exc.unknown:
        return ConfigurationError(exc.described())
    if (isinstance(value, str) and not exc.wrong_type) or exc.out_of_range:
        return _OptionValueError(exc.described())
    return _OptionTypeError(exc.described())


DEFAULT_HOST = "localhost"
DEFAULT_CONNECT_TIMEOUT_MS = 20_000
DEFAULT_SERVER_SELECTION_TIMEOUT_MS = 30_000
DEFAULT_HEARTBEAT_FREQUENCY_MS = 10_000
DEFAULT_LOCAL_THRESHOLD_MS = 15
DEFAULT_MAX_POOL_SIZE = 100
DEFAULT_MAX_CONNECTING = 2
DEFAULT_PROXY_PORT = 1080

#: Options where an explicit None (or 0) means "no limit" rather than "use the default".
_NONE_MEANS_UNLIMITED = ("connectTimeoutMS", "socketTimeoutMS", "maxIdleTimeMS", "waitQueueTimeoutMS",
                         "maxPoolSize", "timeoutMS")


def _seconds(millis: Optional[float], *, zero_is_none: bool = True) -> Optional[float]:
    if millis is None or (zero_is_none and millis == 0):
        return None
    return millis / 1000.0


class ClientOptions:
    """The validated configuration of one client. Construct like MongoClient: ``ClientOptions(host, port, **kw)``.

    ``host`` is a connection string, a ``host[:port]``, or a list of either;
    ``srv_resolver`` replaces the default DNS resolver for ``mongodb+srv``;
    ``warn=True`` turns invalid connection-string values into warnings (the
    specs' lenient mode) instead of ConfigurationError. Unknown keyword
    arguments always raise (a typo in code should not pass silently).
    """

    def __init__(
        self,
        host: Union[str, Sequence[str], None] = None,
        port: Optional[int] = None,
        *,
        srv_resolver: Optional[SrvResolver] = None,
        warn: bool = False,
        **kwargs: Any,
    ) -> None:
        reporter = Reporter(warn)
        if port is None:
            port = DEFAULT_PORT
        elif isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
            raise ConfigurationError(f"port must be an integer from 1 to 65535, not {port!r}")
        entities = [DEFAULT_HOST] if host is None else [host] if isinstance(host, str) else list(host)
        if not entities:
            raise ConfigurationError("host must name at least one server")

        seeds: list[Address] = []
        options: dict[str, Any] = {}
        username = password = database = collection = srv_host = None
        for entity in entities:
            if not isinstance(entity, str):
                raise ConfigurationError(f"host entries must be strings, not {type(entity).__name__}")
            if "://" not in entity:
                seeds.append(parse_host(entity, port))
                continue
            parts = split_uri(entity, port)
            if parts.srv:
                if len(entities) > 1:
                    raise ConfigurationError("A mongodb+srv connection string must be the only host given")
                srv_host = parts.fqdn
            else:
                seeds.extend(parts.hosts)
            options.update(parse_options(parts.option_pairs, reporter))
            username = parts.username if parts.username is not None else username
            password = parts.password if parts.password is not None else password
            database = database or parts.database
            collection = collection or parts.collection

        for key, value in kwargs.items():
            try:
                name, value = validate_python_option(key, value, reporter.warning)
            except InvalidOptionValue as exc:  # the caller's own argument: its value may be shown
                raise keyword_option_error(exc, value) from None
            options[name] = value
        if options.get("username") is not None:
            username = options["username"]
        if options.get("password") is not None:
            password = options["password"]

        if srv_host is not None:
            seeds = list(resolve_seedlist(srv_host, options, reporter, srv_resolver, srv_timeout(options)))
        if options.get("tls") is None and any(options.get(name) is not None
                                              for name in rules.TLS_DETAIL_OPTIONS):
            options["tls"] = True
        rules.check_all(options, seeds, srv_host is not None)
        if srv_host is not None:
            seeds = choose_hosts(seeds, options.get("srvMaxHosts"))

        self._options = options_mapping(options)
        self._seeds = tuple(dict.fromkeys(seeds))
        self._srv_host = srv_host
        self._database = database
        self._collection = collection
        self._credentials = credentials_from_options(username, password, database, self._options)
        self._read_preference = read_preference_from(self._options)
        self._read_concern = read_concern_from(self._options)
        self._write_concern = write_concern_from(self._options)
        self._codec_options = self._build_codec_options()
        self._tls = self._build_tls()
        self._proxy = self._build_proxy()
        self._driver_chain = DriverInfoChain(self._get("driver"))
        self._registered_listeners = registered_listeners()
        self._frozen = True

    # -- helpers -----------------------------------------------------------------

    def _get(self, name: str, default: Any = None) -> Any:
        """The option's value; ``default`` when unset (an explicit None keeps meaning "no limit" where it can)."""
        if name not in self._options:
            return default
        value = self._options[name]
        if value is None and name not in _NONE_MEANS_UNLIMITED:
            return default
        return value

    def _build_codec_options(self) -> Any:
        names = ("document_class", "tz_aware", "uuidRepresentation", "unicode_decode_error_handler", "tzinfo",
                 "type_registry", "datetime_conversion")
        arguments = {"uuid_representation" if name == "uuidRepresentation" else name: self._get(name)
                     for name in names if self._get(name) is not None}
        try:
            return CodecOptions(**arguments)
        except TypeError as exc:
            raise _OptionTypeError(f"Invalid codec options: {exc}") from None
        except ValueError as exc:
            raise _OptionValueError(f"Invalid codec options: {exc}") from None

    def _build_tls(self) -> Any:
        if not self._get("tls", False):
            return None
        return TlsSettings(
            ca_file=self._get("tlsCAFile"),
            certificate_key_file=self._get("tlsCertificateKeyFile"),
            certificate_key_file_password=self._get("tlsCertificateKeyFilePassword"),
            crl_file=self._get("tlsCRLFile"),
            allow_invalid_certificates=bool(self._get("tlsAllowInvalidCertificates", False)),
            allow_invalid_hostnames=bool(self._get("tlsAllowInvalidHostnames", False)),
            insecure=bool(self._get("tlsInsecure", False)),
            disable_ocsp_endpoint_check=bool(self._get("tlsDisableOCSPEndpointCheck", False)),
            disable_certificate_revocation_check=bool(self._get("tlsDisableCertificateRevocationCheck", False)),
        )

    def _build_proxy(self) -> Any:
        host = self._get("proxyHost")
        if host is None:
            return None
        return ProxySettings(host=host, port=self._get("proxyPort", DEFAULT_PROXY_PORT),
                             username=self._get("proxyUsername"), password=self._get("proxyPassword"))

    # -- what was configured ---------------------------------------------------------

    @property
    def options(self) -> OptionsMapping:
        """Every option set, under its canonical name, in the units given (milliseconds for ``*MS``)."""
        return self._options

    @property
    def seeds(self) -> tuple[Address, ...]:
        """(host, port) pairs to start discovery from (a Unix socket's port is None)."""
        return self._seeds

    @property
    def srv_host(self) -> Optional[str]:
        """The ``mongodb+srv`` host name (for SRV polling), or None."""
        return self._srv_host

    @property
    def srv_service_name(self) -> str:
        return self._get("srvServiceName", "mongodb")

    @property
    def srv_max_hosts(self) -> int:
        return self._get("srvMaxHosts", 0)

    @property
    def database(self) -> Optional[str]:
        """The connection string's database: the default for ``get_default_database``."""
        return self._database

    @property
    def collection(self) -> Optional[str]:
        return self._collection

    @property
    def credentials(self) -> Optional[MongoCredential]:
        return self._credentials

    @property
    def read_preference(self) -> ServerMode:
        return self._read_preference

    @property
    def read_concern(self) -> ReadConcern:
        return self._read_concern

    @property
    def write_concern(self) -> WriteConcern:
        return self._write_concern

    @property
    def server_api(self) -> Optional[ServerApi]:
        return self._get("server_api")

    @property
    def codec_options(self) -> Any:
        """A ``greenmongo.bson.CodecOptions`` from document_class, tz_aware, uuidRepresentation, ..."""
        return self._codec_options

    @property
    def replica_set_name(self) -> Optional[str]:
        return self._get("replicaSet")

    @property
    def direct_connection(self) -> Optional[bool]:
        """As configured; None when unset (SDAM decides)."""
        return self._get("directConnection")

    @property
    def load_balanced(self) -> bool:
        return bool(self._get("loadBalanced", False))

    @property
    def connect_timeout(self) -> Optional[float]:
        """Seconds to establish one connection; None = no timeout."""
        return _seconds(self._get("connectTimeoutMS", DEFAULT_CONNECT_TIMEOUT_MS))

    @property
    def socket_timeout(self) -> Optional[float]:
        return _seconds(self._get("socketTimeoutMS"))

    @property
    def server_selection_timeout(self) -> float:
        """Seconds; 0 means try once and fail at once if no server is suitable."""
        return self._get("serverSelectionTimeoutMS", DEFAULT_SERVER_SELECTION_TIMEOUT_MS) / 1000.0

    @property
    def heartbeat_frequency(self) -> float:
        return self._get("heartbeatFrequencyMS", DEFAULT_HEARTBEAT_FREQUENCY_MS) / 1000.0

    @property
    def local_threshold_ms(self) -> float:
        return self._get("localThresholdMS", DEFAULT_LOCAL_THRESHOLD_MS)

    @property
    def max_idle_time_seconds(self) -> Optional[float]:
        return _seconds(self._get("maxIdleTimeMS"))

    @property
    def wait_queue_timeout(self) -> Optional[float]:
        return _seconds(self._get("waitQueueTimeoutMS"))

    @property
    def timeout(self) -> Optional[float]:
        """timeoutMS in seconds: None when unset, 0.0 when set to 0 (no limit, CSOT spec)."""
        return _seconds(self._get("timeoutMS"), zero_is_none=False)

    @property
    def max_pool_size(self) -> Optional[int]:
        """None means no limit (maxPoolSize=0)."""
        return self._get("maxPoolSize", DEFAULT_MAX_POOL_SIZE) or None

    @property
    def min_pool_size(self) -> int:
        return self._get("minPoolSize", 0)

    @property
    def max_connecting(self) -> int:
        return self._get("maxConnecting", DEFAULT_MAX_CONNECTING)

    @property
    def pool_debug(self) -> bool:
        """greenmongo's ``pool_debug=True`` keyword, or ``GREENMONGO_POOL_DEBUG=1`` in the environment: pools
        record who holds each checked-out connection (``MongoClient.pool_holders()``)."""
        if "pool_debug" in self._options and self._options["pool_debug"] is not None:
            return bool(self._options["pool_debug"])
        return os.environ.get("GREENMONGO_POOL_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")

    @property
    def retry_writes(self) -> bool:
        return self._get("retryWrites", True)

    @property
    def retry_reads(self) -> bool:
        return self._get("retryReads", True)

    @property
    def server_monitoring_mode(self) -> str:
        return self._get("serverMonitoringMode", "auto")

    @property
    def appname(self) -> Optional[str]:
        return self._get("appname")

    @property
    def driver(self) -> Optional[DriverInfo]:
        """The ``driver=`` DriverInfo as given (``append_metadata`` does not change it)."""
        return self._get("driver")

    def append_driver_info(self, driver: DriverInfo) -> None:
        """Add a wrapping library's DriverInfo to the metadata of connections opened from now on
        (``MongoClient.append_metadata``). The one mutable part of the options: a list the
        handshake reads when it builds the client document."""
        self._driver_chain.append(driver)

    @property
    def compressors(self) -> tuple[str, ...]:
        return tuple(self._get("compressors", ()))

    @property
    def zlib_compression_level(self) -> int:
        return self._get("zlibCompressionLevel", -1)

    @property
    def tls(self) -> Any:
        """``greenmongo.options.connection_settings.TlsSettings`` when TLS is on, else None."""
        return self._tls

    @property
    def proxy(self) -> Any:
        """``greenmongo.options.connection_settings.ProxySettings`` when proxyHost is set, else None."""
        return self._proxy

    @property
    def event_listeners(self) -> tuple[Any, ...]:
        """The listeners ``monitoring.register()`` had added when this client was created, then the
        client's own ``event_listeners``."""
        return self._registered_listeners + tuple(self._get("event_listeners", ()))

    @property
    def server_selector(self) -> Any:
        return self._get("server_selector")

    @property
    def tracing(self) -> Optional[Mapping[str, Any]]:
        """The validated ``tracing`` option (OpenTelemetry), None when not given."""
        return self._get("tracing")

    @property
    def auto_encryption_opts(self) -> Any:
        return self._get("auto_encryption_opts")

    @property
    def connect(self) -> bool:
        return self._get("connect", True)

    @property
    def max_adaptive_retries(self) -> int:
        return self._get("maxAdaptiveRetries", 2)

    @property
    def enable_overload_retargeting(self) -> bool:
        return self._get("enableOverloadRetargeting", False)

    # -- views for the layers below -----------------------------------------------------

    def connection_settings(self) -> Any:
        """``greenmongo.options.connection_settings.ConnectionSettings`` for opening and handshaking connections."""
        return ConnectionSettings(
            connect_timeout=self.connect_timeout, socket_timeout=self.socket_timeout, tls=self._tls,
            proxy=self._proxy, compressors=self.compressors, zlib_compression_level=self.zlib_compression_level,
            appname=self.appname, driver_info=self._driver_chain, server_api=self.server_api,
            load_balanced=self.load_balanced,
            service_id_from_process_id=self.load_balanced and mock_service_id_requested())

    def topology_settings(self) -> Any:
        """``greenmongo.sdam.settings.TopologySettings`` for discovery and server selection."""
        from greenmongo.sdam.settings import TopologySettings

        return TopologySettings(
            seeds=self._seeds, replica_set_name=self.replica_set_name,
            direct_connection=bool(self.direct_connection), load_balanced=self.load_balanced,
            heartbeat_frequency=self.heartbeat_frequency, local_threshold_ms=float(self.local_threshold_ms),
            srv_max_hosts=self.srv_max_hosts)

    # -- immutability and display ---------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if not getattr(self, "_frozen", False):
            object.__setattr__(self, name, value)  # still inside __init__
            return
        raise AttributeError(f"ClientOptions is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClientOptions):
            return (self._seeds, self._options, self._credentials) == (
                other._seeds, other._options, other._credentials)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ClientOptions(seeds={list(self._seeds)!r}, database={self._database!r}, "
                f"options={self._options!r}, credentials={self._credentials!r})")


#: Set (to 1) in a test environment whose load-balanced services send no ``serviceId``: the Load Balancer
#: tests' README has drivers take it from ``topologyVersion.processId`` then. Read when a client is made.
MOCK_SERVICE_ID_VARIABLE = "GREENMONGO_TEST_MOCK_SERVICE_ID"


def mock_service_id_requested() -> bool:
    return os.environ.get(MOCK_SERVICE_ID_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def iter_option_names() -> Iterable[str]:
    """Every option name ClientOptions accepts (canonical spelling)."""
    from greenmongo.options.validators import OPTIONS

    return (option.name for option in OPTIONS)


__all__ = ["ClientOptions", "iter_option_names"]
