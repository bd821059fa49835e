"""Connection string parsing (Connection String and URI Options specs), with no I/O of its own.

``split_uri`` takes a ``mongodb://`` or ``mongodb+srv://`` string apart;
``parse_options`` turns its ``key=value`` pairs into validated, canonically
named values; ``parse_uri`` does both and, for ``mongodb+srv``, asks an
``SrvResolver`` for the seedlist (by default ``greenmongo.net.dns``, imported
only then). Structural errors raise InvalidURI saying which part is wrong;
option errors raise ConfigurationError, or with ``warn=True`` become warnings
and the option is ignored, which is the specs' lenient behaviour.

No message quotes the connection string's text (an unknown option's name, a
value, a database name, a host or port, a path): a mistyped connection string
can carry credentials anywhere (an unescaped ``/`` or ``?`` in a password, a
``?`` typed for ``&``), and error messages end up in logs. Messages name the
known option and the rule broken, or the position of an unknown or malformed
option instead. Options from a DNS TXT record are named: that text is not
typed by a user. Passwords never appear in reprs.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional
from urllib.parse import unquote

from greenmongo.errors import ConfigurationError, InvalidURI
from greenmongo.options import rules
from greenmongo.options.mapping import REDACTED, OptionsMapping
from greenmongo.options.seedlist import SrvResolver, check_srv_hostname, choose_hosts, discover
from greenmongo.options.validators import (
    BY_KEY,
    DEPRECATED,
    InvalidOptionValue,
    Option,
    canonical_name,
    lookup,
    redact_value,
)

SCHEME = "mongodb://"
SRV_SCHEME = "mongodb+srv://"
DEFAULT_PORT = 27017
#: SRV resolution timeout when the client sets no connectTimeoutMS (seconds).
DEFAULT_SRV_TIMEOUT = 20.0

Address = tuple[str, Optional[int]]

_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV4 = re.compile(r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}\Z")
_FORBIDDEN_DATABASE_CHARACTERS = ("/", "\\", " ", '"', "$")


# -- reporting -------------------------------------------------------------------

class Reporter:
    """Where option problems go: warnings (and the value is dropped) or ConfigurationError."""

    def __init__(self, warn: bool) -> None:
        self.lenient = warn

    def warning(self, message: str) -> None:
        warnings.warn(message, UserWarning, stacklevel=4)

    def invalid(self, message: str) -> None:
        if self.lenient:
            self.warning(f"{message}; the option is ignored")
        else:
            raise ConfigurationError(message)


# -- structure -------------------------------------------------------------------

@dataclass(frozen=True)
class UriParts:
    """A connection string taken apart, before any option is interpreted."""

    srv: bool
    username: Optional[str]
    password: Optional[str]
    hosts: tuple[Address, ...]
    database: Optional[str]
    collection: Optional[str]
    option_pairs: tuple[tuple[str, str], ...]

    @property
    def fqdn(self) -> Optional[str]:
        return self.hosts[0][0] if self.srv else None

    def __repr__(self) -> str:
        password = None if self.password is None else REDACTED
        return (f"UriParts(srv={self.srv}, username={self.username!r}, password={password!r}, "
                f"hosts={self.hosts!r}, database={self.database!r}, collection={self.collection!r})")


def _split_userinfo(userinfo: str) -> tuple[str, Optional[str]]:
    if "@" in userinfo or userinfo.count(":") > 1 or _BAD_PERCENT.search(userinfo):
        raise InvalidURI("The username and password in the connection string must be percent-encoded: "
                         "'@', ':' and '%' may not appear unescaped (RFC 3986)")
    user, colon, password = userinfo.partition(":")
    return unquote(user), (unquote(password) if colon else None)


def host_type(host: str) -> str:
    """"unix", "ip_literal", "ipv4" or "hostname" (the connection-string test vocabulary)."""
    if "/" in host:
        return "unix"
    if ":" in host:
        return "ip_literal"
    return "ipv4" if _IPV4.match(host) else "hostname"


def parse_host(entity: str, default_port: Optional[int] = DEFAULT_PORT) -> Address:
    """``host``, ``host:port``, ``[v6]:port`` or a percent-encoded ``.sock`` path -> (host, port).

    Hostnames are lower-cased; a Unix socket's port is None.
    Messages never quote ``entity``: after an unescaped '/' or '?' in a password, the "host" is the
    user name and the "port" the start of the password.
    """
    if entity.startswith("["):
        end = entity.find("]")
        if end == -1:
            raise InvalidURI("Invalid IP literal host: missing ']'")
        host, rest = entity[1:end], entity[end + 1:]
        if rest and not rest.startswith(":"):
            raise InvalidURI("Invalid IP literal host: unexpected text after ']'")
        port_text = rest[1:] if rest else None
        if not host:
            raise InvalidURI("Invalid host: empty IP literal")
    else:
        if entity.count(":") > 1:
            raise InvalidURI("Invalid host: IPv6 addresses must be in brackets, and a host has at most one port")
        host, colon, port_text = entity.partition(":")
        port_text = port_text if colon else None
        host = unquote(host)
        if not host:
            raise InvalidURI("Empty host name before the port" if entity else "Empty host in the connection string")
        if "/" in host:
            if not host.endswith(".sock"):
                raise InvalidURI("Unsupported host: a UNIX domain socket path must end in '.sock' and be "
                                 "percent-encoded")
            if port_text is not None:
                raise InvalidURI("A UNIX domain socket takes no port")
            return host, None
    if port_text is None:
        return host.lower(), default_port
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise InvalidURI("Invalid port: it must be an integer from 1 to 65535 (and a password's '/', '?', "
                         "'@' and ':' must be percent-encoded)")
    return host.lower(), int(port_text)


def _split_options(text: str) -> list[tuple[str, str]]:
    if not text:
        return []
    if "&" in text and ";" in text:
        raise InvalidURI("Connection string options may be separated by '&' or ';', not both")
    pairs = []
    items = [item for item in text.split("&" if "&" in text or ";" not in text else ";") if item]
    for position, item in enumerate(items, 1):  # numbered as parse_options numbers them
        key, equals, value = item.partition("=")
        if not equals or not key:  # not quoted: it may be a misplaced password
            raise InvalidURI(f"Connection string option number {position} is malformed: expected key=value")
        pairs.append((unquote(key), unquote(value)))
    return pairs


def split_uri(uri: str, default_port: Optional[int] = DEFAULT_PORT) -> UriParts:
    """Take a connection string apart (Connection String spec, "Reference Implementation")."""
    if not isinstance(uri, str):
        raise InvalidURI(f"A connection string must be a str, not {type(uri).__name__}")
    if uri.startswith(SCHEME):
        srv, rest = False, uri[len(SCHEME):]
    elif uri.startswith(SRV_SCHEME):
        srv, rest = True, uri[len(SRV_SCHEME):]
    else:
        raise InvalidURI(f"Invalid connection string scheme: it must begin with {SCHEME!r} or {SRV_SCHEME!r}")

    cut = min((i for i in (rest.find("/"), rest.find("?")) if i != -1), default=len(rest))
    host_info, path = rest[:cut], rest[cut:]
    if path.startswith("/"):
        path = path[1:]
    database_text, _, options_text = path.partition("?")

    if "@" in database_text:  # userinfo cut short by an unescaped '/': never echo what follows
        raise InvalidURI("The username and password in the connection string must be percent-encoded "
                         "(an unescaped '/' ended the host list early); so must an '@' in a database name")
    userinfo, at, hosts_text = host_info.rpartition("@")
    username = password = None
    if at:
        username, password = _split_userinfo(userinfo)
    if not hosts_text:
        raise InvalidURI("The connection string has no host")

    if srv:
        if "," in hosts_text:
            raise InvalidURI("A mongodb+srv connection string takes exactly one host name")
        if ":" in hosts_text:
            raise InvalidURI("A mongodb+srv connection string cannot have a port number")
        hosts: tuple[Address, ...] = ((check_srv_hostname(unquote(hosts_text)), None),)
    else:
        entities = hosts_text.split(",")
        parsed = []
        for position, entity in enumerate(entities, 1):
            try:
                parsed.append(parse_host(entity, default_port))
            except InvalidURI as exc:
                if len(entities) == 1:
                    raise
                raise InvalidURI(f"{exc} (host number {position} of the connection string)") from None
        hosts = tuple(parsed)

    database = collection = None
    if database_text:
        database = unquote(database_text)
        bad = [c for c in _FORBIDDEN_DATABASE_CHARACTERS if c in database]
        if bad:  # the name is not quoted (a misplaced password may be in it), the characters are
            raise InvalidURI(f"Invalid database name in the connection string: it cannot contain "
                             f"{' '.join(bad)!r}")
        if "." in database:
            database, collection = database.split(".", 1)

    return UriParts(srv, username, password, hosts, database, collection, tuple(_split_options(options_text)))


# -- options ---------------------------------------------------------------------

def _value_of(option: Option, key: str, raw: str, reporter: Reporter, from_uri: bool) -> tuple[bool, Any]:
    """(ok, value) for one occurrence; ok is False when it must be ignored. The key is a known option's
    (it may be named); the value is shown only when it comes from a TXT record and is not a secret."""
    kind = option.kind
    if raw == "" and kind.empty != "parse":
        if kind.empty == "error":
            raise ConfigurationError(f"{option.name} cannot be empty")
        reporter.warning(f"Empty value for {key!r} is ignored")
        return False, None
    try:
        return True, kind.from_text(option.name, raw, reporter.warning)
    except InvalidOptionValue as exc:
        if from_uri or option.secret:
            reporter.invalid(f"Unsupported value for {key!r}: {exc}")
        else:
            reporter.invalid(f"Unsupported value {raw!r} for {key!r}: {exc.described()}")
        return False, None


def parse_options(pairs: Iterable[tuple[str, str]], reporter: Reporter,
                  validate: bool = True, from_uri: bool = True) -> dict[str, Any]:
    """Validate decoded ``key=value`` pairs into {canonical name: value}.

    Unknown keys are warned about and ignored; a repeated key warns and the
    last wins (readPreferenceTags is a list; repeated proxy options and
    disagreeing tls/ssl are errors); a deprecated key loses to its replacement.
    ``from_uri``: the pairs are a connection string's, so no message quotes an
    unknown key or any value (a TXT record's pairs pass False: they are named).
    """
    found: dict[str, list[tuple[str, str]]] = {}
    renamed: dict[str, list[tuple[str, str]]] = {}
    for position, (key, raw) in enumerate(pairs, 1):
        lowered = key.lower()
        option = lookup(key)
        if option is not None and option.uri:
            found.setdefault(option.name, []).append((key, raw))
        elif lowered in DEPRECATED:
            renamed.setdefault(DEPRECATED[lowered], []).append((key, raw))
        elif from_uri:
            reporter.warning(f"Unsupported option number {position} of the connection string is ignored (its "
                             "name is not shown: a mistyped connection string can carry credentials)")
        else:
            reporter.warning(f"Unsupported option {key!r} is ignored")

    for name, occurrences in renamed.items():
        old = occurrences[-1][0]
        if name in found:
            reporter.warning(f"Deprecated key {old!r} present and ignored as found replacement {name!r} value")
        else:
            reporter.warning(f"Deprecated key {old!r} has been replaced with {name!r}")
            found[name] = occurrences

    options: dict[str, Any] = {}
    for name, occurrences in found.items():
        option = BY_KEY[name.lower()]
        if not validate:
            options[name] = [raw for _, raw in occurrences] if option.repeated else occurrences[-1][1]
            continue
        if option.repeated:
            values = [_value_of(option, key, raw, reporter, from_uri) for key, raw in occurrences]
            if all(ok for ok, _ in values):
                options[name] = [value for _, value in values]
            continue
        if len(occurrences) > 1 and name.startswith("proxy"):
            raise ConfigurationError(f"{name} may appear only once")
        values = [value for ok, value in (_value_of(option, key, raw, reporter, from_uri)
                                          for key, raw in occurrences) if ok]
        if len(occurrences) > 1:
            if name == "tls":
                if len(set(values)) > 1:
                    raise ConfigurationError("All instances of tls and ssl must have the same value")
            else:
                reporter.warning(f"Duplicate option {occurrences[-1][0]!r}: the last valid value is used")
        if values:
            options[name] = values[-1]
    return options


def options_mapping(options: Mapping[str, Any]) -> OptionsMapping:
    """A read-only, case-insensitive, alias-aware view with secrets hidden from repr."""
    return OptionsMapping(options, resolve=canonical_name, secret=redact_value)


# -- the whole thing ---------------------------------------------------------------

class ParsedUri(dict[str, Any]):
    """``parse_uri``'s result: a plain dict (PyMongo's keys) whose repr hides the password."""

    def __repr__(self) -> str:
        shown = dict(self)
        if shown.get("password") is not None:
            shown["password"] = REDACTED
        return f"ParsedUri({shown!r})"


#: Makes the resolver ``mongodb+srv`` URIs use when none is passed; ``greenmongo.net.dns`` registers its
#: cooperative resolver at import, so this pure layer never imports the network layer.
_default_resolver: Optional[Callable[[], SrvResolver]] = None


def set_default_srv_resolver(factory: Optional[Callable[[], SrvResolver]]) -> None:
    global _default_resolver
    _default_resolver = factory


def resolve_seedlist(fqdn: str, options: dict[str, Any], reporter: Reporter,
                     resolver: Optional[SrvResolver], timeout: Optional[float]) -> list[tuple[str, int]]:
    """SRV and TXT for ``fqdn``: returns every SRV host and merges TXT options under ``options``.

    TXT values are the weakest source: anything already in ``options`` wins.
    TLS is turned on unless ``options`` says otherwise.
    """
    if resolver is None:
        if _default_resolver is None:
            raise ConfigurationError("a mongodb+srv URI needs a DNS resolver: import greenmongo (net.dns registers "
                                     "one) or pass srv_resolver")
        resolver = _default_resolver()
    seedlist = discover(fqdn, options.get("srvServiceName") or "mongodb", resolver, timeout)
    for name, value in parse_options(seedlist.txt_options, reporter, from_uri=False).items():
        options.setdefault(name, value)
    options.setdefault("tls", True)
    return list(seedlist.hosts)


def srv_timeout(options: Mapping[str, Any], connect_timeout: Optional[float] = None) -> float:
    """DNS gets the connect timeout (seconds) when one is set, else DEFAULT_SRV_TIMEOUT."""
    if connect_timeout:
        return connect_timeout
    millis = options.get("connectTimeoutMS")
    return millis / 1000.0 if millis else DEFAULT_SRV_TIMEOUT


def parse_uri(
    uri: str,
    default_port: Optional[int] = DEFAULT_PORT,
    validate: bool = True,
    warn: bool = False,
    normalize: bool = True,
    connect_timeout: Optional[float] = None,
    srv_service_name: Optional[str] = None,
    srv_max_hosts: Optional[int] = None,
    srv_resolver: Optional[SrvResolver] = None,
) -> ParsedUri:
    """Parse a connection string into PyMongo's dict shape.

    Keys: ``nodelist`` [(host, port)], ``username``, ``password``,
    ``database``, ``collection``, ``options`` (canonical names, looked up
    case-insensitively; times stay in the URI's units, e.g. milliseconds),
    ``fqdn`` (the SRV host name or None). For ``mongodb+srv`` the nodelist is
    the SRV answer (at most ``srvMaxHosts`` of it) and ``options`` include the
    TXT record's and ``tls=True`` unless the URI set tls/ssl. ``validate=False``
    keeps option values as raw text and skips the cross-option rules.
    ``normalize`` is accepted for PyMongo compatibility (names are always canonical).
    """
    parts = split_uri(uri, default_port)
    reporter = Reporter(warn)
    options = parse_options(parts.option_pairs, reporter, validate)
    if srv_service_name is not None:
        options["srvServiceName"] = srv_service_name
    if srv_max_hosts is not None:
        options["srvMaxHosts"] = srv_max_hosts

    nodes: list[Address] = list(parts.hosts)
    if parts.srv:
        nodes = list(resolve_seedlist(parts.hosts[0][0], options, reporter, srv_resolver,
                                      srv_timeout(options if validate else {}, connect_timeout)))
    if validate:
        rules.check_all(options, nodes, parts.srv)
    if parts.srv:
        nodes = list(choose_hosts(nodes, options.get("srvMaxHosts") if validate else None))

    return ParsedUri(
        nodelist=nodes,
        username=parts.username,
        password=parts.password,
        database=parts.database,
        collection=parts.collection,
        options=options_mapping(options),
        fqdn=parts.fqdn,
    )


__all__ = ["DEFAULT_PORT", "ParsedUri", "Reporter", "SCHEME", "SRV_SCHEME", "UriParts", "host_type",
           "options_mapping", "parse_host", "parse_options", "parse_uri", "split_uri"]
