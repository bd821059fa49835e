"""expectError: assertions about an error an operation raised.

Errors are read through PyMongo's public shapes (``code``, ``details``,
``has_error_label``, ``timeout``; BulkWriteError's merged ``details``;
ClientBulkWriteException's ``error``, ``write_errors``,
``write_concern_errors``, ``partial_result``), which greenmongo keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator

from spec.unified.matching import MISSING, Matcher, operator_of
from spec.unified.outcomes import MatchError, TestFileError
from spec.unified.results import bulk_error_result, to_document

_KNOWN = frozenset({
    "isError", "isClientError", "isTimeoutError", "errorContains", "errorCode", "errorCodeName",
    "errorLabelsContain", "errorLabelsOmit", "writeErrors", "writeConcernErrors", "errorResponse", "expectResult",
})


def _is(exc: BaseException, errors: Any, name: str) -> bool:
    cls = getattr(errors, name, None)
    return cls is not None and isinstance(exc, cls)


def _client_bulk(exc: BaseException, errors: Any) -> bool:
    return _is(exc, errors, "ClientBulkWriteException")


def is_server_error(exc: BaseException, errors: Any) -> bool:
    """Derived from a server response (as opposed to a client error: validation, network, ...)."""
    if _client_bulk(exc, errors):
        top = getattr(exc, "error", None)
        return True if top is None else is_server_error(top, errors)
    if _is(exc, errors, "OperationFailure"):
        return True
    return _is(exc, errors, "NotPrimaryError") and bool(getattr(exc, "details", None))


def _top_level(exc: BaseException, errors: Any) -> list[BaseException]:
    """The errors whose code, message and labels count: a client bulk write's top-level ``error``."""
    if _client_bulk(exc, errors):
        top = getattr(exc, "error", None)
        return [top] if top is not None else []
    return [exc]


def _aggregated(exc: BaseException, errors: Any) -> Iterator[Mapping[str, Any]]:
    """A BulkWriteError's individual write and write concern errors."""
    if _is(exc, errors, "BulkWriteError"):
        details = getattr(exc, "details", None) or {}
        yield from details.get("writeErrors", [])
        yield from details.get("writeConcernErrors", [])


def _messages(exc: BaseException, errors: Any) -> list[str]:
    texts = [str(error) for error in _top_level(exc, errors)]
    texts += [str(item.get("errmsg", "")) for item in _aggregated(exc, errors)]
    return texts


def _codes(exc: BaseException, errors: Any) -> set:
    codes = {getattr(error, "code", None) for error in _top_level(exc, errors)}
    codes |= {item.get("code") for item in _aggregated(exc, errors)}
    return codes - {None}


def _code_names(exc: BaseException, errors: Any) -> set[str]:
    names = set()
    for error in _top_level(exc, errors):
        details = getattr(error, "details", None)
        if isinstance(details, Mapping) and details.get("codeName"):
            names.add(str(details["codeName"]).lower())
    for item in _aggregated(exc, errors):
        if item.get("codeName"):
            names.add(str(item["codeName"]).lower())
    return names


def _has_label(exc: BaseException, errors: Any, label: str) -> bool:
    for error in [exc] + _top_level(exc, errors):
        has = getattr(error, "has_error_label", None)
        if has is not None and has(label):
            return True
    return False


def _partial_result(exc: BaseException, errors: Any) -> Any:
    if _is(exc, errors, "BulkWriteError"):
        return bulk_error_result(getattr(exc, "details", None) or {})
    if _client_bulk(exc, errors):
        partial = getattr(exc, "partial_result", None)
        return MISSING if partial is None else to_document(partial)
    return MISSING


def assert_error(matcher: Matcher, errors: Any, expected: Mapping[str, Any], exc: BaseException) -> None:
    """Raise MatchError unless ``exc`` satisfies every assertion of one expectedError object."""
    unknown = set(expected) - _KNOWN
    if unknown:
        raise TestFileError(f"expectError: unknown assertions {sorted(unknown)}")
    where = f"expectError ({type(exc).__name__}: {str(exc)[:300]})"
    if "isClientError" in expected:
        server = is_server_error(exc, errors)
        if expected["isClientError"] == server:
            raise MatchError(f"{where}: expected isClientError={expected['isClientError']}")
    if "isTimeoutError" in expected:
        if bool(getattr(exc, "timeout", False)) != bool(expected["isTimeoutError"]):
            raise MatchError(f"{where}: expected isTimeoutError={expected['isTimeoutError']}")
    if "errorContains" in expected:
        needle = expected["errorContains"].lower()
        if not any(needle in text.lower() for text in _messages(exc, errors)):
            raise MatchError(f"{where}: message does not contain {expected['errorContains']!r}")
    if "errorCode" in expected and expected["errorCode"] not in _codes(exc, errors):
        raise MatchError(f"{where}: expected code {expected['errorCode']}, got {sorted(_codes(exc, errors))}")
    if "errorCodeName" in expected and expected["errorCodeName"].lower() not in _code_names(exc, errors):
        raise MatchError(f"{where}: expected codeName {expected['errorCodeName']}, "
                         f"got {sorted(_code_names(exc, errors))}")
    for label in expected.get("errorLabelsContain", []):
        if not _has_label(exc, errors, label):
            raise MatchError(f"{where}: missing error label {label!r}")
    for label in expected.get("errorLabelsOmit", []):
        if _has_label(exc, errors, label):
            raise MatchError(f"{where}: unexpected error label {label!r}")
    if "writeErrors" in expected:
        _assert_write_errors(matcher, errors, expected["writeErrors"], exc, where)
    if "writeConcernErrors" in expected:
        _assert_write_concern_errors(matcher, errors, expected["writeConcernErrors"], exc, where)
    if "errorResponse" in expected:
        responses = [getattr(error, "details", None) for error in _top_level(exc, errors)]
        response = next((r for r in responses if isinstance(r, Mapping)), None)
        if response is None:
            raise MatchError(f"{where}: the error carries no server response")
        matcher.match(expected["errorResponse"], response, root=True, path="errorResponse")
    if "expectResult" in expected:
        want = expected["expectResult"]
        got = _partial_result(exc, errors)
        if got is MISSING and operator_of(want) != "$$unsetOrMatches":
            raise MatchError(f"{where}: the error carries no result")
        matcher.match(want, got, root=True, path="expectError.expectResult")


def _assert_write_errors(matcher: Matcher, errors: Any, expected: Mapping[str, Any], exc: BaseException,
                         where: str) -> None:
    if not _client_bulk(exc, errors):
        raise MatchError(f"{where}: writeErrors is only for client bulk write errors")
    raw = exc.write_errors or {}
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    else:  # PyMongo: a list of the server's error documents, each with its model index in "idx"
        pairs = [(error["idx"], error) for error in raw]
    actual = {int(index): _error_document(error) for index, error in pairs}
    wanted = {int(index): error for index, error in expected.items()}
    if set(actual) != set(wanted):
        raise MatchError(f"{where}: write errors at {sorted(actual)}, expected at {sorted(wanted)}")
    for index, want in wanted.items():
        matcher.match(want, actual[index], root=True, path=f"writeErrors[{index}]")


def _assert_write_concern_errors(matcher: Matcher, errors: Any, expected: list, exc: BaseException,
                                 where: str) -> None:
    if not _client_bulk(exc, errors):
        raise MatchError(f"{where}: writeConcernErrors is only for client bulk write errors")
    actual = [_error_document(error) for error in (exc.write_concern_errors or [])]
    if len(actual) != len(expected):
        raise MatchError(f"{where}: {len(actual)} write concern errors, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual)):
        matcher.match(want, got, root=True, path=f"writeConcernErrors[{index}]")


def _error_document(error: Any) -> Any:
    """A client bulk write's WriteError / WriteConcernError as the spec's model: code, message, details.

    Drivers may keep the server's documents (errmsg, errInfo): those are mapped onto the model's
    names, and the original fields stay (the documents are matched as root-level documents).
    """
    if not isinstance(error, Mapping):
        details = getattr(error, "details", None)
        if isinstance(details, Mapping):
            error = details
        else:
            return {"code": getattr(error, "code", None), "message": str(error)}
    document = dict(error)
    if "message" not in document and "errmsg" in document:
        document["message"] = document["errmsg"]
    if "details" not in document and "errInfo" in document:
        document["details"] = document["errInfo"]
    return document
