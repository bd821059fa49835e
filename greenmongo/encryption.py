"""PyMongo's ``pymongo.encryption``: explicit client-side field level encryption and key management.

``ClientEncryption`` drives libmongocrypt (PyPI ``pymongocrypt``, the ``encryption`` extra) through
greenmongo's engine (``greenmongo/crypt/``): key vault reads and writes go through the key vault client
given, KMS requests over greenmongo's TLS sockets, all cooperative on gevent.
"""

from __future__ import annotations

import enum
import ssl
import uuid
from copy import deepcopy
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Mapping, Optional, Sequence

from greenmongo.bson import STANDARD, Binary, CodecOptions, RawBSONDocument, decode, encode
from greenmongo.bson.binary import UUID_SUBTYPE
from greenmongo.crypt.engine import ExplicitEngine, mongocrypt_options, wrap_errors
from greenmongo.crypt.io import RAW, new_io
from greenmongo.encryption_options import (
    AutoEncryptionOpts,
    RangeOpts,
    StringOpts,
    check_min_pymongocrypt,
    refuse_kms_connect_callback,
)
from greenmongo.errors import ConfigurationError, EncryptedCollectionError, EncryptionError, InvalidOperation
from greenmongo.operations.requests import UpdateOne
from greenmongo.typings import _DocumentType

if TYPE_CHECKING:
    from greenmongo.collection import Collection
    from greenmongo.cursor import Cursor
    from greenmongo.database import Database
    from greenmongo.mongo_client import MongoClient
    from greenmongo.results import BulkWriteResult, DeleteResult

__all__ = ["Algorithm", "ClientEncryption", "QueryType", "RewrapManyDataKeyResult"]

#: PyMongo's name for the TLS "would block" errors (its KMS code catches them; ours runs on gevent).
BLOCKING_IO_ERRORS = (ssl.SSLWantReadError, ssl.SSLWantWriteError)


class Algorithm(str, enum.Enum):
    """The encryption algorithms (Client Side Encryption and Queryable Encryption specs)."""

    AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic = "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic"
    AEAD_AES_256_CBC_HMAC_SHA_512_Random = "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
    INDEXED = "Indexed"
    UNINDEXED = "Unindexed"
    RANGE = "Range"
    STRING = "String"
    TEXTPREVIEW = "TextPreview"


class QueryType(str, enum.Enum):
    """The query types explicit encryption prepares a value for."""

    EQUALITY = "equality"
    RANGE = "range"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    SUBSTRING = "substring"


class RewrapManyDataKeyResult:
    """What :meth:`ClientEncryption.rewrap_many_data_key` did: the bulk write of the rewrapped keys."""

    def __init__(self, bulk_write_result: Optional[BulkWriteResult] = None) -> None:
        self._bulk_write_result = bulk_write_result

    @property
    def bulk_write_result(self) -> Optional[BulkWriteResult]:
        """The key vault update, or None when no key matched the filter."""
        return self._bulk_write_result

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self._bulk_write_result!r})"


def _is_instance_named(value: Any, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(value).__mro__)


class ClientEncryption(Generic[_DocumentType]):
    """Explicit encryption and decryption, and the key vault's data keys."""

    def __init__(
        self,
        kms_providers: Mapping[str, Any],
        key_vault_namespace: str,
        key_vault_client: MongoClient,
        codec_options: CodecOptions,
        kms_tls_options: Optional[Mapping[str, Any]] = None,
        key_expiration_ms: Optional[int] = None,
        kms_connect_callback: Optional[Any] = None,
    ) -> None:
        check_min_pymongocrypt()
        refuse_kms_connect_callback(kms_connect_callback)
        if not isinstance(codec_options, CodecOptions):
            raise TypeError(f"codec_options must be an instance of bson.codec_options.CodecOptions, "
                            f"not {type(codec_options)}")
        if not _is_instance_named(key_vault_client, "MongoClient"):
            raise TypeError(f"MongoClient required but given {type(key_vault_client).__name__}")
        self._kms_providers = kms_providers
        self._key_vault_namespace = key_vault_namespace
        self._key_vault_client = key_vault_client
        self._codec_options = codec_options
        opts = AutoEncryptionOpts(kms_providers, key_vault_namespace, kms_tls_options=kms_tls_options,
                                  key_expiration_ms=key_expiration_ms)
        db, coll = key_vault_namespace.split(".", 1)
        io = new_io(key_vault_client[db][coll], None, None, opts._kms_tls)
        # Invalid providers raise ValueError/TypeError here, as PyMongo's (unwrapped).
        options = mongocrypt_options(kms_providers, key_expiration_ms=key_expiration_ms,
                                     bypass_encryption=True)  # explicit only: never loads crypt_shared
        with wrap_errors():
            self._encryption: Optional[ExplicitEngine] = ExplicitEngine(io, options)
        self._key_vault_coll = io.key_vault

    def _engine(self) -> ExplicitEngine:
        if self._encryption is None:
            raise InvalidOperation("Cannot use closed ClientEncryption")
        return self._encryption

    def _check_closed(self) -> None:
        self._engine()

    # -- data keys ---------------------------------------------------------------------------------

    def create_data_key(self, kms_provider: str, master_key: Optional[Mapping[str, Any]] = None,
                        key_alt_names: Optional[Sequence[str]] = None, key_material: Optional[bytes] = None) -> Binary:
        """Create a data key wrapped by ``kms_provider``'s master key; its ``_id`` (Binary subtype 4)."""
        engine = self._engine()
        with wrap_errors():
            return engine.create_data_key(kms_provider, master_key, key_alt_names, key_material)

    def rewrap_many_data_key(self, filter: Mapping[str, Any], provider: Optional[str] = None,
                             master_key: Optional[Mapping[str, Any]] = None) -> RewrapManyDataKeyResult:
        """Decrypt the matching data keys and encrypt them again (with ``provider``'s ``master_key``)."""
        if master_key is not None and provider is None:
            raise ConfigurationError("A provider must be given if a master_key is given")
        engine = self._engine()
        with wrap_errors():
            raw = engine.rewrap_many_data_key(filter, provider, master_key)
        if raw is None:
            return RewrapManyDataKeyResult()
        updates = [UpdateOne({"_id": key["_id"]},
                             {"$set": {"keyMaterial": key["keyMaterial"], "masterKey": key["masterKey"]},
                              "$currentDate": {"updateDate": True}})
                   for key in RawBSONDocument(raw, RAW)["v"]]
        if not updates:
            return RewrapManyDataKeyResult()
        return RewrapManyDataKeyResult(self._key_vault_coll.bulk_write(updates))

    def get_key(self, id: Binary) -> Optional[RawBSONDocument]:
        """The key document with ``_id`` ``id``, or None."""
        self._check_closed()
        return self._key_vault_coll.find_one({"_id": id})

    def get_keys(self) -> Cursor:
        """A cursor over every key document."""
        self._check_closed()
        return self._key_vault_coll.find({})

    def delete_key(self, id: Binary) -> DeleteResult:
        """Delete the key document with ``_id`` ``id``."""
        self._check_closed()
        return self._key_vault_coll.delete_one({"_id": id})

    def add_key_alt_name(self, id: Binary, key_alt_name: str) -> Any:
        """Add ``key_alt_name`` to the key's keyAltNames; the key document before the update (or None)."""
        self._check_closed()
        return self._key_vault_coll.find_one_and_update({"_id": id}, {"$addToSet": {"keyAltNames": key_alt_name}})

    def get_key_by_alt_name(self, key_alt_name: str) -> Optional[RawBSONDocument]:
        """The key document with ``key_alt_name`` among its keyAltNames, or None."""
        self._check_closed()
        return self._key_vault_coll.find_one({"keyAltNames": key_alt_name})

    def remove_key_alt_name(self, id: Binary, key_alt_name: str) -> Optional[RawBSONDocument]:
        """Remove ``key_alt_name`` (the field goes when it was the last); the document before the update."""
        self._check_closed()
        remaining = {"$filter": {"input": "$keyAltNames", "cond": {"$ne": ["$$this", key_alt_name]}}}
        pipeline = [{"$set": {"keyAltNames": {"$cond": [{"$eq": ["$keyAltNames", [key_alt_name]]}, "$$REMOVE",
                                                         remaining]}}}]
        return self._key_vault_coll.find_one_and_update({"_id": id}, pipeline)

    # -- values ------------------------------------------------------------------------------------

    def _encrypt(self, value: Any, algorithm: str, key_id: Any, key_alt_name: Optional[str],
                 query_type: Optional[str], contention_factor: Optional[int], range_opts: Optional[RangeOpts],
                 is_expression: bool, string_opts: Optional[StringOpts] = None) -> Any:
        engine = self._engine()
        if isinstance(key_id, uuid.UUID):
            key_id = Binary.from_uuid(key_id)
        if key_id is not None and not (isinstance(key_id, Binary) and key_id.subtype == UUID_SUBTYPE):
            raise TypeError("key_id must be a bson.binary.Binary with subtype 4")
        document = encode({"v": value}, codec_options=self._codec_options)
        range_bytes = encode(range_opts.document, codec_options=self._codec_options) if range_opts else None
        string_bytes = encode(string_opts.document, codec_options=self._codec_options) if string_opts else None
        with wrap_errors():
            encrypted = engine.encrypt(document, str(getattr(algorithm, "value", algorithm)),
                                       bytes(key_id) if key_id is not None else None, key_alt_name,
                                       str(getattr(query_type, "value", query_type)) if query_type else None,
                                       contention_factor, range_bytes, is_expression, string_bytes)
            return decode(encrypted)["v"]

    def encrypt(self, value: Any, algorithm: str, key_id: Optional[Binary | uuid.UUID] = None,
                key_alt_name: Optional[str] = None, query_type: Optional[str] = None,
                contention_factor: Optional[int] = None, range_opts: Optional[RangeOpts] = None,
                string_opts: Optional[StringOpts] = None) -> Binary:
        """Encrypt one BSON value with the data key ``key_id`` (or ``key_alt_name``): a Binary subtype 6."""
        return self._encrypt(value, algorithm, key_id, key_alt_name, query_type,
                             contention_factor, range_opts, False, string_opts)

    def encrypt_expression(self, expression: Mapping[str, Any], algorithm: str,
                           key_id: Optional[Binary | uuid.UUID] = None, key_alt_name: Optional[str] = None,
                           query_type: Optional[str] = None, contention_factor: Optional[int] = None,
                           range_opts: Optional[RangeOpts] = None) -> RawBSONDocument:
        """Encrypt the bounds of a range query expression (``$and`` of ``$gt``/``$lt``...)."""
        return self._encrypt(expression, algorithm, key_id, key_alt_name, query_type,
                             contention_factor, range_opts, True)

    def decrypt(self, value: Binary) -> Any:
        """The plaintext of an encrypted value (a Binary subtype 6)."""
        engine = self._engine()
        if not (isinstance(value, Binary) and value.subtype == 6):
            raise TypeError("value to decrypt must be a bson.binary.Binary with subtype 6")
        with wrap_errors():
            decrypted = engine.decrypt(encode({"v": value}))
            return decode(decrypted, codec_options=self._codec_options)["v"]

    # -- Queryable Encryption collections -----------------------------------------------------------

    def create_encrypted_collection(self, database: Database, name: str, encrypted_fields: Mapping[str, Any],
                                    kms_provider: Optional[str] = None, master_key: Optional[Mapping[str, Any]] = None,
                                    **kwargs: Any) -> tuple[Collection, Mapping[str, Any]]:
        """Create data keys for the fields without a ``keyId``, then the collection with those
        encryptedFields; EncryptedCollectionError (carrying the fields so far) when either fails."""
        if not _is_instance_named(database, "Database"):
            raise TypeError(f"Database required but given {type(database).__name__}")
        fields = deepcopy(dict(encrypted_fields))
        for index, field in enumerate(fields["fields"]):
            if isinstance(field, dict) and field.get("keyId") is None:
                try:
                    fields["fields"][index]["keyId"] = self.create_data_key(
                        kms_provider=kms_provider, master_key=master_key)  # type: ignore[arg-type]
                except EncryptionError as exc:
                    raise EncryptedCollectionError(exc, fields) from exc
        kwargs["encryptedFields"] = fields
        kwargs["check_exists"] = False
        try:
            return database.create_collection(name=name, **kwargs), fields
        except Exception as exc:
            raise EncryptedCollectionError(exc, fields) from exc

    # -- lifetime ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Release libmongocrypt's resources; the ClientEncryption cannot be used afterwards."""
        if self._encryption is not None:
            self._encryption.close()
            self._encryption = None

    def __enter__(self) -> ClientEncryption[_DocumentType]:
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc_val: Optional[BaseException],
                 exc_tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ClientEncryption(kms_providers=<{', '.join(self._kms_providers)}>, "
                f"key_vault_namespace={self._key_vault_namespace!r})")


STANDARD = STANDARD
UUID_SUBTYPE = UUID_SUBTYPE
