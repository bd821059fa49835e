"""The I/O libmongocrypt asks for, done by greenmongo: key vault, collection info, markings, KMS.

Key vault reads use majority read concern and writes majority write concern (spec); documents travel as
raw BSON (RawBSONDocument) so keys are never decoded here. KMS exchanges go over greenmongo's own TLS
sockets (``net/kms.py``) with the provider's ``kms_tls_options``. Error texts name hosts and providers,
never request bodies, key material or credentials.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterator, Mapping, Optional

from greenmongo.auth.aws import obtain_credentials
from greenmongo.auth.cache import AuthCache
from greenmongo.bson import STANDARD, Binary, CodecOptions, RawBSONDocument, decode, encode
from greenmongo.bson.binary import UUID_SUBTYPE
from greenmongo.crypt import mongocryptd
from greenmongo.crypt.binding import load
from greenmongo.crypt.kms_tls import DEFAULT
from greenmongo.errors import (
    AutoReconnect,
    ConfigurationError,
    EncryptionError,
    NetworkTimeout,
    ServerSelectionTimeoutError,
)
from greenmongo.hub.waiting import sleep
from greenmongo.net.connect import load_tls
from greenmongo.net.kms import kms_exchange
from greenmongo.options.connection_settings import TlsSettings
from greenmongo.options.credentials import MongoCredential
from greenmongo.options.read_concern import ReadConcern
from greenmongo.options.write_concern import WriteConcern

#: Seconds a KMS exchange may take (connect, TLS, request and reply).
KMS_TIMEOUT = 10.0
_HTTPS_PORT = 443
_KMIP_PORT = 5696
#: Key documents stay raw (ids as Binary subtype 4); other decoded documents use the standard UUID representation.
RAW: CodecOptions = CodecOptions(document_class=RawBSONDocument)
STANDARD_OPTIONS: CodecOptions = CodecOptions(uuid_representation=STANDARD)
#: libmongocrypt's filters and commands decode faithfully (subtype 4 stays Binary) to be sent on.
PLAIN: CodecOptions = CodecOptions()


#: MONGODB-AWS without a user: obtain_credentials then looks where the AWS auth spec says (environment first).
_ON_DEMAND_AWS = MongoCredential("MONGODB-AWS", "$external", None, None, None, None)


def split_endpoint(endpoint: str, default_port: int) -> tuple[str, int]:
    """``host[:port]`` (IPv6 in brackets) of a KMS endpoint libmongocrypt gives."""
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = endpoint.rpartition(":") if endpoint.count(":") == 1 else (endpoint, "", "")
    if not host or host.endswith(".sock"):
        raise ConfigurationError(f"invalid KMS endpoint {endpoint!r}")
    if port and not port.isdigit():
        raise ConfigurationError(f"invalid KMS endpoint {endpoint!r}: the port is not a number")
    return host, int(port) if port else default_port


class EncryptionIO:
    """libmongocrypt's MongoCryptCallback over greenmongo clients (see :func:`new_io`)."""

    def __init__(self, key_vault_collection: Any, metadata_client: Any = None,
                 mongocryptd_client: Optional[Any] = None, kms_tls: Optional[Mapping[str, TlsSettings]] = None,
                 spawn: Optional[mongocryptd.Spawner] = None) -> None:
        self.key_vault = key_vault_collection.with_options(
            codec_options=RAW, read_concern=ReadConcern("majority"), write_concern=WriteConcern(w="majority"))
        # The client encrypting for itself is held weakly (it owns us).
        self._metadata: Optional[Callable[[], Any]] = weakref.ref(metadata_client) if metadata_client else None
        self.mongocryptd_client = mongocryptd_client
        self.kms_tls = dict(kms_tls or {})
        load_tls()  # KMS requests speak TLS: import its stack here, not inside the first request's greenlet
        self.spawner = spawn
        self._auth_cache = AuthCache()  # on-demand AWS credentials fetched with an expiry are kept here
        #: Empty providers whose on-demand credentials greenmongo cannot fetch (Azure's, GCP's), once asked.
        self.omitted_credentials: list[str] = []

    # -- libmongocrypt's callback methods ---------------------------------------------------------

    def kms_request(self, kms_context: Any) -> None:
        provider = kms_context.kms_provider
        default_port = _KMIP_PORT if provider.split(":")[0] == "kmip" else _HTTPS_PORT
        host, port = split_endpoint(kms_context.endpoint, default_port)
        tls = self.kms_tls.get(provider, DEFAULT)
        delay = kms_context.usleep
        if delay:
            sleep(delay / 1e6)
        message = kms_context.message
        try:
            kms_exchange(host, port, tls, message, lambda: kms_context.bytes_needed, kms_context.feed,
                         KMS_TIMEOUT)
        except (AutoReconnect, NetworkTimeout) as exc:
            # libmongocrypt decides whether this request is retried (it allows a few for transient errors).
            error: Any = load().MongoCryptError
            try:
                kms_context.fail()
            except error as final:
                raise error(f"{final}, last attempt failed with: {exc}", final.code) from None

    def collection_info(self, database: str, filter: bytes) -> list[bytes]:
        client = self._metadata() if self._metadata is not None else None
        if client is None:
            raise EncryptionError(RuntimeError("the client this encryption belongs to was closed"))
        with client[database].list_collections(filter=decode(filter, PLAIN)) as cursor:
            return [encode(info) for info in cursor]

    def mark_command(self, database: str, cmd: bytes) -> bytes:
        if self.mongocryptd_client is None:
            raise EncryptionError(ConfigurationError(
                "automatic encryption needs mongocryptd or the crypt_shared library, and neither is configured"))
        command = decode(cmd, PLAIN)
        if self.spawner is not None and not self.spawner.spawned:
            self.spawner.spawn()  # first need: a missing executable is reported now, not after a timeout
        try:
            reply = self.mongocryptd_client[database].command(command, codec_options=RAW)
        except ServerSelectionTimeoutError:
            if self.spawner is None:
                raise
            self.spawner.spawn()  # the spec: spawn again and retry once when selection fails
            reply = self.mongocryptd_client[database].command(command, codec_options=RAW)
        return reply.raw

    def fetch_keys(self, filter: bytes) -> Iterator[bytes]:
        with self.key_vault.find(decode(filter, PLAIN)) as cursor:
            for key in cursor:
                yield key.raw

    def insert_data_key(self, data_key: bytes) -> Binary:
        document = RawBSONDocument(data_key, RAW)
        key_id = document["_id"]
        if not isinstance(key_id, Binary) or key_id.subtype != UUID_SUBTYPE:
            raise TypeError(f"data key _id must be a Binary of the UUID subtype, not {type(key_id).__name__}")
        self.key_vault.insert_one(document)
        return key_id

    def bson_encode(self, doc: Mapping[str, Any]) -> bytes:
        return encode(doc, codec_options=STANDARD_OPTIONS)

    def on_demand_credentials(self, kms_providers: Mapping[str, Any]) -> dict[str, Any]:
        """Credentials for providers given empty (``"aws": {}``): AWS from greenmongo's cooperative MONGODB-AWS
        lookup (environment, web identity, ECS, EC2; fetched ones cached until they near expiry)."""
        wanted = sorted(name for name in ("aws", "azure", "gcp") if name in kms_providers
                        and not kms_providers[name])
        # libmongocrypt asks for every empty provider at once, whichever this operation uses: Azure's and GCP's
        # (their metadata services) are not built, so they stay unset and an operation that needs one fails
        # in libmongocrypt naming it.
        self.omitted_credentials = [name for name in wanted if name != "aws"]
        if "aws" not in wanted:
            return {}
        found = obtain_credentials(_ON_DEMAND_AWS, self._auth_cache, self._auth_cache.io)
        aws: dict[str, Any] = {"accessKeyId": found.access_key_id, "secretAccessKey": found.secret_access_key}
        if found.session_token:
            aws["sessionToken"] = found.session_token
        return {"aws": aws}

    def close(self) -> None:
        if self.mongocryptd_client is not None:
            self.mongocryptd_client.close()
            self.mongocryptd_client = None


def new_io(*args: Any, **kwargs: Any) -> EncryptionIO:
    """An EncryptionIO that is also pymongocrypt's MongoCryptCallback (MongoCrypt checks the type)."""
    return _callback_class()(*args, **kwargs)


_CLASS: Optional[type] = None


def _callback_class() -> type:
    global _CLASS
    if _CLASS is None:
        _CLASS = type("EncryptionIO", (EncryptionIO, load().MongoCryptCallback), {})
    return _CLASS
