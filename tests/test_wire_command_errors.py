"""ok:0 replies map to PyMongo's exception classes, with code, codeName, labels and the reply."""

from __future__ import annotations

import pytest

from greenmongo.errors import (
    CursorNotFound,
    DuplicateKeyError,
    ExecutionTimeout,
    NotPrimaryError,
    OperationFailure,
    WriteConcernError,
)
from greenmongo.wire.command_errors import check_command_reply


def test_ok_reply_passes() -> None:
    assert check_command_reply({"ok": 1}) is None
    # A writeConcernError is only raised when asked for (test_write_concern_error_when_asked).
    assert check_command_reply({"ok": 1.0, "writeConcernError": {"code": 64}}) is None


def test_operation_failure_carries_everything() -> None:
    reply = {"ok": 0, "errmsg": "boom", "code": 2, "codeName": "BadValue", "errorLabels": ["X"]}
    with pytest.raises(OperationFailure) as info:
        check_command_reply(reply, max_wire_version=21)
    error = info.value
    assert type(error) is OperationFailure
    assert error.code == 2 and error.code_name == "BadValue"
    assert error.details == reply and error.has_error_label("X")
    assert error._max_wire_version == 21
    assert "boom" in str(error)


@pytest.mark.parametrize("code, cls", [
    (11000, DuplicateKeyError), (50, ExecutionTimeout), (43, CursorNotFound),
    (10107, NotPrimaryError), (13435, NotPrimaryError), (11600, NotPrimaryError), (91, NotPrimaryError),
])
def test_code_specific_classes(code: int, cls: type) -> None:
    with pytest.raises(cls):
        check_command_reply({"ok": 0, "errmsg": "e", "code": code})


def test_legacy_not_master_message() -> None:
    with pytest.raises(NotPrimaryError):
        check_command_reply({"ok": 0, "errmsg": "not master"})


def test_allowable_errors() -> None:
    assert check_command_reply({"ok": 0, "errmsg": "ns not found", "code": 26}, allowable_errors=[26]) is None
    assert check_command_reply({"ok": 0, "errmsg": "ns not found"}, allowable_errors=["ns not found"]) is None
    with pytest.raises(OperationFailure):  # another code is still raised
        check_command_reply({"ok": 0, "errmsg": "ns not found", "code": 27}, allowable_errors=[26])


def test_write_concern_error_when_asked() -> None:
    reply = {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"}}
    with pytest.raises(WriteConcernError) as info:
        check_command_reply(reply, parse_write_concern_error=True)
    assert info.value.code == 64


def test_missing_ok_is_a_failure() -> None:
    with pytest.raises(OperationFailure):
        check_command_reply({"errmsg": "strange"})
