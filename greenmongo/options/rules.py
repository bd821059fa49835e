"""Rules that span several options, checked after every source (URI, TXT, keywords) is merged.

Single values are checked when read (``validators``); these are the
combinations the specs forbid. They always raise, even in the lenient
parsing mode, because the spec tests require an error for them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from greenmongo.errors import ConfigurationError
from greenmongo.options.builders import read_preference_from, write_concern_from

#: URI Options spec, "Conflicting TLS options": these pairs may not both appear.
TLS_CONFLICTS = (
    ("tlsInsecure", "tlsAllowInvalidCertificates"),
    ("tlsInsecure", "tlsAllowInvalidHostnames"),
    ("tlsInsecure", "tlsDisableOCSPEndpointCheck"),
    ("tlsInsecure", "tlsDisableCertificateRevocationCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableCertificateRevocationCheck"),
    ("tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck"),
)
#: The options that configure TLS (their presence turns TLS on unless ``tls=false``).
TLS_DETAIL_OPTIONS = (
    "tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames", "tlsCAFile", "tlsCertificateKeyFile",
    "tlsCertificateKeyFilePassword", "tlsCRLFile", "tlsDisableCertificateRevocationCheck",
    "tlsDisableOCSPEndpointCheck", "tlsInsecure",
)


def _is_set(options: Mapping[str, Any], name: str) -> bool:
    return options.get(name) is not None


def check_tls(options: Mapping[str, Any]) -> None:
    for first, second in TLS_CONFLICTS:
        if _is_set(options, first) and _is_set(options, second):
            raise ConfigurationError(f"{first} and {second} cannot be used together")
    if options.get("tls") is False:
        given = [name for name in TLS_DETAIL_OPTIONS if _is_set(options, name)]
        if given:
            raise ConfigurationError(f"TLS is disabled (tls=false) but TLS options are set: {', '.join(given)}")


def check_topology(options: Mapping[str, Any], seeds: Sequence[Any], is_srv: bool) -> None:
    """directConnection, loadBalanced, replicaSet and the SRV-only options."""
    direct = options.get("directConnection")
    if direct:
        if is_srv:
            raise ConfigurationError("directConnection=true cannot be used with a mongodb+srv URI")
        if len(seeds) > 1:
            raise ConfigurationError("directConnection=true cannot be used with multiple seed hosts")
    if options.get("loadBalanced"):
        if len(seeds) > 1:
            raise ConfigurationError("loadBalanced=true cannot be used with multiple hosts")
        if _is_set(options, "replicaSet"):
            raise ConfigurationError("loadBalanced=true cannot be used with replicaSet")
        if direct:
            raise ConfigurationError("loadBalanced=true cannot be used with directConnection=true")
    for name in ("srvServiceName", "srvMaxHosts"):
        if _is_set(options, name) and not is_srv:
            raise ConfigurationError(f"{name} can only be used with a mongodb+srv URI")
    if (options.get("srvMaxHosts") or 0) > 0:
        if _is_set(options, "replicaSet"):
            raise ConfigurationError("srvMaxHosts cannot be used with replicaSet")
        if options.get("loadBalanced"):
            raise ConfigurationError("srvMaxHosts cannot be used with loadBalanced=true")


def check_proxy(options: Mapping[str, Any]) -> None:
    """SOCKS5 spec: port/username/password need proxyHost; username and password go together."""
    if not _is_set(options, "proxyHost"):
        given = [name for name in ("proxyPort", "proxyUsername", "proxyPassword") if _is_set(options, name)]
        if given:
            raise ConfigurationError(f"{', '.join(given)} requires proxyHost")
    if _is_set(options, "proxyUsername") != _is_set(options, "proxyPassword"):
        raise ConfigurationError("proxyUsername and proxyPassword must be given together")


def check_pool(options: Mapping[str, Any]) -> None:
    max_size, min_size = options.get("maxPoolSize"), options.get("minPoolSize")
    if max_size and min_size is not None and min_size > max_size:
        raise ConfigurationError("minPoolSize cannot exceed maxPoolSize")  # the values may be URI text


def check_concerns(options: Mapping[str, Any]) -> None:
    """Build the read preference and write concern once, so their own checks run at parse time."""
    read_preference_from(options)
    write_concern_from(options)


def check_all(options: Mapping[str, Any], seeds: Sequence[Any], is_srv: bool) -> None:
    check_tls(options)
    check_topology(options, seeds, is_srv)
    check_proxy(options)
    check_pool(options)
    check_concerns(options)


__all__ = ["TLS_CONFLICTS", "TLS_DETAIL_OPTIONS", "check_all", "check_concerns", "check_pool", "check_proxy",
           "check_tls", "check_topology"]
