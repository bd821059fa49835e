"""Client-side encryption in the unified runner: clientEncryption entities, their operations, and the
KMS credentials the test files leave as ``$$placeholder``.

Credentials (the Client Side Encryption tests README): ``local`` is the spec's LOCAL_MASTERKEY; ``kmip``
is the KMIP server named by ``GREENMONGO_TEST_KMIP_ENDPOINT`` with its ``GREENMONGO_TEST_KMIP_CA_FILE`` /
``GREENMONGO_TEST_KMIP_CERT_FILE`` (the suite fixture starts a PyKMIP server and sets them); ``aws``,
``azure`` and ``gcp`` come from ``FLE_AWS_KEY``/``FLE_AWS_SECRET``, ``FLE_AZURE_*``, ``FLE_GCP_*`` when set.
A provider without credentials gets well-formed stand-ins so that entities are created as the test file
says, and an operation that would reach that provider's KMS is skipped (NotSupported) naming it.

Automatic encryption (an ``autoEncryptOpts`` client without ``bypassAutoEncryption``) needs mongocryptd or
crypt_shared, which this machine does not have: such clients are NotSupported.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any, Optional

from spec.unified.outcomes import NotSupported, TestFileError

#: The spec's LOCAL_MASTERKEY (client-side-encryption tests README).
LOCAL_MASTER_KEY = base64.b64decode(
    "Mng0NCt4ZHVUYUJCa1kxNkVyNUR1QURhZ2h2UzR2d2RrZzh0cFBwM3R6NmdWMDFBMUN3YkQ5aXRRMkhGRGdQV09wOGVNYUMxT2k3NjZKelhaQm"
    "RCZGJkTXVyZG9uSjFk")
KMIP_ENDPOINT_ENV = "GREENMONGO_TEST_KMIP_ENDPOINT"
KMIP_CA_ENV = "GREENMONGO_TEST_KMIP_CA_FILE"
KMIP_CERT_ENV = "GREENMONGO_TEST_KMIP_CERT_FILE"
_CLOUD_ENV = {
    "aws": {"accessKeyId": "FLE_AWS_KEY", "secretAccessKey": "FLE_AWS_SECRET"},
    "azure": {"tenantId": "FLE_AZURE_TENANTID", "clientId": "FLE_AZURE_CLIENTID",
              "clientSecret": "FLE_AZURE_CLIENTSECRET"},
    "gcp": {"email": "FLE_GCP_EMAIL", "privateKey": "FLE_GCP_PRIVATEKEY"},
}
#: Well-formed stand-ins for providers without credentials (never sent: their operations are skipped).
_STAND_INS = {"accessKeyId": "unavailable", "secretAccessKey": "unavailable", "tenantId": "unavailable",
              "clientId": "unavailable", "clientSecret": "unavailable", "email": "unavailable@example.com",
              "privateKey": base64.b64encode(b"unavailable").decode(), "endpoint": "127.0.0.1:1"}
_AUTO_KEYS = frozenset({"keyVaultNamespace", "kmsProviders", "schemaMap", "bypassAutoEncryption",
                        "encryptedFieldsMap", "bypassQueryAnalysis", "keyExpirationMS", "extraOptions",
                        "keyVaultClient"})


class EncryptionEntity:
    """A ClientEncryption and what the runner needs to know about it."""

    def __init__(self, client_encryption: Any, key_vault: Any, unavailable: frozenset) -> None:
        self.client_encryption = client_encryption
        self.key_vault = key_vault  # the key vault collection, for choosing skips
        self.unavailable = unavailable  # provider names whose KMS has no credentials here

    def check_provider(self, provider: Optional[str]) -> None:
        if provider is not None and provider in self.unavailable:
            raise NotSupported(f"no credentials for the {provider.split(':')[0]} KMS here (FLE_* variables "
                               f"unset); an operation of this test needs the {provider!r} provider")

    def check_keys(self, filter: Mapping[str, Any]) -> None:
        for key in self.key_vault.find(filter):
            self.check_provider(key["masterKey"]["provider"])

    def close(self) -> None:
        self.client_encryption.close()


def kms_credentials(providers: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], frozenset]:
    """(kms_providers, kms_tls_options, unavailable provider names) for a test's ``kmsProviders``."""
    resolved: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    unavailable = set()
    for name, fields in providers.items():
        kind = name.split(":")[0]
        if not isinstance(fields, Mapping):
            raise TestFileError(f"kmsProviders[{name!r}] must be a document")
        values: dict[str, Any] = {}
        for field, value in fields.items():
            if isinstance(value, Mapping) and set(value) == {"$$placeholder"}:
                value = _placeholder(name, kind, field, unavailable)
            values[field] = value
        if kind == "kmip" and name not in unavailable and os.environ.get(KMIP_CA_ENV):
            tls[name] = {"tlsCAFile": os.environ[KMIP_CA_ENV], "tlsCertificateKeyFile": os.environ[KMIP_CERT_ENV]}
        resolved[name] = values
    return resolved, tls, frozenset(unavailable)


def _placeholder(name: str, kind: str, field: str, unavailable: set) -> Any:
    if kind == "local" and field == "key":
        return LOCAL_MASTER_KEY
    if kind == "kmip" and field == "endpoint":
        _start_kmip_server()
        endpoint = os.environ.get(KMIP_ENDPOINT_ENV)
        if endpoint and os.environ.get(KMIP_CA_ENV) and os.environ.get(KMIP_CERT_ENV):
            return endpoint
    elif kind in _CLOUD_ENV and field in _CLOUD_ENV[kind] and os.environ.get(_CLOUD_ENV[kind][field]):
        return os.environ[_CLOUD_ENV[kind][field]]
    if field not in _STAND_INS:
        raise TestFileError(f"kmsProviders[{name!r}]: no value known for the $$placeholder {field!r}")
    unavailable.add(name)
    return _STAND_INS[field]


_KMIP_SERVERS: list = []


def _start_kmip_server() -> None:
    """A PyKMIP server for the run (tests/servers/kmip.py), started at the first test that names the kmip
    provider, unless GREENMONGO_TEST_KMIP_ENDPOINT names one already or PyKMIP is not installed."""
    import importlib.util

    if os.environ.get(KMIP_ENDPOINT_ENV) or _KMIP_SERVERS or importlib.util.find_spec("kmip") is None:
        return
    import atexit
    import tempfile
    from pathlib import Path

    from tests.servers.kmip import KmipServer

    server = KmipServer(Path(tempfile.mkdtemp(prefix="greenmongo-kmip-")))
    _KMIP_SERVERS.append(server)
    atexit.register(server.stop)
    server.start()
    os.environ.update(server.environment())


def create_client_encryption(entities: Any, spec: Mapping[str, Any]) -> None:
    """The clientEncryption entity (unified test format: clientEncryptionOpts)."""
    adapter = entities.adapter
    factory = getattr(adapter, "ClientEncryption", None)
    if factory is None:
        raise NotSupported(f"{adapter.name} has no ClientEncryption")
    unknown = set(spec) - {"id", "clientEncryptionOpts"}
    if unknown:
        raise TestFileError(f"clientEncryption {spec.get('id')!r}: unknown keys {sorted(unknown)}")
    opts = dict(spec["clientEncryptionOpts"])
    unknown = set(opts) - {"keyVaultClient", "keyVaultNamespace", "kmsProviders", "keyExpirationMS"}
    if unknown:
        raise TestFileError(f"clientEncryptionOpts: unknown keys {sorted(unknown)}")
    client = entities.get(opts["keyVaultClient"], "client")
    providers, tls, unavailable = kms_credentials(opts["kmsProviders"])
    kwargs: dict[str, Any] = {"kms_tls_options": tls or None}
    if "keyExpirationMS" in opts:
        kwargs["key_expiration_ms"] = opts["keyExpirationMS"]
    client_encryption = factory(providers, opts["keyVaultNamespace"], client, adapter.codec_options_standard,
                                **kwargs)
    db, coll = opts["keyVaultNamespace"].split(".", 1)
    # Skips are decided by reading the vault with the runner's own client, whose commands no test observes.
    key_vault = entities.context.internal_client[db][coll]
    entities.add(spec["id"], "clientEncryption", EncryptionEntity(client_encryption, key_vault, unavailable))


def _check_auto(opts: Mapping[str, Any]) -> None:
    unknown = set(opts) - _AUTO_KEYS
    if unknown:
        raise TestFileError(f"autoEncryptOpts: unknown keys {sorted(unknown)}")
    if not opts.get("bypassAutoEncryption") and not opts.get("bypassQueryAnalysis"):
        raise NotSupported("automatic encryption needs mongocryptd or the crypt_shared library (MongoDB "
                           "Enterprise downloads), which this machine does not have")


def check_auto_encryption(entities: Any) -> None:
    """NotSupported for a file whose clients need automatic encryption (checked before its initial data)."""
    for entity in entities:
        client = entity.get("client") if isinstance(entity, Mapping) else None
        if isinstance(client, Mapping) and "autoEncryptOpts" in client:
            _check_auto(client["autoEncryptOpts"])


def auto_encryption_opts(adapter: Any, entities: Any, opts: Mapping[str, Any]) -> Any:
    """A client entity's ``autoEncryptOpts`` as the driver's AutoEncryptionOpts (NotSupported when it would
    need mongocryptd or crypt_shared)."""
    _check_auto(opts)
    factory = getattr(adapter, "AutoEncryptionOpts", None)
    if factory is None:
        raise NotSupported(f"{adapter.name} has no AutoEncryptionOpts")
    providers, tls, _unavailable = kms_credentials(opts["kmsProviders"])
    kwargs: dict[str, Any] = {
        "bypass_auto_encryption": bool(opts.get("bypassAutoEncryption")),
        "bypass_query_analysis": bool(opts.get("bypassQueryAnalysis")),
        "kms_tls_options": tls or None,
    }
    for key, keyword in (("schemaMap", "schema_map"), ("encryptedFieldsMap", "encrypted_fields_map"),
                         ("keyExpirationMS", "key_expiration_ms")):
        if key in opts:
            kwargs[keyword] = opts[key]
    if "keyVaultClient" in opts:
        kwargs["key_vault_client"] = entities.get(opts["keyVaultClient"], "client")
    if "extraOptions" in opts:
        raise NotSupported("autoEncryptOpts extraOptions (mongocryptd / crypt_shared settings) need them")
    return factory(providers, opts.get("keyVaultNamespace", "keyvault.datakeys"), **kwargs)


# -- operations ------------------------------------------------------------------------------------------

def _options(kwargs: dict, allowed: set[str]) -> dict:
    opts = dict(kwargs.pop("opts", None) or {})
    unknown = set(opts) - allowed
    if unknown:
        raise TestFileError(f"unsupported opts {sorted(unknown)}")
    return opts


def create_data_key(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
    provider = args[0]
    opts = _options(kwargs, {"masterKey", "keyAltNames", "keyMaterial"})
    entity.check_provider(provider)
    return entity.client_encryption.create_data_key(provider, master_key=opts.get("masterKey"),
                                                    key_alt_names=opts.get("keyAltNames"),
                                                    key_material=opts.get("keyMaterial"))


def rewrap_many_data_key(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
    filter = args[0]
    opts = _options(kwargs, {"provider", "masterKey"})
    entity.check_provider(opts.get("provider"))
    entity.check_keys(filter)  # the keys' current providers decrypt them first
    result = entity.client_encryption.rewrap_many_data_key(filter, provider=opts.get("provider"),
                                                           master_key=opts.get("masterKey"))
    bulk = result.bulk_write_result
    if bulk is None:
        return {}
    from spec.unified.results import to_document

    return {"bulkWriteResult": to_document(bulk)}


def encrypt(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
    value = args[0]
    opts = _options(kwargs, {"keyId", "keyAltName", "algorithm", "contentionFactor", "queryType", "rangeOpts"})
    if "rangeOpts" in opts:
        raise NotSupported("encrypt rangeOpts: the runner does not convert them yet")
    return entity.client_encryption.encrypt(value, opts["algorithm"], key_id=opts.get("keyId"),
                                            key_alt_name=opts.get("keyAltName"),
                                            query_type=opts.get("queryType"),
                                            contention_factor=opts.get("contentionFactor"))


def _call(method: str) -> Any:
    def call(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
        return getattr(entity.client_encryption, method)(*args, **kwargs)
    return call


def _decrypt(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
    return entity.client_encryption.decrypt(*args)


def _get_keys(run: Any, entity: EncryptionEntity, args: list, kwargs: dict) -> Any:
    return list(entity.client_encryption.get_keys())


def operations(op: Any) -> dict:
    """The clientEncryption operations table (``op`` is operations._op)."""
    return {
        "createDataKey": op(None, "kmsProvider", "opts", call=create_data_key, timed=False),
        "rewrapManyDataKey": op(None, "filter", "opts", call=rewrap_many_data_key, timed=False),
        "encrypt": op(None, "value", "opts", call=encrypt, timed=False),
        "decrypt": op(None, "value", call=_decrypt, timed=False),
        "deleteKey": op(None, "id", call=_call("delete_key"), timed=False),
        "getKey": op(None, "id", call=_call("get_key"), timed=False),
        "getKeys": op(None, call=_get_keys, result="documents", timed=False),
        "getKeyByAltName": op(None, "keyAltName", call=_call("get_key_by_alt_name"), timed=False),
        "addKeyAltName": op(None, "id keyAltName", call=_call("add_key_alt_name"), timed=False),
        "removeKeyAltName": op(None, "id keyAltName", call=_call("remove_key_alt_name"), timed=False),
    }

