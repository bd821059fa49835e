"""PyMongo's option validators, with PyMongo's contract: ``validate_x(option, value)`` returns the value to
use, raises TypeError for a wrong type and ValueError for a wrong value (ConfigurationError for an unknown
option). ``greenmongo.common`` (PyMongo's ``pymongo.common``) re-exports them: ODMs call them on their own
arguments, and ``greenmongo.uri_parser`` validates connection string options with the tables below so its
result holds what PyMongo's holds. MongoClient itself validates through ``greenmongo.options.validators``.

``from_uri=True`` (PyMongo 4.20.1) says the value came from a connection string: the message then quotes
neither the value nor an unknown key, because a mistyped connection string can carry credentials (an
unescaped ``/`` or ``?`` in a password, ``?`` typed for ``&``). ``get_validated_options(from_uri=True)``
passes it to every validator that takes it.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import warnings
from collections import abc
from typing import Any, Callable, Mapping, MutableMapping, NoReturn, Optional
from urllib.parse import unquote_plus

from greenmongo.bson.binary import UuidRepresentation
from greenmongo.bson.codec_options import TypeRegistry
from greenmongo.bson.datetime_ms import DatetimeConversion
from greenmongo.bson.raw import RawBSONDocument
from greenmongo.driver_info import DriverInfo
from greenmongo.errors import ConfigurationError
from greenmongo.monitoring.topology import _EventListener
from greenmongo.operations import arguments as _arguments
from greenmongo.options import validators as _options
from greenmongo.options.mapping import REDACTED
from greenmongo.options.read_preferences import MONGOS_MODES, ServerMode
from greenmongo.options.server_api import ServerApi
from greenmongo.options.validators import SENSITIVE_URI_OPTIONS

#: The connection string's uuidRepresentation names and their values (MongoEngine reverses this map).
_UUID_REPRESENTATIONS = {
    "unspecified": UuidRepresentation.UNSPECIFIED,
    "standard": UuidRepresentation.STANDARD,
    "pythonLegacy": UuidRepresentation.PYTHON_LEGACY,
    "javaLegacy": UuidRepresentation.JAVA_LEGACY,
    "csharpLegacy": UuidRepresentation.CSHARP_LEGACY,
}


def raise_config_error(key: str, suggestions: Optional[list[str]] = None, from_uri: bool = False) -> NoReturn:
    """ConfigurationError for an unknown option ``key``, naming close matches when there are any; ``key``
    itself only when it is not a connection string's (``from_uri``)."""
    message = "Unknown option." if from_uri else f"Unknown option: {key}."
    if suggestions:
        message += (f" Did you mean one of ({', '.join(suggestions)}) or maybe a camelCase version of one? "
                    "Refer to docstring.")
    raise ConfigurationError(message)


# -- validators: validate_x(option, value) -> the value to use ---------------------------------------------

def validate_boolean(option: str, value: Any) -> bool:
    """True or False (TypeError for anything else, "true" included)."""
    return _arguments.validate_boolean(option, value)


def validate_is_mapping(option: str, value: Any) -> None:
    """A document argument: any Mapping (TypeError otherwise)."""
    _arguments.validate_is_mapping(option, value)


def validate_is_document_type(option: str, value: Any) -> None:
    """A document to store: a MutableMapping or a RawBSONDocument (TypeError otherwise)."""
    _arguments.validate_is_document_type(option, value)


def validate_list(option: str, value: Any) -> list[Any]:
    return _arguments.validate_list(option, value)


def validate_boolean_or_string(option: str, value: Any) -> bool:
    """True/False, or the strings "true"/"false"."""
    if isinstance(value, str):
        if value not in ("true", "false"):
            raise ValueError(f"The value of {option} must be 'true' or 'false'")
        return value == "true"
    return validate_boolean(option, value)


def validate_integer(option: str, value: Any) -> int:
    """An int, or a string holding one."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"The value of {option} must be an integer") from None
    raise TypeError(f"Wrong type for {option}, value must be an integer, not {type(value)}")


def validate_positive_integer(option: str, value: Any) -> int:
    number = validate_integer(option, value)
    if number <= 0:
        raise ValueError(f"The value of {option} must be a positive integer")
    return number


def validate_non_negative_integer(option: str, value: Any) -> int:
    number = validate_integer(option, value)
    if number < 0:
        raise ValueError(f"The value of {option} must be a non negative integer")
    return number


def validate_non_negative_integer_or_none(option: str, value: Any) -> Optional[int]:
    return None if value is None else validate_non_negative_integer(option, value)


def validate_string(option: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"Wrong type for {option}, value must be an instance of str, not {type(value)}")


def validate_string_or_none(option: str, value: Any) -> Optional[str]:
    return None if value is None else validate_string(option, value)


def validate_readable(option: str, value: Any, from_uri: bool = False) -> Optional[str]:
    """A path to a file that can be opened for reading (TLS files), or None. With ``from_uri`` the
    OSError keeps its class and errno but not the path (and is not chained to the one that has it)."""
    if value is None:
        return None
    path = validate_string(option, value)
    try:
        with open(path):
            pass
    except OSError as exc:
        if not from_uri:
            raise
        raise type(exc)(exc.errno, f"The {option} file cannot be read: {exc.strerror}") from None
    return path


def validate_non_negative_int_or_basestring(option: Any, value: Any) -> Any:
    """``w``: an int, a string of a non-negative int (returned as int), or any other string."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            return value
        return validate_non_negative_integer(option, number)
    raise TypeError(f"Wrong type for {option}, value must be an non negative integer or a string, not {type(value)}")


def validate_positive_float(option: str, value: Any) -> float:
    """A number (or numeric string) greater than 0 and below one billion, as a float."""
    message = f"{option} must be an integer or float"
    try:
        number = float(value)
    except ValueError:
        raise ValueError(message) from None
    except TypeError:
        raise TypeError(message) from None
    if not 0 < number < 1e9:
        raise ValueError(f"{option} must be greater than 0 and less than one billion")
    return number


def validate_positive_float_or_zero(option: str, value: Any) -> float:
    if value == 0 or value == "0":
        return 0
    return validate_positive_float(option, value)


def validate_timeout_or_none(option: str, value: Any) -> Optional[float]:
    """Milliseconds (positive) -> seconds; None stays None."""
    if value is None:
        return None
    return validate_positive_float(option, value) / 1000.0


def validate_timeout_or_zero(option: str, value: Any) -> float:
    """Milliseconds -> seconds where 0 is meaningful and None is an error (serverSelectionTimeoutMS)."""
    if value is None:
        raise ConfigurationError(f"{option} cannot be None")
    if value == 0 or value == "0":
        return 0
    return validate_positive_float(option, value) / 1000.0


def validate_timeout_or_none_or_zero(option: Any, value: Any) -> Optional[float]:
    """Milliseconds -> seconds; 0 and None both mean no timeout (None)."""
    if value is None or value == 0 or value == "0":
        return None
    return validate_positive_float(option, value) / 1000.0


def validate_timeoutms(option: Any, value: Any) -> Optional[float]:
    """timeoutMS: milliseconds -> seconds; 0 is kept (no limit, CSOT spec), None means unset."""
    if value is None:
        return None
    return validate_positive_float_or_zero(option, value) / 1000.0


def validate_max_staleness(option: str, value: Any) -> int:
    """-1 (no maximum) or a positive number of seconds."""
    if value == -1 or value == "-1":
        return -1
    return validate_positive_integer(option, value)


def validate_read_preference(dummy: Any, value: Any) -> ServerMode:
    """A read preference object (``ReadPreference.SECONDARY``, ``Nearest(tag_sets=...)``, ...)."""
    if not isinstance(value, ServerMode):
        raise TypeError(f"{value!r} is not a read preference")
    return value


def validate_read_preference_mode(dummy: Any, value: Any) -> str:
    """A read preference mode name as the connection string spells it; returned unchanged. The message
    does not quote the value (PyMongo 4.20.1: it is usually a connection string's)."""
    if value not in MONGOS_MODES:
        raise ValueError(f"Not a valid read preference. Must be one of: {', '.join(MONGOS_MODES)}")
    mode: str = value
    return mode


def validate_auth_mechanism(option: str, value: Any) -> str:
    if value not in _options.MECHANISMS:
        raise ValueError(f"{option} must be in {tuple(_options.MECHANISMS)}")
    mechanism: str = value
    return mechanism


def validate_uuid_representation(dummy: Any, value: Any, from_uri: bool = False) -> int:
    """A uuidRepresentation name ("standard", "pythonLegacy", ...) -> its UuidRepresentation value."""
    try:
        return _UUID_REPRESENTATIONS[value]
    except (KeyError, TypeError):
        shown = "Invalid UUID representation" if from_uri else f"{value} is an invalid UUID representation"
        raise ValueError(f"{shown}. Must be one of {tuple(_UUID_REPRESENTATIONS)}") from None


def validate_read_preference_tags(name: str, value: Any, from_uri: bool = False) -> list[dict[str, str]]:
    """readPreferenceTags text (or a list of them): ``"dc:ny,rack:1"`` -> ``{"dc": "ny", "rack": "1"}``;
    an empty string is the empty tag set."""
    texts = value if isinstance(value, list) else [value]
    tag_sets: list[dict[str, str]] = []
    for text in texts:
        if text == "":
            tag_sets.append({})
            continue
        try:
            tag_set = {}
            for pair in text.split(","):
                key, tag_value = pair.split(":")
                tag_set[unquote_plus(key)] = unquote_plus(tag_value)
        except Exception:
            if from_uri:
                raise ValueError(f"Invalid read preference tags value for {name}") from None
            raise ValueError(f"{text!r} not a valid value for {name}") from None
        tag_sets.append(tag_set)
    return tag_sets


#: The authMechanismProperties a connection string may set (callbacks and host lists are Python-only).
_MECHANISM_PROPS = frozenset({"SERVICE_NAME", "SERVICE_HOST", "CANONICALIZE_HOST_NAME", "SERVICE_REALM",
                              "AWS_SESSION_TOKEN", "ENVIRONMENT", "TOKEN_RESOURCE"})
#: The URI Options spec's sensitive options (lower-cased): their values never appear in a repr of a
#: client's configuration (``MongoClient``'s and ``ClientOptions``' reprs redact them).
SENSITIVE_OPTIONS_FOR_REPR = SENSITIVE_URI_OPTIONS
#: Properties whose values may appear in a repr; every other one is redacted.
_SAFE_AUTH_MECHANISM_PROPS_FOR_REPR = frozenset({"ALLOWED_HOSTS", "CANONICALIZE_HOST_NAME", "ENVIRONMENT",
                                                 "SERVICE_HOST", "SERVICE_NAME", "SERVICE_REALM", "TOKEN_RESOURCE"})


def redact_auth_mechanism_properties_for_repr(value: Any) -> Any:
    """A copy of an authMechanismProperties dict with every value but the harmless ones redacted."""
    if not isinstance(value, dict):
        return value
    return {key: (item if str(key).upper() in _SAFE_AUTH_MECHANISM_PROPS_FOR_REPR else REDACTED)
            for key, item in value.items()}


#: Set on the ValueError for a bad CANONICALIZE_HOST_NAME: ``get_validated_options`` raises it even with
#: ``warn=True`` (guessing would authenticate against another host).
_MUST_RAISE = "_greenmongo_must_raise"


def _canonicalize_host_name(value: Any, from_uri: bool = False) -> Any:
    if value in ("true", "false", True, False):
        return value in ("true", True)
    if value not in ("none", "forward", "forwardAndReverse"):
        shown = "" if from_uri else f" {value!r}"
        error = ValueError(f"CANONICALIZE_HOST_NAME{shown} not in valid options: "
                           "[False, True, 'none', 'forward', 'forwardAndReverse']")
        setattr(error, _MUST_RAISE, True)
        raise error
    return value


def validate_auth_mechanism_properties(option: str, value: Any, from_uri: bool = False) -> dict[str, Any]:
    """``"KEY:value,KEY:value"`` text (known keys only) or a dict (str/bool values, ALLOWED_HOSTS list,
    OIDC callbacks) -> a dict. With ``from_uri`` no message quotes an unknown key or a value (PyMongo
    4.20.1 still names the unknown key; greenmongo never quotes connection string text)."""
    properties: dict[str, Any] = {}
    if not isinstance(value, str):
        if not isinstance(value, dict):
            raise TypeError(f"Auth mechanism properties must be given as a string or a dictionary, not {type(value)}")
        from greenmongo.auth.oidc import OIDCCallback

        for key, item in value.items():
            if isinstance(item, str):
                properties[key] = item
            elif isinstance(item, bool):
                properties[key] = str(item).lower()
            elif key == "ALLOWED_HOSTS" and isinstance(item, list):
                properties[key] = item
            elif key in ("OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK"):
                if not isinstance(item, OIDCCallback):
                    raise TypeError(f"callback must be an OIDCCallback object, not {type(item)}")
                properties[key] = item
            else:
                raise TypeError(f"Invalid type for auth mechanism property {key}, {type(item)}")
        return properties
    for pair in unquote_plus(value).split(","):
        key, _, item = pair.partition(":")
        if not item:
            raise ValueError("Malformed auth mechanism properties")
        if key not in _MECHANISM_PROPS:
            if "AWS_SESSION_TOKEN" in key:  # never echo what may be a token
                raise ValueError("auth mechanism properties must be key:value pairs like AWS_SESSION_TOKEN:<token>")
            if from_uri:
                raise ValueError("An unsupported auth mechanism property was given (not named: it may be "
                                 f"credential text). Must be one of {tuple(sorted(_MECHANISM_PROPS))}")
            raise ValueError(f"{key} is not a supported auth mechanism property. Must be one of "
                             f"{tuple(sorted(_MECHANISM_PROPS))}")
        properties[key] = _canonicalize_host_name(item, from_uri) if key == "CANONICALIZE_HOST_NAME" else item
    return properties


def validate_document_class(option: str, value: Any) -> Any:
    """dict, SON, RawBSONDocument or any MutableMapping subclass (``dict[str, Any]`` aliases too)."""
    origin = getattr(value, "__origin__", value)
    try:
        mapping = issubclass(origin, abc.MutableMapping)
    except TypeError:
        mapping = False
    if not mapping and not (isinstance(value, type) and issubclass(value, RawBSONDocument)):
        raise TypeError(f"{option} must be dict, bson.son.SON, bson.raw_bson.RawBSONDocument, or a subclass of "
                        "collections.MutableMapping")
    return value


def validate_type_registry(option: Any, value: Any) -> Optional[TypeRegistry]:
    if value is not None and not isinstance(value, TypeRegistry):
        raise TypeError(f"{option} must be an instance of {TypeRegistry}")
    return value


def validate_list_or_none(option: Any, value: Any) -> Optional[list[Any]]:
    return None if value is None else validate_list(option, value)


def validate_list_or_mapping(option: Any, value: Any) -> None:
    if not isinstance(value, (abc.Mapping, list)):
        raise TypeError(f"{option} must either be a list or an instance of dict, bson.son.SON, or any other type "
                        "that inherits from collections.Mapping")


def validate_appname_or_none(option: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    appname = validate_string(option, value)
    if len(appname.encode("utf-8")) > _options.MAX_APPNAME_BYTES:
        raise ValueError(f"{option} must be <= {_options.MAX_APPNAME_BYTES} bytes")
    return appname


def validate_driver_or_none(option: Any, value: Any) -> Optional[DriverInfo]:
    if value is not None and not isinstance(value, DriverInfo):
        raise TypeError(f"{option} must be an instance of DriverInfo")
    return value


def validate_server_api_or_none(option: Any, value: Any) -> Optional[ServerApi]:
    if value is not None and not isinstance(value, ServerApi):
        raise TypeError(f"{option} must be an instance of ServerApi, not {type(value)}")
    return value


def validate_is_callable_or_none(option: Any, value: Any) -> Optional[Callable[..., Any]]:
    if value is not None and not callable(value):
        raise TypeError(f"{option} must be a callable, not {type(value)}")
    function: Optional[Callable[..., Any]] = value
    return function


def validate_ok_for_replace(replacement: Mapping[str, Any]) -> None:
    """A replacement document: a mapping whose first key is not an operator ({} is fine)."""
    _arguments.validate_replacement(replacement)


def validate_ok_for_update(update: Any) -> None:
    """An update: a non-empty document of $-operators, or a non-empty pipeline."""
    validate_list_or_mapping("update", update)
    _arguments.validate_update(update)


def validate_unicode_decode_error_handler(dummy: Any, value: str) -> str:
    """The message does not quote the value (PyMongo 4.20.1: it is usually a connection string's)."""
    if value not in _UNICODE_DECODE_ERROR_HANDLERS:
        raise ValueError(f"Invalid Unicode decode error handler. Must be one of "
                         f"{tuple(sorted(_UNICODE_DECODE_ERROR_HANDLERS))}")
    return value


_UNICODE_DECODE_ERROR_HANDLERS = frozenset({"strict", "replace", "ignore"})


def validate_tzinfo(dummy: Any, value: Any) -> Optional[datetime.tzinfo]:
    if value is not None and not isinstance(value, datetime.tzinfo):
        raise TypeError(f"{value} must be an instance of datetime.tzinfo")
    return value


def validate_auto_encryption_opts_or_none(option: Any, value: Any) -> Any:
    """None or an AutoEncryptionOpts (TypeError otherwise, as PyMongo)."""
    if value is None:
        return None
    from greenmongo.encryption_options import AutoEncryptionOpts

    if not isinstance(value, AutoEncryptionOpts):
        raise TypeError(f"{option} must be an instance of AutoEncryptionOpts, not {type(value)}")
    return value


def validate_datetime_conversion(option: Any, value: Any, from_uri: bool = False) -> Optional[DatetimeConversion]:
    """A DatetimeConversion, its name, or its number (as int or text); None means DATETIME. An unknown name
    raises KeyError (as PyMongo: ``get_validated_options`` does not turn it into a warning)."""
    if value is None:
        return DatetimeConversion.DATETIME
    if isinstance(value, str):
        try:
            return DatetimeConversion(int(value)) if value.isdigit() else DatetimeConversion[value]
        except (KeyError, ValueError) as exc:
            if not from_uri:
                raise
            raise type(exc)(f"Invalid {option} value") from None
    if isinstance(value, int):
        return DatetimeConversion(value)
    raise TypeError(f"{option} must be a str or int representing DatetimeConversion, not {type(value)}")


def validate_server_monitoring_mode(option: str, value: str, from_uri: bool = False) -> str:
    if value not in _options.SERVER_MONITORING_MODES:
        shown = option if from_uri else f"{option}={value!r}"
        raise ValueError(f'{shown} is invalid. Must be one of "auto", "stream", or "poll"')
    return value


def validate_compressors(dummy: Any, value: Any, from_uri: bool = False) -> list[str]:
    """Compressor names (comma separated text or an iterable); unknown or unavailable ones are dropped
    with a warning (naming an unknown one unless it came from a connection string)."""
    from greenmongo.wire.compression import KNOWN_COMPRESSORS, available_compressors

    names = value.split(",") if isinstance(value, str) else list(value)
    usable = available_compressors()
    kept = []
    for name in names:
        if name not in KNOWN_COMPRESSORS:
            warnings.warn("Unsupported compressor" if from_uri else f"Unsupported compressor: {name}", stacklevel=2)
        elif name not in usable:
            warnings.warn(f"Wire protocol compression with {name} is not available: its module is not installed",
                          stacklevel=2)
        else:
            kept.append(name)
    return kept


def validate_zlib_compression_level(option: str, value: Any, from_uri: bool = False) -> int:
    try:
        level = int(value)
    except Exception:
        raise TypeError(f"{option} must be an integer" + ("" if from_uri else f", not {value!r}")) from None
    if not -1 <= level <= 9:
        raise ValueError(f"{option} must be between -1 and 9" + ("." if from_uri else f", not {level}."))
    return level


def _validate_event_listeners(option: str, listeners: Any) -> Any:
    if not isinstance(listeners, abc.Sequence):
        raise TypeError(f"{option} must be a list or tuple, not {type(listeners)}")
    for listener in listeners:
        if not isinstance(listener, _EventListener):
            raise TypeError(f"Listeners for {option} must be either a CommandListener, ServerHeartbeatListener, "
                            f"ServerListener, TopologyListener, or ConnectionPoolListener, not {type(listener)}")
    return listeners


# -- the option tables: lower-cased name -> validator ---------------------------------------------------

#: Connection string options and their other spellings.
URI_OPTIONS_ALIAS_MAP: dict[str, list[str]] = {"tls": ["ssl"]}

#: The connection string options of the URI Options spec (and the Client Backpressure spec).
URI_OPTIONS_VALIDATOR_MAP: dict[str, Callable[[Any, Any], Any]] = {
    "appname": validate_appname_or_none,
    "authmechanism": validate_auth_mechanism,
    "authmechanismproperties": validate_auth_mechanism_properties,
    "authsource": validate_string,
    "compressors": validate_compressors,
    "connecttimeoutms": validate_timeout_or_none_or_zero,
    "directconnection": validate_boolean_or_string,
    "heartbeatfrequencyms": validate_timeout_or_none,
    "journal": validate_boolean_or_string,
    "localthresholdms": validate_positive_float_or_zero,
    "maxidletimems": validate_timeout_or_none,
    "maxconnecting": validate_positive_integer,
    "maxpoolsize": validate_non_negative_integer_or_none,
    "maxstalenessseconds": validate_max_staleness,
    "readconcernlevel": validate_string_or_none,
    "readpreference": validate_read_preference_mode,
    "readpreferencetags": validate_read_preference_tags,
    "replicaset": validate_string_or_none,
    "retryreads": validate_boolean_or_string,
    "retrywrites": validate_boolean_or_string,
    "loadbalanced": validate_boolean_or_string,
    "serverselectiontimeoutms": validate_timeout_or_zero,
    "sockettimeoutms": validate_timeout_or_none_or_zero,
    "tls": validate_boolean_or_string,
    "tlsallowinvalidcertificates": validate_boolean_or_string,
    "tlsallowinvalidhostnames": validate_boolean_or_string,
    "tlscafile": validate_readable,
    "tlscertificatekeyfile": validate_readable,
    "tlscertificatekeyfilepassword": validate_string_or_none,
    "tlsdisableocspendpointcheck": validate_boolean_or_string,
    "tlsinsecure": validate_boolean_or_string,
    "w": validate_non_negative_int_or_basestring,
    "wtimeoutms": validate_non_negative_integer,
    "zlibcompressionlevel": validate_zlib_compression_level,
    "srvservicename": validate_string,
    "srvmaxhosts": validate_non_negative_integer,
    "srvallowedhostssuffix": validate_string,
    "timeoutms": validate_timeoutms,
    "servermonitoringmode": validate_server_monitoring_mode,
    "maxadaptiveretries": validate_non_negative_integer,
    "enableoverloadretargeting": validate_boolean_or_string,
}

#: Connection string options only PyMongo (and greenmongo) define.
NONSPEC_OPTIONS_VALIDATOR_MAP: dict[str, Callable[[Any, Any], Any]] = {
    "connect": validate_boolean_or_string,
    "driver": validate_driver_or_none,
    "server_api": validate_server_api_or_none,
    "fsync": validate_boolean_or_string,
    "minpoolsize": validate_non_negative_integer,
    "tlscrlfile": validate_readable,
    "tz_aware": validate_boolean_or_string,
    "unicode_decode_error_handler": validate_unicode_decode_error_handler,
    "uuidrepresentation": validate_uuid_representation,
    "waitqueuemultiple": validate_non_negative_integer_or_none,
    "waitqueuetimeoutms": validate_timeout_or_none,
    "datetime_conversion": validate_datetime_conversion,
}

#: MongoClient keyword arguments with no connection string form.
KW_VALIDATORS: dict[str, Callable[[Any, Any], Any]] = {
    "document_class": validate_document_class,
    "type_registry": validate_type_registry,
    "read_preference": validate_read_preference,
    "event_listeners": _validate_event_listeners,
    "tzinfo": validate_tzinfo,
    "username": validate_string_or_none,
    "password": validate_string_or_none,
    "server_selector": validate_is_callable_or_none,
    "srv_host_validator": validate_is_callable_or_none,
    "auto_encryption_opts": validate_auto_encryption_opts_or_none,
    "authoidcallowedhosts": validate_list,
    "max_adaptive_retries": validate_non_negative_integer,
    "enable_overload_retargeting": validate_boolean_or_string,
}

#: Option spellings renamed to the name the driver uses internally.
INTERNAL_URI_OPTION_NAME_MAP: dict[str, str] = {"ssl": "tls"}
#: Deprecated option -> ("renamed", new name) or ("removed", advice); none at present.
URI_OPTIONS_DEPRECATION_MAP: dict[str, tuple[str, str]] = {}

URI_OPTIONS_VALIDATOR_MAP.update(NONSPEC_OPTIONS_VALIDATOR_MAP)
for _name, _aliases in URI_OPTIONS_ALIAS_MAP.items():
    for _alias in _aliases:
        URI_OPTIONS_VALIDATOR_MAP.setdefault(_alias, URI_OPTIONS_VALIDATOR_MAP[_name])
del _name, _aliases, _alias

#: Every connection string and keyword option.
VALIDATORS: dict[str, Callable[[Any, Any], Any]] = {**URI_OPTIONS_VALIDATOR_MAP, **KW_VALIDATORS}

#: The options given in milliseconds that the validators turn into seconds.
TIMEOUT_OPTIONS: list[str] = ["connecttimeoutms", "heartbeatfrequencyms", "maxidletimems", "maxstalenessseconds",
                              "serverselectiontimeoutms", "sockettimeoutms", "waitqueuetimeoutms"]
#: The options that make up a write concern.
WRITE_CONCERN_OPTIONS = frozenset({"w", "wtimeout", "wtimeoutms", "fsync", "j", "journal"})


def _get_validator(key: str, validators: Mapping[str, Callable[[Any, Any], Any]],
                   normed_key: Optional[str] = None, from_uri: bool = False) -> Callable[[Any, Any], Any]:
    normed_key = normed_key or key
    validator = validators.get(normed_key)
    if validator is None:  # raised outside an ``except KeyError``: no chained KeyError quoting the key
        from difflib import get_close_matches  # only for this error's suggestions

        raise_config_error(key, get_close_matches(normed_key, validators, cutoff=0.2), from_uri=from_uri)
    return validator


@functools.lru_cache(maxsize=None)
def _takes_from_uri(validator: Callable[..., Any]) -> bool:
    try:
        return "from_uri" in inspect.signature(validator).parameters
    except (TypeError, ValueError):
        return False


def validate(option: str, value: Any) -> tuple[str, Any]:
    """Validate one connection string or keyword option by name; returns (option, validated value)."""
    return option, _get_validator(option, VALIDATORS, normed_key=option.lower())(option, value)


def get_validated_options(options: Mapping[str, Any], warn: bool = True,
                          from_uri: bool = False) -> MutableMapping[str, Any]:
    """A copy of ``options`` with every value validated. An unknown option or an invalid value raises
    (ConfigurationError, ValueError or TypeError), or with ``warn=True`` warns and is left out.
    Keys keep the caller's spelling; lookup is case-insensitive. ``from_uri``: the options are a
    connection string's, so no message or warning quotes an unknown key or a value."""
    validated: dict[str, Any] = {}
    for key, value in options.items():
        try:
            validator = _get_validator(key, URI_OPTIONS_VALIDATOR_MAP, normed_key=key.lower(), from_uri=from_uri)
            if from_uri and _takes_from_uri(validator):
                validated_value = validator(key, value, from_uri=True)  # type: ignore[call-arg]
            else:
                validated_value = validator(key, value)
        except (ValueError, TypeError, ConfigurationError) as exc:
            # An invalid CANONICALIZE_HOST_NAME always raises: guessing would authenticate elsewhere.
            if getattr(exc, _MUST_RAISE, False):
                raise
            if not warn:
                raise
            warnings.warn(str(exc), stacklevel=2)
        else:
            validated[key] = validated_value
    return validated


class _CaseInsensitiveDictionary(MutableMapping[str, Any]):
    """A dict whose string keys are looked up case-insensitively (PyMongo's, which URI option code and
    some libraries use). As PyMongo's, iteration gives the keys lower-cased while ``repr`` and
    ``cased_key`` keep the spelling first stored."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__spelling: dict[str, str] = {}
        self.__data: dict[str, Any] = {}
        self.update(dict(*args, **kwargs))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self.__data

    def __len__(self) -> int:
        return len(self.__data)

    def __iter__(self) -> Any:
        return iter(list(self.__data))

    def __repr__(self) -> str:
        return repr({self.__spelling[key]: value for key, value in self.__data.items()})

    def __setitem__(self, key: str, value: Any) -> None:
        lowered = key.lower()
        self.__spelling.setdefault(lowered, key)
        self.__data[lowered] = value

    def __getitem__(self, key: str) -> Any:
        return self.__data[key.lower()]

    def __delitem__(self, key: str) -> None:
        lowered = key.lower()
        del self.__data[lowered]
        del self.__spelling[lowered]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, abc.Mapping):
            return NotImplemented
        return len(self) == len(other) and all(key in self and self[key] == other[key] for key in other)

    __hash__ = None  # type: ignore[assignment]

    def get(self, key: str, default: Any = None) -> Any:
        return self.__data.get(key.lower(), default)

    def cased_key(self, key: str) -> str:
        """The spelling ``key`` was first stored under."""
        return self.__spelling[key.lower()]
