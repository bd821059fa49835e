"""libmongocrypt handles for explicit encryption (ClientEncryption) and automatic encryption (MongoClient).

Both wrap one ``mongocrypt_t`` and one EncryptionIO. Errors other than BSON errors come out as
EncryptionError (PyMongo's contract), with libmongocrypt's message: it names keys and providers, never
plaintext or key material.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Optional, Sequence

from greenmongo.bson import encode
from greenmongo.crypt.binding import load
from greenmongo.crypt.io import STANDARD_OPTIONS, EncryptionIO
from greenmongo.crypt.state_machine import run_state_machine
from greenmongo.errors import BSONError, ConfigurationError, EncryptionError


@contextlib.contextmanager
def wrap_errors() -> Iterator[None]:
    """BSON errors pass unchanged; everything else becomes EncryptionError (its ``cause`` the original)."""
    try:
        yield
    except (BSONError, EncryptionError):
        raise
    except Exception as exc:
        raise EncryptionError(exc) from exc


def mongocrypt_options(kms_providers: Mapping[str, Any], *, schema_map: Optional[Mapping[str, Any]] = None,
                       encrypted_fields_map: Optional[Mapping[str, Any]] = None, bypass_query_analysis: bool = False,
                       crypt_shared_lib_path: Optional[str] = None, crypt_shared_lib_required: bool = False,
                       bypass_encryption: bool = False, key_expiration_ms: Optional[int] = None) -> Any:
    crypt = load()
    return crypt.MongoCryptOptions(
        dict(kms_providers),
        schema_map=encode(schema_map, codec_options=STANDARD_OPTIONS) if schema_map else None,
        encrypted_fields_map=(encode(encrypted_fields_map, codec_options=STANDARD_OPTIONS)
                              if encrypted_fields_map else None),
        bypass_query_analysis=bypass_query_analysis,
        crypt_shared_lib_path=crypt_shared_lib_path,
        crypt_shared_lib_required=crypt_shared_lib_required,
        bypass_encryption=bypass_encryption,
        key_expiration_ms=key_expiration_ms,
        enable_multiple_collinfo=True,
    )


@contextlib.contextmanager
def explain_missing_credentials(io: EncryptionIO) -> Iterator[None]:
    """libmongocrypt's "no kms provider set" / "KMS provider `azure` is not configured" for an empty Azure or
    GCP entry, said in words."""
    try:
        yield
    except Exception as exc:
        text = str(exc)
        if io.omitted_credentials and ("no kms provider set" in text or any(
                f"`{name}` is not configured" in text for name in io.omitted_credentials)):
            names = ", ".join(repr(name) for name in io.omitted_credentials)
            raise EncryptionError(ConfigurationError(
                f"on-demand KMS credentials for {names} (an empty entry in kms_providers) are not implemented in "
                "greenmongo: give the provider's credentials")) from None
        raise


class _Handle:
    """One ``mongocrypt_t`` shared by greenlets: ``close()`` while others are inside a state machine (waiting on
    KMS or key vault I/O) must not free what their contexts still use, so the last one out destroys it."""

    def __init__(self, crypt: Any) -> None:
        self.crypt = crypt
        self.active = 0
        self.closing = False

    @contextlib.contextmanager
    def use(self) -> Iterator[Any]:
        if self.closing:
            raise EncryptionError(RuntimeError("the encryption handle was closed"))
        self.active += 1
        try:
            yield self.crypt
        finally:
            self.active -= 1
            if self.closing and not self.active:
                self.crypt.close()

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        if not self.active:
            self.crypt.close()


def _run(io: EncryptionIO, handle: _Handle, make_context: Any) -> Optional[bytes]:
    """One libmongocrypt context, made on the handle and driven to its end."""
    with explain_missing_credentials(io), handle.use() as crypt, make_context(crypt) as ctx:
        return run_state_machine(ctx, io)


class ExplicitEngine:
    """create_data_key / rewrap / encrypt / decrypt on BSON bytes (ClientEncryption builds on it)."""

    def __init__(self, io: EncryptionIO, options: Any) -> None:
        self.io = io
        self.handle = _Handle(load().MongoCrypt(options, io))

    def create_data_key(self, kms_provider: str, master_key: Optional[Mapping[str, Any]] = None,
                        key_alt_names: Optional[Sequence[str]] = None, key_material: Optional[bytes] = None) -> Any:
        crypt = load()
        names = [self.io.bson_encode({"keyAltName": name}) for name in key_alt_names or ()]
        material = self.io.bson_encode({"keyMaterial": key_material}) if key_material is not None else None
        opts = crypt.DataKeyOpts(dict(master_key) if master_key is not None else None, names, material)
        key = _run(self.io, self.handle, lambda crypt: crypt.data_key_context(kms_provider, opts))
        assert key is not None
        return self.io.insert_data_key(key)

    def rewrap_many_data_key(self, filter: Mapping[str, Any], provider: Optional[str],
                             master_key: Optional[Mapping[str, Any]]) -> Optional[bytes]:
        return _run(self.io, self.handle,
                    lambda crypt: crypt.rewrap_many_data_key_context(filter, provider, master_key))

    def encrypt(self, value: bytes, algorithm: str, key_id: Optional[bytes], key_alt_name: Optional[str],
                query_type: Optional[str], contention_factor: Optional[int], range_opts: Optional[bytes],
                is_expression: bool, string_opts: Optional[bytes]) -> bytes:
        crypt = load()
        alt = self.io.bson_encode({"keyAltName": key_alt_name}) if key_alt_name is not None else None
        opts = crypt.ExplicitEncryptOpts(algorithm, key_id, alt, query_type, contention_factor, range_opts,
                                         is_expression, string_opts)
        result = _run(self.io, self.handle, lambda crypt: crypt.explicit_encryption_context(value, opts))
        assert result is not None
        return result

    def decrypt(self, value: bytes) -> bytes:
        result = _run(self.io, self.handle, lambda crypt: crypt.explicit_decryption_context(value))
        assert result is not None
        return result

    def close(self) -> None:
        self.handle.close()
        self.io.close()


class AutoEngine:
    """Command encryption and reply decryption for a MongoClient with ``auto_encryption_opts``."""

    def __init__(self, io: EncryptionIO, options: Any, bypass_auto_encryption: bool) -> None:
        self.io = io
        self.bypass_auto_encryption = bypass_auto_encryption
        with wrap_errors():
            self.handle = _Handle(load().MongoCrypt(options, io))
        self.closed = False

    @property
    def crypt_shared_loaded(self) -> bool:
        return self.handle.crypt.crypt_shared_lib_version is not None

    def encrypt(self, database: str, command: bytes) -> bytes:
        with wrap_errors():
            result = _run(self.io, self.handle, lambda crypt: crypt.encryption_context(database, command))
        assert result is not None
        return result

    def decrypt(self, reply: bytes) -> bytes:
        with wrap_errors():
            result = _run(self.io, self.handle, lambda crypt: crypt.decryption_context(reply))
        assert result is not None
        return result

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.handle.close()
            self.io.close()

