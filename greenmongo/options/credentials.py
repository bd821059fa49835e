"""MongoCredential and the Authentication spec's per-mechanism defaults and errors.

A credential is configured when the connection string has userinfo (an ``@``),
or a username/password/authMechanism is given; a database or ``authSource``
alone never asks for authentication. ``mechanism`` is ``"DEFAULT"`` when the
user named none: the handshake then negotiates SCRAM-SHA-256 or SCRAM-SHA-1.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Iterator, Mapping, Optional

from greenmongo.errors import ConfigurationError
from greenmongo.options.mapping import REDACTED
from greenmongo.options.validators import SECRET_MECHANISM_PROPERTIES

#: Mechanisms whose credentials live outside MongoDB: the source is always $external.
_EXTERNAL_ONLY = ("GSSAPI", "MONGODB-X509", "MONGODB-AWS", "MONGODB-OIDC")
#: Which mechanism properties each mechanism accepts (any other is an error).
_ALLOWED_PROPERTIES: dict[str, frozenset[str]] = {
    "GSSAPI": frozenset({"SERVICE_NAME", "CANONICALIZE_HOST_NAME", "SERVICE_REALM", "SERVICE_HOST"}),
    "MONGODB-AWS": frozenset({"AWS_SESSION_TOKEN"}),
    "MONGODB-OIDC": frozenset({"ENVIRONMENT", "TOKEN_RESOURCE", "OIDC_CALLBACK", "OIDC_HUMAN_CALLBACK",
                               "ALLOWED_HOSTS"}),
}
#: Every mechanism property greenmongo knows: the only property names an error message may quote (an
#: unknown one may be credential text from a mistyped connection string).
_KNOWN_PROPERTIES = frozenset().union(*_ALLOWED_PROPERTIES.values())
_CANONICALIZE = {"none": "none", "forward": "forward", "forwardandreverse": "forwardAndReverse",
                 "false": "none", "true": "forwardAndReverse"}
OIDC_ENVIRONMENTS = ("test", "azure", "gcp", "k8s")


class MechanismProperties(Mapping[str, Any]):
    """Frozen, hashable mechanism properties; keys upper-case, looked up case-insensitively."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any]) -> None:
        frozen = {}
        for key, value in items.items():
            if isinstance(value, list):
                value = tuple(value)
            frozen[key.upper()] = value
        self._items = frozen

    def __getitem__(self, key: str) -> Any:
        return self._items[key.upper()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.upper() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == {str(k).upper(): v for k, v in other.items()}
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset((k, _hashable(v)) for k, v in self._items.items()))

    def __repr__(self) -> str:
        shown = {k: (REDACTED if k in SECRET_MECHANISM_PROPERTIES else v) for k, v in self._items.items()}
        return f"MechanismProperties({shown!r})"


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return id(value)


_CredentialFields = namedtuple(
    "_CredentialFields", ["mechanism", "source", "username", "password", "mechanism_properties", "cache"])


class MongoCredential(_CredentialFields):
    """What authentication needs: immutable, hashable, and never shows its password.

    ``cache`` is None as parsed; the topology gives its credential an
    ``auth.AuthCache`` (SCRAM keys, fetched AWS credentials, OIDC tokens) shared
    by every connection of one client. All caches compare equal, so two
    credentials with the same values are equal.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        password = None if self.password is None else REDACTED
        return (f"MongoCredential(mechanism={self.mechanism!r}, source={self.source!r}, "
                f"username={self.username!r}, password={password!r}, "
                f"mechanism_properties={self.mechanism_properties!r})")

    __str__ = __repr__


def _fail(mechanism: str, message: str) -> ConfigurationError:
    """The error for a credential rule. Messages quote no value: credentials are checked once the
    connection string's options and the keyword arguments are merged, so a value may be URI text."""
    return ConfigurationError(f"{mechanism}: {message}")


def _external_source(mechanism: str, source: Optional[str]) -> str:
    if source is not None and source != "$external":
        raise _fail(mechanism, 'authSource must be "$external" (or unset)')
    return "$external"


def _gssapi_properties(props: dict[str, Any]) -> dict[str, Any]:
    props.setdefault("SERVICE_NAME", "mongodb")
    if "CANONICALIZE_HOST_NAME" in props:
        value = props["CANONICALIZE_HOST_NAME"]
        key = str(value).lower() if isinstance(value, (str, bool)) else None
        if key not in _CANONICALIZE:
            raise _fail("GSSAPI", "CANONICALIZE_HOST_NAME must be one of none, forward, forwardAndReverse "
                                  "(or true/false)")
        props["CANONICALIZE_HOST_NAME"] = _CANONICALIZE[key]
    return props


def _check_oidc(username: Optional[str], password: Optional[str], props: Mapping[str, Any]) -> None:
    mechanism = "MONGODB-OIDC"
    if password is not None:
        raise _fail(mechanism, "a password is not supported")
    callback, human = props.get("OIDC_CALLBACK"), props.get("OIDC_HUMAN_CALLBACK")
    environment = props.get("ENVIRONMENT")
    if callback is not None and human is not None:
        raise _fail(mechanism, "give OIDC_CALLBACK or OIDC_HUMAN_CALLBACK, not both")
    if "ALLOWED_HOSTS" in props and human is None:
        raise _fail(mechanism, "ALLOWED_HOSTS only applies with OIDC_HUMAN_CALLBACK")
    if callback is not None or human is not None:
        if environment is not None:
            raise _fail(mechanism, "ENVIRONMENT cannot be combined with a callback")
        return
    if environment is None:
        raise _fail(mechanism, "requires an ENVIRONMENT mechanism property or an OIDC callback")
    if environment not in OIDC_ENVIRONMENTS:
        raise _fail(mechanism, f"unsupported ENVIRONMENT; expected one of {', '.join(OIDC_ENVIRONMENTS)}")
    if environment == "test" and username is not None:
        raise _fail(mechanism, "ENVIRONMENT:test does not take a username")
    if environment in ("azure", "gcp") and not props.get("TOKEN_RESOURCE"):
        raise _fail(mechanism, f"ENVIRONMENT:{environment} requires a TOKEN_RESOURCE mechanism property")


def build_credentials(
    mechanism: Optional[str],
    source: Optional[str],
    username: Optional[str],
    password: Optional[str],
    mechanism_properties: Optional[Mapping[str, Any]],
    database: Optional[str],
) -> MongoCredential:
    """Apply the Authentication spec's defaults and checks for one mechanism.

    ``database`` is the connection string's database, the default source for
    SCRAM and PLAIN. Every violation raises ConfigurationError.
    """
    mech = (mechanism or "DEFAULT").upper()
    props = {str(k).upper(): v for k, v in (mechanism_properties or {}).items()}
    unsupported = set(props) - _ALLOWED_PROPERTIES.get(mech, frozenset())
    if unsupported:
        named = sorted(unsupported & _KNOWN_PROPERTIES)
        unknown = len(unsupported) - len(named)
        if unknown:
            named.append(f"{unknown} unknown propert{'y' if unknown == 1 else 'ies'} (not named: it may be "
                         "credential text)")
        raise _fail(mech, f"unsupported mechanism properties: {', '.join(named)}")
    if username == "":
        raise _fail(mech, "the username must not be empty")

    if mech in _EXTERNAL_ONLY:
        source = _external_source(mech, source)
    elif mech == "PLAIN":
        source = source or database or "$external"
    else:  # DEFAULT, SCRAM-SHA-1, SCRAM-SHA-256
        source = source or database or "admin"

    if mech in ("DEFAULT", "SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN", "GSSAPI") and username is None:
        raise _fail(mech, "a username is required")
    if mech in ("DEFAULT", "SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN") and password is None:
        raise _fail(mech, "a password is required")
    if mech == "MONGODB-X509" and password is not None:
        raise _fail(mech, "a password is not supported (the client certificate authenticates)")
    if mech == "MONGODB-AWS":
        if (username is None) != (password is None):
            raise _fail(mech, "give both a username (access key id) and a password (secret key), or neither")
        if "AWS_SESSION_TOKEN" in props and username is None:
            raise _fail(mech, "AWS_SESSION_TOKEN needs a username and password as well")
    if mech == "MONGODB-OIDC":
        _check_oidc(username, password, props)
    if mech == "GSSAPI":
        props = _gssapi_properties(props)

    return MongoCredential(mech, source, username, password,
                           MechanismProperties(props) if props else None, None)


def credentials_from_options(
    username: Optional[str],
    password: Optional[str],
    database: Optional[str],
    options: Mapping[str, Any],
) -> Optional[MongoCredential]:
    """The client's credential, or None when nothing asks for authentication.

    ``username`` is not None whenever the connection string had userinfo
    (even ``mongodb://@host``), which the spec treats as asking for auth.
    """
    mechanism = options.get("authMechanism")
    if username is None and password is None and mechanism is None:
        return None
    return build_credentials(mechanism, options.get("authSource"), username, password,
                             options.get("authMechanismProperties"), database)


def _build_credentials_tuple(mech: Optional[str], source: Optional[str], user: Optional[str],
                             passwd: Optional[str], extra: Mapping[str, Any],
                             database: Optional[str]) -> MongoCredential:
    """PyMongo's name and argument order; ``extra`` holds ``authMechanismProperties`` (any case)."""
    props = None
    for key, value in extra.items():
        if key.lower() == "authmechanismproperties":
            props = value
    return build_credentials(mech, source, user, passwd, props, database)


__all__ = ["MechanismProperties", "MongoCredential", "OIDC_ENVIRONMENTS", "build_credentials",
           "credentials_from_options"]
