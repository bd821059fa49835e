"""PyMongo's ``pymongo.uri_parser``: ``parse_uri`` and its helpers, with PyMongo's signatures and results.

Libraries parse a connection string themselves before handing it to MongoClient (MongoEngine reads
the database, credentials and ``options["replicaSet"]`` this way). The string is taken apart by
greenmongo's own parser (``greenmongo.options.uri``: hosts, userinfo, database, ``key=value``
pairs, the SRV and TXT lookups), so what MongoClient accepts is what is parsed here; the option
values then go through PyMongo's validators (``greenmongo.common.URI_OPTIONS_VALIDATOR_MAP``) so the
``options`` dict holds what PyMongo's holds: times in seconds, ``uuidrepresentation`` as a number,
unknown options an error unless ``warn=True``.

Deliberately like the Connection String spec rather than PyMongo: a ``+`` in the user name, password
or an option value is a plus, not a space (PyMongo decodes with ``unquote_plus``).

As PyMongo 4.20.1 (``from_uri``), errors and warnings about a connection string's options quote no
unknown key and no value, because a mistyped connection string can carry credentials; options from a DNS
TXT record are named. The structural messages (hosts, ports, the database name) come from
``greenmongo.options.uri``, which quotes none of the string's text.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping, MutableMapping, Optional

from greenmongo.common import (
    INTERNAL_URI_OPTION_NAME_MAP,
    SRV_SERVICE_NAME,
    URI_OPTIONS_DEPRECATION_MAP,
    URI_OPTIONS_VALIDATOR_MAP,
    _CaseInsensitiveDictionary,
    get_validated_options,
)
from greenmongo.errors import ConfigurationError, InvalidURI
from greenmongo.options import rules
from greenmongo.options import uri as _uri
from greenmongo.options.seedlist import choose_hosts, discover
from greenmongo.options.validators import TXT_ALLOWED

SCHEME = _uri.SCHEME
SCHEME_LEN = len(SCHEME)
SRV_SCHEME = _uri.SRV_SCHEME
SRV_SCHEME_LEN = len(SRV_SCHEME)
DEFAULT_PORT = _uri.DEFAULT_PORT

#: The URI Options spec's option names in their canonical spelling: ``parse_uri`` returns these keys
#: spelled so, every other option lower-cased (as PyMongo 4.14+).
URI_OPTIONS = frozenset({
    "appname", "authMechanism", "authMechanismProperties", "authSource", "compressors", "connectTimeoutMS",
    "directConnection", "heartbeatFrequencyMS", "journal", "loadBalanced", "localThresholdMS", "maxIdleTimeMS",
    "maxPoolSize", "maxConnecting", "maxStalenessSeconds", "minPoolSize", "proxyHost", "proxyPort",
    "proxyUsername", "proxyPassword", "readConcernLevel", "readPreference", "readPreferenceTags", "replicaSet",
    "retryReads", "retryWrites", "serverMonitoringMode", "serverSelectionTimeoutMS", "serverSelectionTryOnce",
    "socketTimeoutMS", "srvAllowedHostsSuffix", "srvMaxHosts", "srvServiceName", "ssl", "tls",
    "tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames", "tlsCAFile", "tlsCertificateKeyFile",
    "tlsCertificateKeyFilePassword", "tlsDisableCertificateRevocationCheck", "tlsDisableOCSPEndpointCheck",
    "tlsInsecure", "w", "waitQueueTimeoutMS", "wTimeoutMS", "zlibCompressionLevel",
})
_CANONICAL = {name.lower(): name for name in URI_OPTIONS}
#: Options greenmongo's MongoClient supports that PyMongo's validator table lacks (SOCKS5, revocation).
_GREENMONGO_VALIDATORS: dict[str, Callable[[Any, Any], Any]] = {}
#: tlsInsecure=true implies these.
_IMPLIED_BY_TLS_INSECURE = ("tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames", "tlsDisableOCSPEndpointCheck")
#: PyMongo 4.20's SRV host checks greenmongo has not built.
_NOT_BUILT = "srvAllowedHostsSuffix and srv_host_validator (PyMongo 4.20) are not implemented in greenmongo"


# -- userinfo and hosts --------------------------------------------------------------------------------

def parse_userinfo(userinfo: str) -> tuple[str, str]:
    """``user:password`` (percent-encoded) -> (user, password); the password is "" when absent.

    InvalidURI when '@', a second ':' or a stray '%' is not escaped, or the user name is empty.
    """
    user, password = _uri._split_userinfo(userinfo)
    if not user:
        raise InvalidURI("The empty string is not valid username")
    return user, password or ""


def parse_ipv6_literal_host(entity: str, default_port: Optional[int]) -> tuple[str, Any]:
    """``[address]`` or ``[address]:port`` -> (address, port): the port as written (a string), or
    ``default_port``. ValueError without the closing bracket."""
    if "]" not in entity:
        raise ValueError("an IPv6 address literal must be enclosed in '[' and ']' according to RFC 2732.")
    end = entity.find("]:")
    if end == -1:
        return entity[1:-1], default_port
    return entity[1:end], entity[end + 2:]


def parse_host(entity: str, default_port: Optional[int] = DEFAULT_PORT) -> tuple[str, Optional[int]]:
    """``host``, ``host:port``, ``[v6]:port`` or a ``.sock`` path -> (host lower-cased, port).

    ValueError for a malformed host or port (as PyMongo's).
    """
    if entity.endswith(".sock") and "/" in entity:  # an already decoded socket path
        return entity, default_port
    try:
        return _uri.parse_host(entity, default_port)
    except InvalidURI as exc:
        raise ValueError(str(exc)) from None


def split_hosts(hosts: str, default_port: Optional[int] = DEFAULT_PORT) -> list[tuple[str, Optional[int]]]:
    """``host1[:port],host2[:port],...`` -> [(host, port), ...]; a percent-encoded ``.sock`` path gets
    port None. ConfigurationError for an empty entry, ValueError for a malformed one."""
    nodes = []
    for entity in hosts.split(","):
        if not entity:
            raise ConfigurationError("Empty host (or extra comma in host list)")
        nodes.append(parse_host(entity, default_port))
    return nodes


# -- options -------------------------------------------------------------------------------------------

def _collect(pairs: Any, from_uri: bool) -> _CaseInsensitiveDictionary:
    """Decoded ``(key, value)`` pairs -> options; readPreferenceTags accumulates, a repeat warns (naming
    the key if it is a known option or not a connection string's: an unknown one may be credential text)."""
    options = _CaseInsensitiveDictionary()
    for key, value in pairs:
        if key.lower() == "readpreferencetags":
            options.setdefault(key, []).append(value)
            continue
        if key in options:
            known = key.lower() in URI_OPTIONS_VALIDATOR_MAP or key.lower() in _GREENMONGO_VALIDATORS
            if known or not from_uri:
                warnings.warn(f"Duplicate URI option '{key.lower()}'.", stacklevel=3)
            else:
                warnings.warn("Duplicate URI option.", stacklevel=3)
        options[key] = value
    return options


def _is_true(value: Any) -> bool:
    return value is True or value == "true"


def _check_security(options: _CaseInsensitiveDictionary) -> None:
    """TLS options that contradict each other raise InvalidURI; tlsAllowInvalidCertificates set to the
    boolean True (not the text "true" a connection string carries) turns the OCSP endpoint check off."""
    for first, second in rules.TLS_CONFLICTS:
        if first in options and second in options:
            raise InvalidURI(f"URI options {options.cased_key(first)} and {options.cased_key(second)} cannot be "
                             "specified simultaneously.")
    if options.get("tlsAllowInvalidCertificates") is True:
        options["tlsDisableOCSPEndpointCheck"] = True
    if "tlsCRLFile" in options:
        for name in ("tlsInsecure", "tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"):
            if _is_true(options.get(name)):
                raise InvalidURI(f"URI option {name}=True cannot be specified when CRL checking is enabled.")
    if "ssl" in options and "tls" in options and options["ssl"] != options["tls"]:
        raise InvalidURI(f"Can not specify conflicting values for URI options {options.cased_key('ssl')} and "
                         f"{options.cased_key('tls')}.")


def _normalize(options: _CaseInsensitiveDictionary) -> None:
    """tlsInsecure sets the options it implies; aliases (ssl) become the name the driver uses (tls)."""
    if "tlsInsecure" in options:
        for name in _IMPLIED_BY_TLS_INSECURE:
            options[name] = options["tlsInsecure"]
    for key in list(options):
        internal = INTERNAL_URI_OPTION_NAME_MAP.get(key.lower())
        if internal is not None:
            options[internal] = options.pop(key)


def _deprecations(options: _CaseInsensitiveDictionary) -> None:
    for key in list(options):
        mode, message = URI_OPTIONS_DEPRECATION_MAP.get(key.lower(), (None, ""))
        if mode == "renamed":
            if message in options:
                warnings.warn(f"Deprecated option '{key}' ignored in favor of '{message}'.", DeprecationWarning,
                              stacklevel=4)
                options.pop(key)
            else:
                warnings.warn(f"Option '{key}' is deprecated, use '{message}' instead.", DeprecationWarning,
                              stacklevel=4)
        elif mode == "removed":
            warnings.warn(f"Option '{key}' is deprecated. {message}.", DeprecationWarning, stacklevel=4)


def _options_from_pairs(pairs: Any, validate: bool, warn: bool, normalize: bool,
                        from_uri: bool) -> _CaseInsensitiveDictionary:
    options = _collect(pairs, from_uri)
    _check_security(options)
    _deprecations(options)
    if normalize:
        _normalize(options)
    if validate:
        options = validate_options(options, warn, from_uri=from_uri)
        if options.get("authSource") == "":
            raise InvalidURI("the authSource database cannot be an empty string")
    return options


def validate_options(opts: Mapping[str, Any], warn: bool = False,
                     from_uri: bool = False) -> _CaseInsensitiveDictionary:
    """Validate connection string options (text values) with PyMongo's validators; a new mapping.

    An unknown option or a bad value raises, or with ``warn=True`` warns and is left out. ``from_uri``:
    the options are a connection string's, so no message quotes an unknown key or a value.
    """
    known = {key: value for key, value in opts.items() if key.lower() not in _GREENMONGO_VALIDATORS}
    validated = _CaseInsensitiveDictionary(get_validated_options(known, warn, from_uri=from_uri))
    for key, value in opts.items():
        check = _GREENMONGO_VALIDATORS.get(key.lower())
        if check is not None:
            validated[key] = check(key, value)
    return validated


def split_options(opts: str, validate: bool = True, warn: bool = False, normalize: bool = True,
                  from_uri: bool = True) -> MutableMapping[str, Any]:
    """The options part of a connection string (``a=1&b=2`` or ``a=1;b=2``) -> a case-insensitive
    mapping; ``validate`` runs PyMongo's validators (``warn``: warn and drop bad ones instead of
    raising), ``normalize`` renames aliases (``ssl`` -> ``tls``). ``from_uri`` (the default): the text
    is a connection string's, so no message quotes an unknown key or a value; False for a TXT record's."""
    if "=" not in opts:
        raise InvalidURI("MongoDB URI options are key=value pairs")
    return _options_from_pairs(_uri._split_options(opts), validate, warn, normalize, from_uri)


def _case_sensitive(options: Mapping[str, Any]) -> dict[str, Any]:
    """PyMongo 4.14+'s ``options`` dict: spec option names in their canonical spelling, others lower-case."""
    return {_CANONICAL.get(key.lower(), key.lower()): value for key, value in options.items()}


def _check_topology(nodes: list, options: Mapping[str, Any]) -> None:
    if len(nodes) > 1 and _is_true(options.get("directConnection")):
        raise ConfigurationError("Cannot specify multiple hosts with directConnection=true")
    if _is_true(options.get("loadBalanced")):
        if len(nodes) > 1:
            raise ConfigurationError("Cannot specify multiple hosts with loadBalanced=true")
        if _is_true(options.get("directConnection")):
            raise ConfigurationError("Cannot specify directConnection=true with loadBalanced=true")
        if options.get("replicaSet"):
            raise ConfigurationError("Cannot specify replicaSet with loadBalanced=true")


# -- the whole thing -------------------------------------------------------------------------------------

def parse_uri(
    uri: str,
    default_port: Optional[int] = DEFAULT_PORT,
    validate: bool = True,
    warn: bool = False,
    normalize: bool = True,
    connect_timeout: Optional[float] = None,
    srv_service_name: Optional[str] = None,
    srv_max_hosts: Optional[int] = None,
    srv_allowed_hosts_suffix: Optional[str] = None,
    srv_host_validator: Optional[Callable[[str], bool]] = None,
) -> dict[str, Any]:
    """Parse and validate a connection string into PyMongo's dict::

        {"nodelist": [(host, port), ...], "username": str or None, "password": str or None,
         "database": str or None, "collection": str or None, "options": dict, "fqdn": str or None}

    For ``mongodb+srv://`` the nodelist and part of the options come from DNS (SRV and TXT), and
    ``tls`` defaults to true. ``connect_timeout`` bounds the DNS queries (seconds).
    ``srv_allowed_hosts_suffix`` and ``srv_host_validator`` raise ConfigurationError: not built.
    """
    if srv_allowed_hosts_suffix is not None or srv_host_validator is not None:
        raise ConfigurationError(_NOT_BUILT)
    parts = _uri.split_uri(uri, default_port)
    username, password = parts.username, parts.password
    if username is not None:  # an '@' was there
        if not username:
            raise InvalidURI("The empty string is not valid username")
        password = password or ""
    options = _options_from_pairs(parts.option_pairs, validate, warn, normalize, from_uri=True)
    if "srvAllowedHostsSuffix" in options:
        if not parts.srv:
            raise ConfigurationError("The srvAllowedHostsSuffix option is only allowed with 'mongodb+srv://' URIs")
        raise ConfigurationError(_NOT_BUILT)

    nodes = list(parts.hosts)
    max_hosts = srv_max_hosts or options.get("srvMaxHosts")
    if parts.srv:
        if _is_true(options.get("directConnection")):
            raise ConfigurationError(f"Cannot specify directConnection=true with {SRV_SCHEME} URIs")
        assert parts.fqdn is not None  # a mongodb+srv URI names its host
        nodes = _resolve_srv(parts.fqdn, options, validate, warn, normalize, connect_timeout,
                             srv_service_name or options.get("srvServiceName") or SRV_SERVICE_NAME)
        if max_hosts and _is_true(options.get("loadBalanced")):
            raise InvalidURI("You cannot specify loadBalanced with srvMaxHosts")
        if max_hosts and options.get("replicaSet"):
            raise InvalidURI("You cannot specify replicaSet with srvMaxHosts")
        nodes = choose_hosts(nodes, int(max_hosts) if max_hosts else None)
    elif options.get("srvServiceName") is not None:
        raise ConfigurationError("The srvServiceName option is only allowed with 'mongodb+srv://' URIs")
    elif max_hosts:
        raise ConfigurationError("The srvMaxHosts option is only allowed with 'mongodb+srv://' URIs")
    _check_topology(nodes, options)
    return {
        "nodelist": nodes,
        "username": username,
        "password": password,
        "database": parts.database,
        "collection": parts.collection,
        "options": _case_sensitive(options),
        "fqdn": parts.fqdn,
    }


def _resolve_srv(fqdn: str, options: _CaseInsensitiveDictionary, validate: bool, warn: bool, normalize: bool,
                 connect_timeout: Optional[float], service_name: str) -> list:
    """SRV hosts for ``fqdn``; the TXT record's options are merged under the URI's (which win)."""
    from greenmongo.net.dns import default_resolver  # the only I/O: imported when SRV is used

    timeout = connect_timeout or _uri.srv_timeout({}, options.get("connectTimeoutMS") if validate else None)
    seedlist = discover(fqdn, service_name, default_resolver(), timeout)
    txt = _options_from_pairs(seedlist.txt_options, validate, warn, normalize, from_uri=False)  # named: DNS text
    if any(key.lower() not in TXT_ALLOWED for key in txt):
        raise ConfigurationError("Only authSource, replicaSet, and loadBalanced are supported from DNS")
    for key, value in txt.items():
        if key not in options:
            options[key] = value
    if "tls" not in options and "ssl" not in options:
        options["tls"] = True if validate else "true"
    return list(seedlist.hosts)


def _register_greenmongo_options() -> None:
    from greenmongo.common import (
        validate_boolean_or_string,
        validate_non_negative_integer,
        validate_string,
        validate_string_or_none,
    )

    def port(option: str, value: Any) -> int:
        number = validate_non_negative_integer(option, value)
        if number > 65535:
            raise ValueError(f"{option} must be between 0 and 65535")
        return number

    _GREENMONGO_VALIDATORS.update({
        "proxyhost": validate_string,
        "proxyport": port,
        "proxyusername": validate_string_or_none,
        "proxypassword": validate_string_or_none,
        "tlsdisablecertificaterevocationcheck": validate_boolean_or_string,
    })


_register_greenmongo_options()

__all__ = ["DEFAULT_PORT", "SCHEME", "SCHEME_LEN", "SRV_SCHEME", "SRV_SCHEME_LEN", "SRV_SERVICE_NAME",
           "URI_OPTIONS", "URI_OPTIONS_VALIDATOR_MAP", "parse_host", "parse_ipv6_literal_host", "parse_uri",
           "parse_userinfo", "split_hosts", "split_options", "validate_options"]
