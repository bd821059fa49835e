"""Every client option: its canonical name, how its value is read, and what is valid.

One table (``OPTIONS``) drives both connection-string parsing (values arrive
as percent-decoded text) and keyword arguments (values arrive as Python
objects). A bad value raises :class:`InvalidOptionValue`; the caller decides
whether that becomes a ConfigurationError (strict) or a warning (the
Connection String spec's lenient mode). Its text never contains the value:
a mistyped connection string can carry credentials in any option, so only a
keyword argument's caller adds the value (``described()``).
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Callable, Hashable, Iterable, Mapping, Optional, Sequence, TypeVar

from greenmongo.bson.binary import UuidRepresentation
from greenmongo.bson.datetime_ms import DatetimeConversion
from greenmongo.options.mapping import REDACTED

Warn = Callable[[str], None]


class InvalidOptionValue(ValueError):
    """A value this option cannot take. ``str()`` says why without the value; ``described()`` adds the
    value for messages about keyword arguments (never about connection string text)."""

    def __init__(self, message: str, shown: str = "", *, out_of_range: bool = False, unknown: bool = False) -> None:
        super().__init__(message)
        self.shown = shown
        self.unknown = unknown  # not an option at all
        self.wrong_type = False  # set where even a string value is of the wrong type (options taking objects)
        #: A value outside the option's bounds or choices (a negative pool size, an unknown mode): PyMongo
        #: raises ValueError for those, TypeError for a keyword value of the wrong type.
        self.out_of_range = out_of_range

    def described(self) -> str:
        return f"{self}, not {self.shown}" if self.shown else str(self)


# -- value kinds ---------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?\d+\Z")
_TRUE = ("true",)
_FALSE = ("false",)
_LEGACY_TRUE = ("1", "yes", "y", "t")
_LEGACY_FALSE = ("0", "-1", "no", "n", "f")


class Kind:
    """How one option's value is read from text and from Python, and validated."""

    #: What an empty string in the connection string means: "ignore" it (with a
    #: warning, per the Connection String spec for integers and booleans),
    #: "error", or "parse" it like any other text.
    empty = "parse"
    describe = "a value"

    def from_text(self, name: str, text: str, warn: Warn) -> Any:
        raise NotImplementedError

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        if isinstance(value, str):
            return self.from_text(name, value, warn)
        raise InvalidOptionValue(f"{name} must be {self.describe}, not {type(value).__name__}")


class Boolean(Kind):
    empty = "ignore"
    describe = '"true" or "false"'

    def from_text(self, name: str, text: str, warn: Warn) -> bool:
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        if lowered in _LEGACY_TRUE or lowered in _LEGACY_FALSE:
            canonical = "true" if lowered in _LEGACY_TRUE else "false"
            warn(f'Deprecated boolean value for "{name}": "{text}", please update to "{name}={canonical}"')
            return canonical == "true"
        raise InvalidOptionValue(f'{name} must be "true" or "false"')

    def from_python(self, name: str, value: Any, warn: Warn) -> bool:
        if isinstance(value, bool):
            return value
        parsed: bool = super().from_python(name, value, warn)  # text, through from_text
        return parsed


_Number = TypeVar("_Number", int, float)


class Integer(Kind):
    """A whole number within bounds; ``number=True`` also takes floats from Python (timeouts)."""

    empty = "ignore"

    def __init__(self, minimum: Optional[int] = None, maximum: Optional[int] = None, *,
                 also: Sequence[int] = (), number: bool = False, describe: str = "") -> None:
        self.minimum, self.maximum, self.also, self.number = minimum, maximum, tuple(also), number
        self.describe = describe or self._describe()

    def _describe(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"an integer from {self.minimum} to {self.maximum}"
        if self.minimum == 0:
            return "a non-negative integer"
        if self.minimum == 1:
            return "a positive integer"
        if self.minimum is not None:
            return f"an integer >= {self.minimum}"
        return "an integer"

    def _check(self, name: str, value: _Number) -> _Number:
        if value in self.also:
            return value
        if (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum):
            raise InvalidOptionValue(f"{name} must be {self.describe}", shown=repr(value), out_of_range=True)
        return value

    def from_text(self, name: str, text: str, warn: Warn) -> int:
        if not _INTEGER.match(text.strip()):
            raise InvalidOptionValue(f"{name} must be {self.describe}")
        return self._check(name, int(text))

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        if isinstance(value, bool):
            raise InvalidOptionValue(f"{name} must be {self.describe}, not a bool")
        if isinstance(value, int) or (self.number and isinstance(value, float) and value == value):
            return self._check(name, value)
        return super().from_python(name, value, warn)


class String(Kind):
    def __init__(self, *, empty: str = "parse", max_bytes: Optional[int] = None) -> None:
        self.empty = empty
        self.max_bytes = max_bytes
        self.describe = "a string"

    def from_text(self, name: str, text: str, warn: Warn) -> str:
        if self.max_bytes is not None and len(text.encode("utf-8")) > self.max_bytes:
            raise InvalidOptionValue(f"{name} must be at most {self.max_bytes} bytes in UTF-8")
        return text


class Choice(Kind):
    """One of a fixed set of names (matched exactly, or case-insensitively), mapped to a value."""

    def __init__(self, choices: Mapping[str, Any], *, case_sensitive: bool = True,
                 python_values: Iterable[Any] = ()) -> None:
        self.choices = dict(choices)
        self.case_sensitive = case_sensitive
        self.python_values = tuple(python_values)
        self.describe = "one of " + ", ".join(f'"{c}"' for c in self.choices)

    def from_text(self, name: str, text: str, warn: Warn) -> Any:
        if text in self.choices:
            return self.choices[text]
        if not self.case_sensitive:
            for choice, value in self.choices.items():
                if choice.lower() == text.lower():
                    return value
        raise InvalidOptionValue(f"{name} must be {self.describe}")

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        if not isinstance(value, (str, bool)) and value in self.python_values:
            return value
        try:
            return super().from_python(name, value, warn)
        except InvalidOptionValue as exc:
            # Not one of the choices: PyMongo's ValueError, whatever the type (but a list or dict: TypeError).
            exc.out_of_range = isinstance(value, Hashable)
            raise


class WriteConcernW(Kind):
    """``w``: a non-negative integer, or a tag set / "majority" name."""

    empty = "ignore"
    describe = "a non-negative integer or a string"

    def from_text(self, name: str, text: str, warn: Warn) -> Any:
        if _INTEGER.match(text):
            value = int(text)
            if value < 0:
                raise InvalidOptionValue(f"{name} must be {self.describe}", shown=str(value))
            return value
        return text

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                raise InvalidOptionValue(f"{name} must be {self.describe}", shown=str(value), out_of_range=True)
            return value
        if isinstance(value, str):
            return value
        return super().from_python(name, value, warn)


class Compressors(Kind):
    """An ordered list of compressor names; unknown names are dropped with a warning (compression spec).
    The warning names an unknown compressor given as a keyword argument, not one from a connection string."""

    known = ("snappy", "zlib", "zstd")
    describe = "a comma separated list of compressor names"

    def _clean(self, name: str, names: Iterable[str], warn: Warn, show: bool) -> list[str]:
        out: list[str] = []
        for compressor in names:
            compressor = compressor.strip().lower()
            if not compressor:
                continue
            if compressor not in self.known:
                shown = f": {compressor!r}" if show else ""
                warn(f"Unsupported compressor{shown} (supported: {', '.join(self.known)})")
                continue
            if compressor not in out:
                out.append(compressor)
        return out

    def from_text(self, name: str, text: str, warn: Warn) -> list[str]:
        return self._clean(name, text.split(","), warn, show=False)

    def from_python(self, name: str, value: Any, warn: Warn) -> list[str]:
        if isinstance(value, str):
            return self._clean(name, value.split(","), warn, show=True)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return self._clean(name, value, warn, show=True)
        raise InvalidOptionValue(f"{name} must be {self.describe} or a list of names")


def _key_value_pairs(name: str, text: str) -> dict[str, str]:
    """``k:v,k:v``: the key ends at the first colon, so values may hold colons (Connection String spec)."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        key, colon, value = item.partition(":")
        if not colon or not key:
            raise InvalidOptionValue(f"{name} must be comma separated key:value pairs")
        pairs[key] = value
    return pairs


class TagSets(Kind):
    """``readPreferenceTags``: each occurrence is one tag set; an empty value is the empty tag set."""

    describe = "a list of tag sets"

    def from_text(self, name: str, text: str, warn: Warn) -> dict[str, str]:
        return {} if text == "" else _key_value_pairs(name, text)

    def from_python(self, name: str, value: Any, warn: Warn) -> list[dict[str, str]]:
        if isinstance(value, str):
            return [self.from_text(name, value, warn)]
        if isinstance(value, Mapping):
            value = [value]
        if isinstance(value, (list, tuple)):
            sets = []
            for tag_set in value:
                if isinstance(tag_set, str):
                    sets.append(self.from_text(name, tag_set, warn))
                elif isinstance(tag_set, Mapping):
                    sets.append(dict(tag_set))
                else:
                    raise InvalidOptionValue(f"{name} entries must be documents", out_of_range=True)
            return sets
        raise InvalidOptionValue(f"{name} must be {self.describe}", out_of_range=True)


#: Mechanism properties that hold secrets (redacted in reprs and messages).
SECRET_MECHANISM_PROPERTIES = frozenset({"AWS_SESSION_TOKEN"})
#: Properties that only make sense as Python objects: never accepted from a connection string.
_PYTHON_ONLY_MECHANISM_PROPERTIES = frozenset({"OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK", "ALLOWED_HOSTS"})


class MechanismProperties(Kind):
    """``authMechanismProperties``: keys are case-insensitive, stored upper-case (auth spec)."""

    describe = "comma separated key:value pairs"

    def from_text(self, name: str, text: str, warn: Warn) -> dict[str, str]:
        props = {key.upper(): value for key, value in _key_value_pairs(name, text).items()}
        bad = sorted(set(props) & _PYTHON_ONLY_MECHANISM_PROPERTIES)
        if bad:
            raise InvalidOptionValue(f"{name}: {', '.join(bad)} cannot be given in a connection string")
        return props

    def from_python(self, name: str, value: Any, warn: Warn) -> dict[str, Any]:
        if isinstance(value, str):
            return self.from_text(name, value, warn)
        if isinstance(value, Mapping):
            props = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidOptionValue(f"{name} keys must be strings")
                props[key.upper()] = item
            return props
        raise InvalidOptionValue(f"{name} must be a document or {self.describe}")


_SERVICE_NAME = re.compile(r"(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9]|-(?!-))*(?<!-)\Z")


class SrvServiceName(Kind):
    """RFC 6335 service names, but up to 62 characters (the seedlist spec's relaxation)."""

    describe = "a valid SRV service name"

    def from_text(self, name: str, text: str, warn: Warn) -> str:
        if not 1 <= len(text) <= 62 or not _SERVICE_NAME.match(text):
            raise InvalidOptionValue(
                f"{name} must be 1-62 letters, digits and single hyphens, with at least one letter")
        return text


class AuthMechanism(Choice):
    def from_text(self, name: str, text: str, warn: Warn) -> Any:
        if text == "MONGODB-CR":
            raise InvalidOptionValue("authMechanism MONGODB-CR was removed in MongoDB 4.0 and is not supported")
        return super().from_text(name, text, warn)


class PythonOnly(Kind):
    """A keyword argument with no connection-string form; ``check`` validates the object."""

    def __init__(self, check: Callable[[str, Any], Any]) -> None:
        self.check = check

    def from_text(self, name: str, text: str, warn: Warn) -> Any:  # pragma: no cover - never called
        raise InvalidOptionValue(f"{name} cannot be given in a connection string")

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        try:
            return self.check(name, value)
        except InvalidOptionValue as exc:
            exc.wrong_type = not exc.out_of_range  # these take objects: even a string is of the wrong type
            raise


def _optional_string(name: str, value: Any) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise InvalidOptionValue(f"{name} must be a string, not {type(value).__name__}")


def _optional_callable(name: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    raise InvalidOptionValue(f"{name} must be callable")


def _listeners(name: str, value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidOptionValue(f"{name} must be a list of event listeners")
    return tuple(value)


def _document_class(name: str, value: Any) -> Any:
    if isinstance(value, type):
        return value
    raise InvalidOptionValue(f"{name} must be a class (dict or a Mapping subclass)")


def _tzinfo(name: str, value: Any) -> Any:
    if value is None or isinstance(value, datetime.tzinfo):
        return value
    raise InvalidOptionValue(f"{name} must be a datetime.tzinfo")


def _read_preference(name: str, value: Any) -> Any:
    from greenmongo.options.read_preferences import ServerMode

    if isinstance(value, ServerMode):
        return value
    raise InvalidOptionValue(f"{name} must be a read preference such as ReadPreference.SECONDARY")


def _server_api(name: str, value: Any) -> Any:
    from greenmongo.options.server_api import ServerApi

    if value is None or isinstance(value, ServerApi):
        return value
    raise InvalidOptionValue(f"{name} must be a ServerApi instance")


def _anything(name: str, value: Any) -> Any:
    return value


def _tracing(name: str, value: Any) -> Any:
    """``tracing={"enabled": bool, "query_text_max_length": int >= 0}`` (OpenTelemetry spec): a key left out
    is None, decided by the environment when the client is made; any other key is refused."""
    if not isinstance(value, Mapping):
        raise InvalidOptionValue(f"{name} must be a dict such as {{'enabled': True}}")
    unknown = sorted(str(key) for key in value if key not in ("enabled", "query_text_max_length"))
    if unknown:
        raise InvalidOptionValue(f"{name}: unknown key(s) {', '.join(unknown)} (known: enabled, query_text_max_length)")
    enabled = value.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise InvalidOptionValue(f"{name}['enabled'] must be True or False")
    length = value.get("query_text_max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 0):
        raise InvalidOptionValue(f"{name}['query_text_max_length'] must be a non-negative integer")
    return {"enabled": enabled, "query_text_max_length": length}


def _auto_encryption_opts(name: str, value: Any) -> Any:
    """An AutoEncryptionOpts (greenmongo.encryption_options, which sits above this pure layer: by class name)."""
    if value is None or any(cls.__name__ == "AutoEncryptionOpts" for cls in type(value).__mro__):
        return value
    raise InvalidOptionValue(f"{name} must be an instance of AutoEncryptionOpts, not {type(value).__name__}")


class NotBuilt(Kind):
    """A PyMongo option greenmongo has not implemented: any value raises, naming it (never ignored)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def from_text(self, name: str, text: str, warn: Warn) -> Any:
        raise InvalidOptionValue(f"{name} is not implemented in greenmongo: {self.reason}")

    def from_python(self, name: str, value: Any, warn: Warn) -> Any:
        return self.from_text(name, "", warn)


def _driver_info(name: str, value: Any) -> Any:
    from greenmongo.driver_info import DriverInfo

    if value is None or isinstance(value, DriverInfo):
        return value
    raise InvalidOptionValue(f"{name} must be an instance of DriverInfo, not {type(value).__name__}")


# -- the option table ----------------------------------------------------------

class Option:
    """One client option: canonical camelCase name and value kind."""

    __slots__ = ("name", "kind", "secret", "repeated", "uri")

    def __init__(self, name: str, kind: Kind, *, secret: bool = False, repeated: bool = False,
                 uri: bool = True) -> None:
        self.name, self.kind, self.secret, self.repeated, self.uri = name, kind, secret, repeated, uri


_MS: dict[str, Any] = dict(number=True)

MECHANISMS = ("DEFAULT", "GSSAPI", "MONGODB-X509", "MONGODB-AWS", "MONGODB-OIDC", "PLAIN",
              "SCRAM-SHA-1", "SCRAM-SHA-256")
READ_PREFERENCE_MODES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")
SERVER_MONITORING_MODES = ("auto", "stream", "poll")
UUID_REPRESENTATIONS = {
    "unspecified": UuidRepresentation.UNSPECIFIED,
    "standard": UuidRepresentation.STANDARD,
    "pythonLegacy": UuidRepresentation.PYTHON_LEGACY,
    "javaLegacy": UuidRepresentation.JAVA_LEGACY,
    "csharpLegacy": UuidRepresentation.CSHARP_LEGACY,
}
DATETIME_CONVERSIONS = {member.name.lower(): member for member in DatetimeConversion}
UNICODE_ERROR_HANDLERS = ("strict", "replace", "backslashreplace", "surrogateescape", "ignore")
#: Handshake spec: client.application.name is at most 128 bytes.
MAX_APPNAME_BYTES = 128
#: Server Monitoring spec: minHeartbeatFrequencyMS.
MIN_HEARTBEAT_FREQUENCY_MS = 500
#: Max Staleness spec: smallestMaxStalenessSeconds.
SMALLEST_MAX_STALENESS_SECONDS = 90

OPTIONS: tuple[Option, ...] = (
    # connection string options (URI Options spec), in its order
    Option("appname", String(max_bytes=MAX_APPNAME_BYTES)),
    Option("authMechanism", AuthMechanism({m: m for m in MECHANISMS}, case_sensitive=False)),
    Option("authMechanismProperties", MechanismProperties()),
    Option("authSource", String(empty="error")),
    Option("compressors", Compressors()),
    Option("connectTimeoutMS", Integer(0, **_MS)),
    Option("directConnection", Boolean()),
    Option("heartbeatFrequencyMS", Integer(MIN_HEARTBEAT_FREQUENCY_MS, **_MS)),
    Option("journal", Boolean()),
    Option("loadBalanced", Boolean()),
    Option("localThresholdMS", Integer(0, **_MS)),
    Option("maxIdleTimeMS", Integer(0, **_MS)),
    Option("maxPoolSize", Integer(0)),
    Option("maxConnecting", Integer(1)),
    Option("maxStalenessSeconds", Integer(SMALLEST_MAX_STALENESS_SECONDS, also=(-1,),
                                          describe="-1 or an integer >= 90")),
    Option("minPoolSize", Integer(0)),
    Option("proxyHost", String(empty="error")),
    Option("proxyPort", Integer(0, 65535)),
    Option("proxyUsername", String(empty="ignore"), secret=True),
    Option("proxyPassword", String(empty="ignore"), secret=True),
    Option("readConcernLevel", String()),
    Option("readPreference", Choice({m: m for m in READ_PREFERENCE_MODES})),
    Option("readPreferenceTags", TagSets(), repeated=True),
    Option("replicaSet", String()),
    Option("retryReads", Boolean()),
    Option("retryWrites", Boolean()),
    Option("serverMonitoringMode", Choice({m: m for m in SERVER_MONITORING_MODES})),
    Option("serverSelectionTimeoutMS", Integer(0, **_MS)),
    Option("socketTimeoutMS", Integer(0, **_MS)),
    Option("srvMaxHosts", Integer(0)),
    Option("srvServiceName", SrvServiceName()),
    Option("tls", Boolean()),
    Option("tlsAllowInvalidCertificates", Boolean()),
    Option("tlsAllowInvalidHostnames", Boolean()),
    Option("tlsCAFile", String()),
    Option("tlsCertificateKeyFile", String()),
    Option("tlsCertificateKeyFilePassword", String(), secret=True),
    Option("tlsDisableCertificateRevocationCheck", Boolean()),
    Option("tlsDisableOCSPEndpointCheck", Boolean()),
    Option("tlsInsecure", Boolean()),
    Option("timeoutMS", Integer(0, **_MS)),
    Option("w", WriteConcernW()),
    Option("waitQueueTimeoutMS", Integer(1, **_MS)),
    Option("wTimeoutMS", Integer(0)),
    Option("zlibCompressionLevel", Integer(-1, 9)),
    # client backpressure spec
    Option("maxAdaptiveRetries", Integer(0)),
    Option("enableOverloadRetargeting", Boolean()),
    # PyMongo 4.20's SRV host checks: not built (a URI or keyword that sets them fails instead of being ignored)
    Option("srvAllowedHostsSuffix", NotBuilt("SRV hosts are checked against the SRV name's own domain only")),
    Option("srv_host_validator", NotBuilt("SRV hosts are checked against the SRV name's own domain only"),
           uri=False),
    # PyMongo's own connection string options
    Option("connect", Boolean()),
    Option("fsync", Boolean()),
    Option("tlsCRLFile", String()),
    Option("tz_aware", Boolean()),
    Option("uuidRepresentation", Choice(UUID_REPRESENTATIONS, case_sensitive=False,
                                        python_values=UUID_REPRESENTATIONS.values())),
    Option("unicode_decode_error_handler", Choice({h: h for h in UNICODE_ERROR_HANDLERS})),
    Option("datetime_conversion", Choice(DATETIME_CONVERSIONS, case_sensitive=False,
                                         python_values=DatetimeConversion)),
    # keyword-only options (MongoClient arguments with no connection-string form)
    Option("username", PythonOnly(_optional_string), uri=False),
    Option("password", PythonOnly(_optional_string), uri=False, secret=True),
    Option("read_preference", PythonOnly(_read_preference), uri=False),
    Option("server_api", PythonOnly(_server_api), uri=False),
    Option("document_class", PythonOnly(_document_class), uri=False),
    Option("tzinfo", PythonOnly(_tzinfo), uri=False),
    Option("type_registry", PythonOnly(_anything), uri=False),
    Option("event_listeners", PythonOnly(_listeners), uri=False),
    Option("server_selector", PythonOnly(_optional_callable), uri=False),
    Option("auto_encryption_opts", PythonOnly(_auto_encryption_opts), uri=False),
    Option("driver", PythonOnly(_driver_info), uri=False),
    # greenmongo's own keyword options (PyMongo has no such option)
    Option("pool_debug", Boolean(), uri=False),
    Option("tracing", PythonOnly(_tracing), uri=False),
)

BY_KEY: dict[str, Option] = {option.name.lower(): option for option in OPTIONS}
#: The URI Options spec's sensitive options, lower-cased: their values never appear in a repr of the
#: client's configuration (PyMongo's ``common.SENSITIVE_OPTIONS_FOR_REPR``).
SENSITIVE_URI_OPTIONS = frozenset(option.name.lower() for option in OPTIONS if option.secret and option.uri)

#: Other spellings of the same option (values must agree when both appear).
ALIASES: dict[str, str] = {"ssl": "tls", "max_adaptive_retries": "maxadaptiveretries",
                           "enable_overload_retargeting": "enableoverloadretargeting"}
#: Renamed options: old key -> new canonical name. The new name wins when both appear.
DEPRECATED: dict[str, str] = {"wtimeout": "wTimeoutMS", "j": "journal"}
#: The only options a TXT record may set (Initial DNS Seedlist Discovery spec).
TXT_ALLOWED = frozenset({"authsource", "replicaset", "loadbalanced"})


def canonical_name(key: str) -> str:
    """The canonical spelling for ``key`` (aliases resolved); unknown keys come back lower-cased."""
    lowered = key.lower()
    lowered = ALIASES.get(lowered, lowered)
    option = BY_KEY.get(lowered)
    if option is not None:
        return option.name
    renamed = DEPRECATED.get(lowered)
    return renamed if renamed is not None else lowered


def lookup(key: str) -> Optional[Option]:
    lowered = key.lower()
    return BY_KEY.get(ALIASES.get(lowered, lowered))


def is_secret(name: str) -> bool:
    option = lookup(name)
    return option is not None and option.secret


def redact_value(name: str, value: Any) -> Any:
    """``value`` as it may be shown to a user: secret options and secret mechanism properties hidden."""
    if is_secret(name):
        return REDACTED if value is not None else None
    if canonical_name(name) == "authMechanismProperties" and isinstance(value, Mapping):
        return {k: (REDACTED if str(k).upper() in SECRET_MECHANISM_PROPERTIES else v) for k, v in value.items()}
    return value


def validate_python_option(key: str, value: Any, warn: Warn) -> tuple[str, Any]:
    """Validate one keyword argument; returns (canonical name, value). Unknown keys raise."""
    option = lookup(key)
    if option is None:
        renamed = DEPRECATED.get(key.lower())
        if renamed is None:
            raise InvalidOptionValue(f"Unknown option {key!r}", unknown=True)
        warn(f'Option "{key}" is deprecated, use "{renamed}"')
        option = BY_KEY[renamed.lower()]
    if value is None:  # as in PyMongo: an explicit None leaves the option unset (or "no limit")
        return option.name, None
    return option.name, option.kind.from_python(option.name, value, warn)
