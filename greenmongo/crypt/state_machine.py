"""Our loop over libmongocrypt's states (pymongocrypt's ``run_state_machine`` has the same contract).

Each state asks for one kind of I/O, which the ``EncryptionIO`` performs on gevent; libmongocrypt's
own waiting (a KMS retry backoff) is a cooperative sleep.
"""

from __future__ import annotations

from typing import Any, Optional

from greenmongo.crypt.binding import load
from greenmongo.errors import EncryptionError


def run_state_machine(ctx: Any, io: Any) -> Optional[bytes]:
    """Drive ``ctx`` (a pymongocrypt context) to completion; its result as BSON bytes (None when done)."""
    lib = load().lib
    while True:
        state = ctx.state
        if state == lib.MONGOCRYPT_CTX_ERROR:
            ctx._raise_from_status()
        elif state == lib.MONGOCRYPT_CTX_READY:
            return ctx.finish()
        elif state == lib.MONGOCRYPT_CTX_DONE:
            return None
        elif state == lib.MONGOCRYPT_CTX_NEED_MONGO_COLLINFO:
            for info in io.collection_info(ctx.database, ctx.mongo_operation()):
                ctx.add_mongo_operation_result(info)
            ctx.complete_mongo_operation()
        elif state == lib.MONGOCRYPT_CTX_NEED_MONGO_MARKINGS:
            ctx.add_mongo_operation_result(io.mark_command(ctx.database, ctx.mongo_operation()))
            ctx.complete_mongo_operation()
        elif state == lib.MONGOCRYPT_CTX_NEED_MONGO_KEYS:
            for key in io.fetch_keys(ctx.mongo_operation()):
                ctx.add_mongo_operation_result(key)
            ctx.complete_mongo_operation()
        elif state == lib.MONGOCRYPT_CTX_NEED_KMS:
            for kms_ctx in ctx.kms_contexts():
                with kms_ctx:
                    io.kms_request(kms_ctx)
            ctx.complete_kms()
        elif state == lib.MONGOCRYPT_CTX_NEED_KMS_CREDENTIALS:
            ctx.provide_kms_providers(io.bson_encode(io.on_demand_credentials(ctx.kms_providers)))
        else:
            raise EncryptionError(RuntimeError(f"libmongocrypt entered an unknown state: {state}"))
