"""SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677) as a pure conversation object.

No I/O here: ``ScramConversation`` turns server messages into client messages and
checks the server's proof; ``greenmongo.auth.mechanisms`` carries them over
saslStart/saslContinue. MongoDB's variations from the RFCs (per the Authentication
spec): usernames are never SASLprep'd; SCRAM-SHA-1 derives keys from the hex MD5
of ``"user:mongo:password"``; SCRAM-SHA-256 SASLpreps the password; both refuse an
iteration count under 4096 and never advertise channel binding.
"""

from __future__ import annotations

import base64
import os
from typing import Callable, Dict, NamedTuple, Optional, Tuple

from greenmongo.auth.saslprep import saslprep
from greenmongo.errors import ConfigurationError, OperationFailure

# hashlib and hmac (OpenSSL's, ~3 ms) are imported where a conversation uses them, not with every client.

__all__ = ["MIN_ITERATIONS", "ScramConversation", "ScramKeyCache", "ScramKeys", "SCRAM_MECHANISMS"]

MIN_ITERATIONS = 4096

#: mechanism name -> hashlib name
SCRAM_MECHANISMS: Dict[str, str] = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256"}

_GS2_HEADER = b"n,,"  # no channel binding, no authzid


class ScramKeys(NamedTuple):
    client_key: bytes
    server_key: bytes


class ScramKeyCache:
    """Derived keys per (mechanism, prepared password, salt, iterations).

    PBKDF2 with thousands of rounds is the expensive part of every new
    connection; the spec requires caching it. Plain dict operations never yield
    to the gevent hub, so no lock is needed; the size bound keeps a client that
    sees many salts (e.g. several users) from growing without limit.
    """

    def __init__(self, max_entries: int = 16) -> None:
        self._entries: Dict[Tuple[str, str, bytes, int], ScramKeys] = {}
        self._max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Tuple[str, str, bytes, int]) -> Optional[ScramKeys]:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, key: Tuple[str, str, bytes, int], keys: ScramKeys) -> None:
        if key not in self._entries and len(self._entries) >= self._max_entries:
            self._entries.pop(next(iter(self._entries)))  # oldest first
        self._entries[key] = keys

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def _escape_username(username: str) -> str:
    # RFC 5802 section 5.1: ',' and '=' are the only characters that need it.
    return username.replace("=", "=3D").replace(",", "=2C")


def _new_nonce() -> str:
    return base64.b64encode(os.urandom(24)).decode("ascii")


def _parse_attributes(message: bytes) -> Dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise OperationFailure("SCRAM: server message is not UTF-8") from None
    attributes: Dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or len(name) != 1:
            raise OperationFailure(f"SCRAM: malformed server message {text!r}")
        attributes.setdefault(name, value)
    return attributes


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


class ScramConversation:
    """One client side of a SCRAM exchange: client-first, client-final, verify server-final.

    ``nonce`` is injectable so tests can replay the RFC vectors; production code
    leaves it to ``os.urandom``. ``raw_password`` skips MongoDB's password
    digest/SASLprep, only to check the RFCs' own vectors.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: Optional[str] = None,
        cache: Optional[ScramKeyCache] = None,
        prepare: Callable[[str], str] = saslprep,
        raw_password: bool = False,
    ) -> None:
        import hashlib
        if mechanism not in SCRAM_MECHANISMS:
            raise ConfigurationError(f"not a SCRAM mechanism: {mechanism!r}")
        if not username:
            raise ConfigurationError(f"{mechanism} requires a username")
        if password is None:
            raise ConfigurationError(f"{mechanism} requires a password")
        self.mechanism = mechanism
        self._hash_name = SCRAM_MECHANISMS[mechanism]
        self._digest = getattr(hashlib, self._hash_name)
        if raw_password:  # RFC test vectors: the password exactly as given
            self._password = password
        elif mechanism == "SCRAM-SHA-1":
            self._password = hashlib.md5(f"{username}:mongo:{password}".encode("utf-8")).hexdigest()
        else:
            try:
                self._password = prepare(password)
            except ValueError as exc:
                raise ConfigurationError(f"{mechanism} password: {exc}") from None
        self._nonce = nonce if nonce is not None else _new_nonce()
        if "," in self._nonce:
            raise ConfigurationError("SCRAM nonce must not contain ','")
        self._client_first_bare = f"n={_escape_username(username)},r={self._nonce}".encode("utf-8")
        self._cache = cache
        self._server_signature: Optional[bytes] = None

    @property
    def nonce(self) -> str:
        return self._nonce

    def client_first(self) -> bytes:
        """The client-first-message: GS2 header (``n,,``) plus ``n=user,r=nonce``."""
        return _GS2_HEADER + self._client_first_bare

    def client_final(self, server_first: bytes) -> bytes:
        """The client-final-message with its proof, after checking the server-first-message."""
        import hmac
        attributes = _parse_attributes(server_first)
        if "m" in attributes:
            raise OperationFailure("SCRAM: server requires an unsupported extension")
        server_nonce = attributes.get("r", "")
        if not server_nonce.startswith(self._nonce) or len(server_nonce) <= len(self._nonce):
            raise OperationFailure("SCRAM: server returned an invalid nonce")
        try:
            salt = base64.b64decode(attributes["s"], validate=True)
            iterations = int(attributes["i"])
        except (KeyError, ValueError):
            raise OperationFailure(f"SCRAM: malformed server-first-message {server_first!r}") from None
        if iterations < MIN_ITERATIONS:
            raise OperationFailure(
                f"SCRAM: server returned an iteration count of {iterations}, below the minimum {MIN_ITERATIONS}")

        keys = self._keys(salt, iterations)
        without_proof = b"c=" + base64.b64encode(_GS2_HEADER) + b",r=" + server_nonce.encode("utf-8")
        auth_message = b",".join((self._client_first_bare, server_first, without_proof))
        stored_key = self._digest(keys.client_key).digest()
        client_signature = hmac.digest(stored_key, auth_message, self._hash_name)
        proof = _xor(keys.client_key, client_signature)
        self._server_signature = hmac.digest(keys.server_key, auth_message, self._hash_name)
        return without_proof + b",p=" + base64.b64encode(proof)

    def verify_server_final(self, server_final: bytes) -> None:
        """Raise unless the server-final-message proves the server knows the password."""
        import hmac
        if self._server_signature is None:
            raise OperationFailure("SCRAM: server-final-message before client-final-message")
        attributes = _parse_attributes(server_final)
        if "e" in attributes:
            raise OperationFailure(f"SCRAM: server reported an error: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes["v"], validate=True)
        except (KeyError, ValueError):
            raise OperationFailure("SCRAM: server-final-message has no valid signature") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise OperationFailure("SCRAM: server returned an invalid signature")

    def _keys(self, salt: bytes, iterations: int) -> ScramKeys:
        import hashlib
        import hmac
        cache_key = (self.mechanism, self._password, salt, iterations)
        if self._cache is not None:
            cached = self._cache.get(cache_key)
            if cached is not None:
                return cached
        salted = hashlib.pbkdf2_hmac(self._hash_name, self._password.encode("utf-8"), salt, iterations)
        keys = ScramKeys(hmac.digest(salted, b"Client Key", self._hash_name),
                         hmac.digest(salted, b"Server Key", self._hash_name))
        if self._cache is not None:
            self._cache.put(cache_key, keys)
        return keys
