"""Unit tests of the unified runner's CSOT wiring (spec/unified/operations.py): where an operation's
timeoutMS block starts and ends, and how timeoutMode and cursorType reach the driver; and of the
reruns of the timing-based suites (spec/unified/fixtures.py).

No server: a recording driver stands in for the database and collection.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from spec.unified import fixtures, known_failures
from spec.unified.entities import CursorEntity
from spec.unified.operations import prepare
from spec.unified.outcomes import MatchError, NotSupported, TestFileError

pytestmark = pytest.mark.one_pass  # no gevent I/O


class Block:
    """A driver's timeout(seconds) block that logs when it is entered and left."""

    def __init__(self, log: list, seconds: Optional[float]) -> None:
        self.log, self.seconds = log, seconds

    def __enter__(self) -> None:
        self.log.append(("enter", self.seconds))

    def __exit__(self, *exc: Any) -> None:
        self.log.append(("exit", self.seconds))


class Cursor:
    def __init__(self, log: list, documents: list, timeout: Optional[float] = None) -> None:
        self.log, self.documents, self._timeout = log, list(documents), timeout
        self.alive = True

    def __iter__(self):
        return self

    def __next__(self) -> Any:
        if not self.documents:
            raise StopIteration
        self.log.append("next")
        return self.documents.pop(0)

    def batch_size(self, size: int) -> "Cursor":
        return self


class Database:
    def __init__(self, log: list) -> None:
        self.log = log
        self.calls: list = []

    def aggregate(self, pipeline: list, **kwargs: Any) -> Cursor:
        self.log.append("aggregate")
        self.calls.append(("aggregate", pipeline, kwargs))
        return Cursor(self.log, [{"_id": 1}, {"_id": 2}])

    def cursor_command(self, command: dict, **kwargs: Any) -> Cursor:
        self.log.append("cursor_command")
        self.calls.append(("cursor_command", command, kwargs))
        return Cursor(self.log, [{"_id": 1}], timeout=0.1)

    def command(self, command: dict, **kwargs: Any) -> dict:
        self.log.append("command")
        return {"ok": 1}


def make_run(log: list, *, keep: bool = True, timeout: bool = True) -> Any:
    adapter = SimpleNamespace(
        name="fake", unsupported_arguments={}, unsupported_operations={},
        timeout=(lambda seconds: Block(log, seconds)) if timeout else None,
        cursors_keep_timeout=keep,
        cursor_timeout=lambda cursor: cursor._timeout,
        CursorType=SimpleNamespace(NON_TAILABLE=0, TAILABLE=2, TAILABLE_AWAIT=34),
        TimeoutMode=SimpleNamespace(CURSOR_LIFETIME="LIFETIME", ITERATION="ITERATION"),
    )
    return SimpleNamespace(adapter=adapter)


def test_an_operation_runs_inside_a_block_of_its_timeoutMS() -> None:
    log: list = []
    prepare(make_run(log), "database", Database(log), "runCommand",
            {"command": {"ping": 1}, "commandName": "ping", "timeoutMS": 250}).invoke()
    assert log == [("enter", 0.25), "command", ("exit", 0.25)]


def test_without_timeoutMS_there_is_no_block() -> None:
    log: list = []
    prepare(make_run(log), "database", Database(log), "runCommand",
            {"command": {"ping": 1}, "commandName": "ping"}).invoke()
    assert log == ["command"]


def test_a_cursor_that_keeps_its_timeout_is_iterated_after_the_block() -> None:
    log: list = []
    result = prepare(make_run(log), "database", Database(log), "aggregate",
                     {"pipeline": [], "timeoutMS": 200, "timeoutMode": "iteration"}).invoke()
    assert result == [{"_id": 1}, {"_id": 2}]
    assert log == [("enter", 0.2), "aggregate", ("exit", 0.2), "next", "next"]


def test_a_cursor_reading_the_enclosing_block_is_iterated_inside_it() -> None:
    log: list = []
    prepare(make_run(log, keep=False), "database", Database(log), "aggregate",
            {"pipeline": [], "timeoutMS": 200}).invoke()
    assert log == [("enter", 0.2), "aggregate", "next", "next", ("exit", 0.2)]


def test_timeout_mode_reaches_the_driver_as_its_value() -> None:
    log: list = []
    database = Database(log)
    prepare(make_run(log), "database", database, "aggregate",
            {"pipeline": [], "timeoutMode": "cursorLifetime"}).invoke()
    assert database.calls == [("aggregate", [], {"timeout_mode": "LIFETIME"})]
    with pytest.raises(TestFileError, match="unknown timeoutMode"):
        prepare(make_run(log), "database", database, "aggregate", {"pipeline": [], "timeoutMode": "forever"})


@pytest.mark.parametrize("cursor_type, added", [
    ("tailable", {"tailable": True}),
    ("tailableAwait", {"tailable": True, "awaitData": True}),
    ("nonTailable", {}),
])
def test_run_cursor_command_puts_the_cursor_type_in_the_command(cursor_type: str, added: dict) -> None:
    log: list = []
    database = Database(log)
    prepare(make_run(log), "database", database, "runCursorCommand",
            {"command": {"find": "c", "batchSize": 2}, "commandName": "find", "cursorType": cursor_type}).invoke()
    ((_, command, kwargs),) = database.calls
    assert command == {"find": "c", "batchSize": 2, **added}
    assert list(command)[0] == "find" and "cursor_type" not in kwargs


def test_a_tailable_command_cursor_iterates_until_a_document_under_its_timeout() -> None:
    log: list = []
    entity = prepare(make_run(log), "database", Database(log), "createCommandCursor",
                     {"command": {"find": "c"}, "commandName": "find", "cursorType": "tailable"}).invoke()
    assert isinstance(entity, CursorEntity)
    log.clear()
    assert entity.iterate_until_document() == {"_id": 1}
    assert log == [("enter", 0.1), "next", ("exit", 0.1)]


def test_a_non_tailable_command_cursor_iterates_without_a_block() -> None:
    log: list = []
    entity = prepare(make_run(log), "database", Database(log), "createCommandCursor",
                     {"command": {"find": "c"}, "commandName": "find"}).invoke()
    log.clear()
    entity.iterate_until_document()
    assert log == ["next"]


def test_timeoutMS_without_a_timeout_block_in_the_driver_is_not_supported() -> None:
    log: list = []
    with pytest.raises(NotSupported, match="no timeout"):
        prepare(make_run(log, timeout=False), "database", Database(log), "runCommand",
                {"command": {"ping": 1}, "commandName": "ping", "timeoutMS": 10})


def test_cursor_iteration_takes_no_timeoutMS() -> None:
    log: list = []
    entity = CursorEntity(Cursor(log, []), "findCursor", prime=False)
    with pytest.raises(TestFileError, match="timeoutMS"):
        prepare(make_run(log), "findCursor", entity, "iterateOnce", {"timeoutMS": 10})


def test_timing_dependent_test_file_entries_run_only_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    assert known_failures.TIMING_DEPENDENT <= set(known_failures.KNOWN_FAILURES)
    case = sorted(known_failures.TIMING_DEPENDENT)[0]
    assert known_failures.KNOWN_FAILURES[case][0] == known_failures.TEST_FILE
    monkeypatch.delenv("GREENMONGO_UNIFIED_RUN_ALL", raising=False)
    assert not known_failures.runs_known_failure(case)
    monkeypatch.setenv("GREENMONGO_UNIFIED_RUN_ALL", "1")
    assert known_failures.runs_known_failure(case)
    monkeypatch.setenv("GREENMONGO_UNIFIED_DRIVER", "pymongo")
    assert known_failures.known_failure(case).startswith("test file: ")  # whichever driver runs it


class Servers:
    def context_for(self, suite: str, deployment: str) -> str:
        return f"context of {suite} ({deployment})"


def scripted_run_test(monkeypatch: pytest.MonkeyPatch, outcomes: list) -> list:
    """Replace run_test with one that raises (or not) as ``outcomes`` says, attempt by attempt."""
    calls: list = []

    def run_test(context: Any, path: Any, index: int) -> None:
        calls.append(index)
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(fixtures, "run_test", run_test)
    monkeypatch.setattr(fixtures, "test_descriptions", lambda path: ["the case"])
    monkeypatch.setattr(fixtures, "RERUNS", [])
    return calls


TIMED = "client-side-operations-timeout/tests"


def test_a_timing_case_that_passes_on_a_rerun_passes_and_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted_run_test(monkeypatch, [MatchError("late"), MatchError("later"), None])
    fixtures.run_case(Servers(), fixtures.UnifiedCase(TIMED, Path("x.json"), 0))
    assert len(calls) == 3
    assert fixtures.RERUNS == [(f"{TIMED}/x.json::the case (attempt 3)", "MatchError: late")]


def test_a_timing_case_that_always_fails_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted_run_test(monkeypatch, [MatchError("a"), MatchError("b"), MatchError("c")])
    with pytest.raises(MatchError, match="c"):
        fixtures.run_case(Servers(), fixtures.UnifiedCase(TIMED, Path("x.json"), 0))
    assert len(calls) == 3 and fixtures.RERUNS == []


@pytest.mark.parametrize("suite, error", [(TIMED, TestFileError("bad file")), ("crud/tests/unified", MatchError("no"))])
def test_no_rerun_for_a_bad_test_file_or_outside_the_timing_suites(monkeypatch: pytest.MonkeyPatch, suite: str,
                                                                     error: Exception) -> None:
    calls = scripted_run_test(monkeypatch, [error, None])
    with pytest.raises(type(error)):
        fixtures.run_case(Servers(), fixtures.UnifiedCase(suite, Path("x.json"), 0))
    assert len(calls) == 1


def test_a_cursor_of_a_driver_reading_the_enclosing_block_iterates_under_the_creating_timeout() -> None:
    log: list = []
    entity = prepare(make_run(log, keep=False), "database", Database(log), "createCommandCursor",
                     {"command": {"find": "c"}, "commandName": "find", "timeoutMS": 300}).invoke()
    log.clear()
    assert entity.iterate_once() == {"_id": 1}
    assert log == [("enter", 0.3), "next", ("exit", 0.3)]
