"""Write-command replies -> exceptions (CRUD spec "Error Handling").

An ``ok: 1`` write reply can still carry ``writeErrors`` (the writes failed)
and a ``writeConcernError`` (they happened but were not replicated as asked).
Write errors win over the write concern error, and of several write errors
the last is reported, as PyMongo does for single-statement helpers.
"""

from __future__ import annotations

from typing import Any, Mapping, NoReturn, Optional, Sequence

from greenmongo.errors import DuplicateKeyError, WriteConcernError, WriteError, WTimeoutError
from greenmongo.wire import reply_fields
from greenmongo.wire.command_errors import DUPLICATE_KEY_CODES, check_write_concern_error

#: Error codes the Retryable Writes spec retries (also inside a writeConcernError).
RETRYABLE_WRITE_ERROR_CODES = frozenset({11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262})


def write_concern_error_document(reply: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The reply's writeConcernError with the reply's errorLabels copied in (None if absent)."""
    if reply.get("writeConcernError") is None:
        return None
    document = dict(check_write_concern_error(reply))
    labels = reply_fields.strings(reply, "errorLabels", default=None)
    if labels:
        document["errorLabels"] = list(labels)
    return document


def is_wtimeout(error: Mapping[str, Any]) -> bool:
    """A write concern error caused by wtimeout (or maxTimeMS) rather than by replication state."""
    if error.get("code") == 50:
        return True
    info = error.get("errInfo")
    return bool(isinstance(info, Mapping) and info.get("wtimeout"))


def raise_write_concern_error(error: Mapping[str, Any]) -> NoReturn:
    message = error.get("errmsg") or "write concern error"
    if is_wtimeout(error):
        raise WTimeoutError(message, error.get("code"), error)
    raise WriteConcernError(message, error.get("code"), error)


def raise_write_error(error: Mapping[str, Any]) -> NoReturn:
    code = error.get("code")
    message = error.get("errmsg") or "write error"
    if code in DUPLICATE_KEY_CODES:
        raise DuplicateKeyError(message, code, error)
    raise WriteError(message, code, error)


def raise_last_write_error(write_errors: Sequence[Mapping[str, Any]]) -> NoReturn:
    raise_write_error(write_errors[-1])


def check_write_reply_fields(reply: Mapping[str, Any], statements: Optional[int]) -> None:
    """ProtocolError unless an ``ok: 1`` reply to a write of ``statements`` statements has the fields
    results are read from, each of its type: ``n``/``nModified`` integers, ``upserted`` and
    ``writeErrors`` arrays of documents whose ``index`` points into the batch (unchecked when
    ``statements`` is None) and whose error has an integer ``code``, a well-formed ``writeConcernError``."""
    if (type(reply.get("n")) is int and "nModified" not in reply and "upserted" not in reply
            and "writeErrors" not in reply and "writeConcernError" not in reply):
        return  # the usual reply ({n, ok} and gossip): nothing more to check
    reply_fields.integer(reply, "n", default=0)
    reply_fields.integer(reply, "nModified", default=0)
    for name in ("upserted", "writeErrors"):
        entries = reply_fields.documents(reply, name, default=())
        for position, entry in enumerate(entries):
            where = f"{name}[{position}]"
            index = reply_fields.integer(entry, "index", where=where)
            if statements is not None and not 0 <= index < statements:
                raise reply_fields.malformed(f"{where}.index", index, f"an index into the batch of {statements}")
            if name == "upserted":
                if "_id" not in entry:
                    raise reply_fields.missing(f"{where}._id")
            else:
                reply_fields.integer(entry, "code", where=where)
                reply_fields.string(entry, "errmsg", where=where, default=None)
                reply_fields.document(entry, "errInfo", where=where, default=None)
    if reply.get("writeConcernError") is not None:
        check_write_concern_error(reply)


def check_write_reply(reply: Mapping[str, Any], statements: Optional[int] = None) -> None:
    """Raise WriteError/DuplicateKeyError, then WriteConcernError/WTimeoutError, for an ``ok: 1`` reply
    (ProtocolError for a malformed one)."""
    check_write_reply_fields(reply, statements)
    write_errors = reply.get("writeErrors")
    if write_errors:
        raise_last_write_error(write_errors)
    error = write_concern_error_document(reply)
    if error:
        raise_write_concern_error(error)
