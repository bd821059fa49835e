"""Turn an ``ok: 0`` command reply into the exception PyMongo would raise.

Pure: the decision depends only on the reply document, so SDAM, retry logic
and tests can all use it without a connection.
"""

from __future__ import annotations

from typing import Any, Container, Mapping, Optional, Union

from greenmongo.errors import (
    CursorNotFound,
    DuplicateKeyError,
    ExecutionTimeout,
    NotPrimaryError,
    OperationFailure,
    WriteConcernError,
)
from greenmongo.wire import reply_fields

#: "Not writable primary" and "node is recovering" codes (SDAM spec).
NOT_PRIMARY_CODES = frozenset({10107, 13435, 10058})
NODE_IS_RECOVERING_CODES = frozenset({11600, 11602, 13436, 189, 91})
STATE_CHANGE_CODES = NOT_PRIMARY_CODES | NODE_IS_RECOVERING_CODES

DUPLICATE_KEY_CODES = frozenset({11000, 11001, 12582})


def _is_ok(reply: Mapping[str, Any]) -> bool:
    """``ok: 1`` in any numeric type; a missing ``ok`` is a failure (as PyMongo), a non-number a ProtocolError."""
    ok = reply.get("ok")
    if type(ok) is float:  # what servers send: no other test needed
        return ok == 1.0
    ok = reply_fields.number(reply, "ok", default=0)
    return bool(ok) and float(ok) == 1.0


def is_state_change_error(code: Optional[int], message: str) -> bool:
    """True for the errors that mean the server is no longer (or not yet) a usable primary."""
    if code is not None:
        return code in STATE_CHANGE_CODES
    return "not master" in message or "node is recovering" in message or "not writable primary" in message


def check_command_reply(
    reply: Mapping[str, Any],
    *,
    max_wire_version: Optional[int] = None,
    allowable_errors: Container[Union[int, str]] = (),
    parse_write_concern_error: bool = False,
) -> None:
    """Raise for a failed command reply; return quietly for ``ok: 1``.

    ``allowable_errors`` lists codes or messages the caller handles itself
    (e.g. ``ns not found`` for a drop).
    """
    if "errorLabels" in reply:  # read by retry and transaction logic, on failures and writeConcernErrors
        reply_fields.strings(reply, "errorLabels")
    if _is_ok(reply):
        if parse_write_concern_error and "writeConcernError" in reply:
            error = check_write_concern_error(reply)
            raise WriteConcernError(error.get("errmsg") or "write concern error", error["code"], reply,
                                    max_wire_version)
        return
    message = (reply_fields.string(reply, "errmsg", default=None) or reply_fields.string(reply, "$err", default=None)
               or "command failed")
    code = reply_fields.integer(reply, "code", default=None)
    if code in allowable_errors or message in allowable_errors:
        return
    if is_state_change_error(code, str(message)):
        raise NotPrimaryError(str(message), reply)
    if code in DUPLICATE_KEY_CODES:
        raise DuplicateKeyError(message, code, reply, max_wire_version)
    if code == 50:
        raise ExecutionTimeout(message, code, reply, max_wire_version)
    if code == 43:
        raise CursorNotFound(message, code, reply, max_wire_version)
    raise OperationFailure(message, code, reply, max_wire_version)


def check_write_concern_error(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    """The reply's ``writeConcernError``, checked: a document with an integer ``code`` and a string
    ``errmsg`` (ProtocolError otherwise: a write concern error must not be misread as success)."""
    error: Mapping[str, Any] = reply_fields.document(reply, "writeConcernError")
    reply_fields.integer(error, "code", where="writeConcernError")
    reply_fields.string(error, "errmsg", where="writeConcernError", default=None)
    reply_fields.document(error, "errInfo", where="writeConcernError", default=None)
    return error
