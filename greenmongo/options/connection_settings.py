"""Plain settings for one connection: what ``open_connection`` needs, nothing about URIs.

The options layer maps ``ClientOptions`` onto these frozen dataclasses; they
are hashable so TLS contexts and client metadata can be cached per value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from greenmongo.errors import ConfigurationError
from greenmongo.options.server_api import ServerApi

DEFAULT_CONNECT_TIMEOUT = 20.0
DEFAULT_PROXY_PORT = 1080


@dataclass(frozen=True)
class TlsSettings:
    """TLS options with the spec's names in snake case; ``insecure`` implies both ``allow_invalid_*``."""

    ca_file: Optional[str] = None
    certificate_key_file: Optional[str] = None
    certificate_key_file_password: Optional[str] = field(default=None, repr=False)
    crl_file: Optional[str] = None
    allow_invalid_certificates: bool = False
    allow_invalid_hostnames: bool = False
    insecure: bool = False
    disable_ocsp_endpoint_check: bool = False
    disable_certificate_revocation_check: bool = False

    @property
    def verify_certificates(self) -> bool:
        return not (self.insecure or self.allow_invalid_certificates)

    @property
    def verify_hostname(self) -> bool:
        """Checking the name on a certificate nobody verified would prove nothing."""
        return self.verify_certificates and not self.allow_invalid_hostnames

    @property
    def check_ocsp(self) -> bool:
        """OCSP (stapled responses and the cache) applies only while certificates are verified."""
        return self.verify_certificates and not self.disable_certificate_revocation_check

    @property
    def check_ocsp_endpoint(self) -> bool:
        """Whether a certificate's OCSP responders may be asked (non-stapled OCSP)."""
        return self.check_ocsp and not self.disable_ocsp_endpoint_check


@dataclass(frozen=True)
class ProxySettings:
    """A SOCKS5 proxy (proxyHost/proxyPort/proxyUsername/proxyPassword)."""

    host: str
    port: int = DEFAULT_PROXY_PORT
    #: Both are sensitive options (URI Options spec): neither appears in the repr.
    username: Optional[str] = field(default=None, repr=False)
    password: Optional[str] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if bool(self.username) != bool(self.password):
            raise ConfigurationError("proxyUsername and proxyPassword must be given together")


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything needed to open, secure and handshake one connection.

    Times are in seconds (None = no timeout). ``server_api`` and
    ``driver_info`` are duck-typed: anything with ``version``/``strict``/
    ``deprecation_errors`` resp. ``name``/``version``/``platform`` attributes.
    """

    connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT
    socket_timeout: Optional[float] = None
    tls: Optional[TlsSettings] = None
    proxy: Optional[ProxySettings] = None
    compressors: tuple[str, ...] = ()
    zlib_compression_level: int = -1
    appname: Optional[str] = None
    driver_info: Any = None
    server_api: Optional[ServerApi] = None
    load_balanced: bool = False
    #: The Load Balancer tests' mode: a hello reply without ``serviceId`` gets its
    #: ``topologyVersion.processId`` as one (for test deployments whose services do not send it).
    service_id_from_process_id: bool = False
    #: Ask for CRC-32C on requests we send (replies carrying one are always accepted).
    send_checksums: bool = False
    #: TCP keepalive idle time, capped so idle pooled sockets are not dropped by middleboxes.
    keepalive_idle: int = 120

    def __post_init__(self) -> None:
        if not -1 <= self.zlib_compression_level <= 9:
            raise ConfigurationError(
                f"zlibCompressionLevel must be between -1 and 9, not {self.zlib_compression_level}")


def server_api_fields(server_api: Optional[ServerApi]) -> dict[str, Any]:
    """The command fields a declared server API adds (only those the user set)."""
    if server_api is None:
        return {}
    fields: dict[str, Any] = {"apiVersion": str(server_api.version)}
    strict = getattr(server_api, "strict", None)
    if strict is not None:
        fields["apiStrict"] = strict
    deprecation_errors = getattr(server_api, "deprecation_errors", None)
    if deprecation_errors is not None:
        fields["apiDeprecationErrors"] = deprecation_errors
    return fields
