"""Automatic encryption for ``MongoClient(auto_encryption_opts=...)``: the clients it needs and the
executor hook.

Which clients (spec, "keyVaultClient, metadataClient, and the internal MongoClient"): the key vault client
given, else the client itself when its pool is unbounded, else an internal client with the parent's
options but ``minPoolSize=0`` and no auto encryption; the metadata client (listCollections for schemas)
likewise, none when ``bypass_auto_encryption``. mongocryptd gets its own client
(``serverSelectionTimeoutMS=10000``) unless encryption is bypassed, queries are not analysed, or
crypt_shared is loaded or required; it is spawned on first need (``mongocryptd.py``).

The executor calls :meth:`AutoEncrypter.encrypt_command` after every field of a command is final and
before its CommandStartedEvent, and :meth:`AutoEncrypter.decrypt_reply` after its
CommandSucceededEvent, so events never carry plaintext of encrypted fields (spec, "Interaction with
Command Monitoring").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from greenmongo.bson import CodecOptions, RawBSONDocument, decode, encode
from greenmongo.crypt.engine import AutoEngine, mongocrypt_options
from greenmongo.crypt.io import PLAIN, new_io
from greenmongo.crypt.mongocryptd import Spawner
from greenmongo.operations.base import Command, WireInfo

#: Replies of auto-encrypting clients are read raw, decrypted, then decoded with the operation's options.
RAW_REPLY: CodecOptions = CodecOptions(document_class=RawBSONDocument)
#: Client Side Encryption spec: "The write payload MUST be split at 2MiB (2097152)" (libmongocrypt grows commands).
MAX_ENCRYPTED_BATCH_BYTES = 2 * 1024 * 1024


class AutoEncrypter:
    """The executor's view of automatic encryption (``engine.protocols.AutoEncryption``): encrypt a Command
    before its started event, read its reply raw, show it still encrypted, decrypt it after the succeeded
    event."""

    reply_codec_options = RAW_REPLY

    def __init__(self, engine: AutoEngine, internal_client: Optional[Any]) -> None:
        self.engine = engine
        self.bypass_auto_encryption = engine.bypass_auto_encryption
        self._internal_client = internal_client

    def batch_wire_info(self, wire: WireInfo) -> WireInfo:
        """Write batches cut at 2 MiB before encryption grows them (spec, "Size limits for Write Commands");
        with encryption bypassed, the server's limits only."""
        if self.bypass_auto_encryption:
            return wire
        return dataclasses.replace(wire, max_batch_bytes=MAX_ENCRYPTED_BATCH_BYTES)

    def encrypt_command(self, command: Command) -> Command:
        """The command with its fields encrypted (unchanged when encryption is bypassed); sequences are folded
        into the body (libmongocrypt takes one document)."""
        if self.bypass_auto_encryption:
            return command
        document: dict[str, Any] = dict(command.body)
        for sequence in command.sequences:
            document[sequence.identifier] = [RawBSONDocument(data) for data in sequence.encoded]
        encrypted = self.engine.encrypt(command.dbname, encode(document))
        return Command(command.dbname, decode(encrypted, PLAIN), acknowledged=command.acknowledged,
                       exhaust_allowed=False)

    @staticmethod
    def shown_reply(raw: Optional[RawBSONDocument]) -> Optional[dict[str, Any]]:
        """The reply as command monitoring and tracing see it: still encrypted."""
        return None if raw is None else decode(raw.raw, PLAIN)

    def decrypt_reply(self, raw: Optional[RawBSONDocument], codec_options: CodecOptions) -> Optional[dict[str, Any]]:
        """The reply decrypted, decoded with the operation's codec options."""
        return None if raw is None else decode(self.engine.decrypt(raw.raw), codec_options)

    def close(self) -> None:
        self.engine.close()
        if self._internal_client is not None:
            self._internal_client.close()
            self._internal_client = None


def build(client: Any, opts: Any, new_internal_client: Callable[[], Any], max_pool_size: int) -> AutoEncrypter:
    """The AutoEncrypter of ``client`` (``opts`` an AutoEncryptionOpts)."""
    internal: list[Any] = []

    def internal_client() -> Any:
        if not internal:
            internal.append(new_internal_client())
        return internal[0]

    if opts._key_vault_client is not None:
        key_vault_client = opts._key_vault_client
    elif max_pool_size == 0:
        key_vault_client = client
    else:
        key_vault_client = internal_client()
    if opts._bypass_auto_encryption:
        metadata_client = None
    elif max_pool_size == 0:
        metadata_client = client
    else:
        metadata_client = internal_client()
    db, coll = opts._key_vault_namespace.split(".", 1)
    io = new_io(key_vault_client[db][coll], metadata_client, None, opts._kms_tls)
    options = mongocrypt_options(
        opts._kms_providers, schema_map=opts._schema_map, encrypted_fields_map=opts._encrypted_fields_map,
        bypass_query_analysis=opts._bypass_query_analysis, crypt_shared_lib_path=opts._crypt_shared_lib_path,
        crypt_shared_lib_required=opts._crypt_shared_lib_required, bypass_encryption=opts._bypass_auto_encryption,
        key_expiration_ms=opts._key_expiration_ms)
    try:
        engine = AutoEngine(io, options, opts._bypass_auto_encryption)
    except BaseException:
        if internal:
            internal[0].close()
        raise
    needs_mongocryptd = not (opts._bypass_auto_encryption or opts._bypass_query_analysis
                             or opts._crypt_shared_lib_required or engine.crypt_shared_loaded)
    if needs_mongocryptd:
        io.mongocryptd_client = type(client)(opts._mongocryptd_uri, connect=False,
                                             serverSelectionTimeoutMS=10000, connectTimeoutMS=10000)
        if not opts._mongocryptd_bypass_spawn:
            io.spawner = Spawner(opts._mongocryptd_spawn_path, opts._mongocryptd_spawn_args)
    return AutoEncrypter(engine, internal[0] if internal else None)
