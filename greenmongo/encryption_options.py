"""PyMongo's ``pymongo.encryption_options``: AutoEncryptionOpts and the explicit encryption option types.

Constructing AutoEncryptionOpts without pymongocrypt raises ConfigurationError naming the ``encryption``
extra, as PyMongo does. ``kms_connect_callback`` (PyMongo 4.19's custom KMS sockets and
HTTPProxyKMSConnect) is not built: passing one raises ConfigurationError.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, TypedDict

from greenmongo.bson import Int64
from greenmongo.crypt.binding import EXTRA_HINT, load
from greenmongo.crypt.kms_tls import parse_kms_tls_options
from greenmongo.errors import ConfigurationError

if TYPE_CHECKING:
    from greenmongo.mongo_client import MongoClient

__all__ = ["AutoEncryptionOpts", "RangeOpts", "StringOpts", "SubstringOpts", "PrefixOpts", "SuffixOpts",
           "check_min_pymongocrypt"]

#: The oldest pymongocrypt with what greenmongo uses (KMS retry, key expiration, named KMS providers).
MIN_PYMONGOCRYPT = "1.13.0"


def check_min_pymongocrypt() -> None:
    """ConfigurationError unless pymongocrypt >= MIN_PYMONGOCRYPT is importable."""
    crypt = load()
    have = tuple(int(part) for part in crypt.version.split(".")[:3] if part.isdigit())
    if have < tuple(int(part) for part in MIN_PYMONGOCRYPT.split(".")):
        raise ConfigurationError(f"client-side field level encryption requires pymongocrypt>={MIN_PYMONGOCRYPT}, "
                                 f"found version {crypt.version}: {EXTRA_HINT}")


def refuse_kms_connect_callback(callback: Any) -> None:
    if callback is not None:
        raise ConfigurationError("kms_connect_callback is not implemented in greenmongo: KMS requests go over "
                                 "greenmongo's own TLS connections (configure them with kms_tls_options)")


class AutoEncryptionOpts:
    """Options for automatic encryption and decryption (``MongoClient(auto_encryption_opts=...)``).

    Automatic *encryption* needs MongoDB Enterprise's mongocryptd or the crypt_shared library; automatic
    *decryption* alone (``bypass_auto_encryption=True``) and ``bypass_query_analysis`` need neither.
    """

    def __init__(
        self,
        kms_providers: Mapping[str, Any],
        key_vault_namespace: str,
        key_vault_client: Optional[MongoClient] = None,
        schema_map: Optional[Mapping[str, Any]] = None,
        bypass_auto_encryption: bool = False,
        mongocryptd_uri: str = "mongodb://localhost:27020",
        mongocryptd_bypass_spawn: bool = False,
        mongocryptd_spawn_path: str = "mongocryptd",
        mongocryptd_spawn_args: Optional[list[str]] = None,
        kms_tls_options: Optional[Mapping[str, Any]] = None,
        crypt_shared_lib_path: Optional[str] = None,
        crypt_shared_lib_required: bool = False,
        bypass_query_analysis: bool = False,
        encrypted_fields_map: Optional[Mapping[str, Any]] = None,
        key_expiration_ms: Optional[int] = None,
        kms_connect_callback: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        check_min_pymongocrypt()
        refuse_kms_connect_callback(kms_connect_callback)
        if encrypted_fields_map is not None and not isinstance(encrypted_fields_map, Mapping):
            raise TypeError("encrypted_fields_map must be an instance of dict, bson.son.SON, or any other type "
                            "that inherits from collections.Mapping")
        if not isinstance(key_vault_namespace, str) or "." not in key_vault_namespace:
            raise ConfigurationError("key_vault_namespace must be a 'database.collection' string")
        if mongocryptd_spawn_args is None:
            mongocryptd_spawn_args = ["--idleShutdownTimeoutSecs=60"]
        if not isinstance(mongocryptd_spawn_args, list):
            raise TypeError(f"mongocryptd_spawn_args must be a list, not {type(mongocryptd_spawn_args)}")
        if not any("idleShutdownTimeoutSecs" in arg for arg in mongocryptd_spawn_args):
            mongocryptd_spawn_args.append("--idleShutdownTimeoutSecs=60")
        self._kms_providers = kms_providers
        self._key_vault_namespace = key_vault_namespace
        self._key_vault_client = key_vault_client
        self._schema_map = schema_map
        self._bypass_auto_encryption = bypass_auto_encryption
        self._mongocryptd_uri = mongocryptd_uri
        self._mongocryptd_bypass_spawn = mongocryptd_bypass_spawn
        self._mongocryptd_spawn_path = mongocryptd_spawn_path
        self._mongocryptd_spawn_args = mongocryptd_spawn_args
        self._kms_tls_options = kms_tls_options
        self._kms_tls = parse_kms_tls_options(kms_tls_options)  # errors now, not at the first KMS request
        self._crypt_shared_lib_path = crypt_shared_lib_path
        self._crypt_shared_lib_required = crypt_shared_lib_required
        self._bypass_query_analysis = bypass_query_analysis
        self._encrypted_fields_map = encrypted_fields_map
        self._key_expiration_ms = key_expiration_ms
        self._kms_connect_callback = None

    def __repr__(self) -> str:
        # Never the providers' contents: they are credentials and master keys.
        return (f"AutoEncryptionOpts(kms_providers=<{', '.join(self._kms_providers)}>, "
                f"key_vault_namespace={self._key_vault_namespace!r}, "
                f"bypass_auto_encryption={self._bypass_auto_encryption!r})")


class RangeOpts:
    """Options for the Range algorithm (explicit encryption of range-queryable values)."""

    def __init__(self, sparsity: Optional[int] = None, trim_factor: Optional[int] = None, min: Optional[Any] = None,
                 max: Optional[Any] = None, precision: Optional[int] = None) -> None:
        self.min = min
        self.max = max
        self.sparsity = sparsity
        self.trim_factor = trim_factor
        self.precision = precision

    @property
    def document(self) -> dict[str, Any]:
        """The options as libmongocrypt reads them (sparsity is an int64)."""
        fields = [("sparsity", Int64(self.sparsity) if self.sparsity else None), ("trimFactor", self.trim_factor),
                  ("precision", self.precision), ("min", self.min), ("max", self.max)]
        return {name: value for name, value in fields if value is not None}


class StringOpts:
    """Options for the String algorithm (prefix, suffix and substring queries)."""

    def __init__(self, substring: Optional[SubstringOpts] = None, prefix: Optional[PrefixOpts] = None,
                 suffix: Optional[SuffixOpts] = None, case_sensitive: Optional[bool] = None,
                 diacritic_sensitive: Optional[bool] = None) -> None:
        self.substring = substring
        self.prefix = prefix
        self.suffix = suffix
        self.case_sensitive = case_sensitive
        self.diacritic_sensitive = diacritic_sensitive

    @property
    def document(self) -> dict[str, Any]:
        fields = [("substring", self.substring), ("prefix", self.prefix), ("suffix", self.suffix),
                  ("caseSensitive", self.case_sensitive), ("diacriticSensitive", self.diacritic_sensitive)]
        return {name: value for name, value in fields if value is not None}


class SubstringOpts(TypedDict):
    """Substring query bounds: the longest value inserted, the shortest and longest query."""

    strMaxLength: int
    strMinQueryLength: int
    strMaxQueryLength: int


class PrefixOpts(TypedDict):
    """Prefix query bounds: the shortest and longest query."""

    strMinQueryLength: int
    strMaxQueryLength: int


class SuffixOpts(TypedDict):
    """Suffix query bounds: the shortest and longest query."""

    strMinQueryLength: int
    strMaxQueryLength: int
