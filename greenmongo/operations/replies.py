"""Write-command replies -> exceptions (CRUD spec "Error Handling").

An ``ok: 1`` write reply can still carry ``writeErrors`` (the writes failed)
and a ``writeConcernError`` (they happened but were not replicated as asked).
Write errors win over the write concern error, and of several write errors
the last is reported, as PyMongo does for single-statement helpers.
"""

from __future__ import annotations

from typing import Any, Mapping, NoReturn, Optional, Sequence

from greenmongo.errors import DuplicateKeyError, WriteConcernError, WriteError, WTimeoutError
from greenmongo.wire.command_errors import DUPLICATE_KEY_CODES

#: Error codes the Retryable Writes spec retries (also inside a writeConcernError).
RETRYABLE_WRITE_ERROR_CODES = frozenset({11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262})


def write_concern_error_document(reply: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The reply's writeConcernError with the reply's errorLabels copied in (None if absent)."""
    error = reply.get("writeConcernError")
    if not error:
        return None
    document = dict(error)
    labels = reply.get("errorLabels")
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


def check_write_reply(reply: Mapping[str, Any]) -> None:
    """Raise WriteError/DuplicateKeyError, then WriteConcernError/WTimeoutError, for an ``ok: 1`` reply."""
    write_errors = reply.get("writeErrors")
    if write_errors:
        raise_last_write_error(write_errors)
    error = write_concern_error_document(reply)
    if error:
        raise_write_concern_error(error)
