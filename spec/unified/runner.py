"""Running one unified test: requirements, initial data, entities, operations, assertions, clean-up.

``run_test(context, path, index)`` follows the spec's "Executing a Test": it
checks the file's schema version and requirements (raising
``RequirementsNotMet``, a NotSupported, to skip with the unmet requirement
named), seeds initialData with the internal client, creates the entities,
executes each operation, then disables fail points and asserts expectEvents,
expectLogMessages, expectTracingMessages and outcome. Sessions, cursors, threads and clients are
always cleaned up, fail points always turned off, and commands they blocked
awaited on the server; killAllSessions runs after a failed test and around
tests that use transactions.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from spec.unified import operations, special
from spec.unified.context import UnifiedContext
from spec.unified.entities import CursorEntity, EntityMap
from spec.unified.events import assert_events, assert_log_messages
from spec.unified.expected_errors import assert_error
from spec.unified.matching import MISSING, Matcher, documents_equal, operator_of
from spec.unified.encryption import check_auto_encryption
from spec.unified.outcomes import MatchError, NotSupported, TestFileError
from spec.unified.requirements import skip_reason
from spec.unified.schema import SUPPORTED_SCHEMA_VERSION, is_supported, schema_errors
from spec.unified.tracing import assert_tracing_messages

_OPERATION_KEYS = frozenset({"name", "object", "arguments", "expectError", "expectResult", "saveResultAsEntity",
                             "ignoreResultAndError"})
_TRANSACTION_OPERATIONS = frozenset({"startTransaction", "withTransaction"})
_FAIL_POINT_OPERATIONS = frozenset({"failPoint", "targetedFailPoint"})


class RequirementsNotMet(NotSupported):
    """runOnRequirements (or skipReason) exclude this test on this server."""


@functools.lru_cache(maxsize=None)
def _plain(path: str) -> Any:
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode("utf-8"))


@functools.lru_cache(maxsize=None)
def _schema_problems(path: str) -> tuple[str, ...]:
    return tuple(schema_errors(_plain(path)))


_EXTENDED: dict[tuple[str, str], Any] = {}


def _extended(path: str, context: UnifiedContext) -> Any:
    key = (path, context.adapter.name)
    if key not in _EXTENDED:
        with open(path, "rb") as fh:
            _EXTENDED[key] = context.adapter.json_loads(fh.read().decode("utf-8"))
    return _EXTENDED[key]


def test_descriptions(path: Path) -> list[str]:
    """The descriptions of a file's tests, in order (for parametrization)."""
    data = _plain(str(path))
    tests = data.get("tests") if isinstance(data, dict) else None
    return [test.get("description", f"#{index}") for index, test in enumerate(tests or [])]


def run_test(context: UnifiedContext, path: Path, index: int) -> None:
    """Run the ``index``-th test of a unified test file; raises on failure, NotSupported to skip."""
    path_text = str(path)
    problems = _schema_problems(path_text)
    if problems:
        raise TestFileError(f"{path.name} does not validate against its schema: {'; '.join(problems[:3])}")
    plain = _plain(path_text)
    if not is_supported(plain.get("schemaVersion")):
        supported = ".".join(str(part) for part in SUPPORTED_SCHEMA_VERSION)
        raise TestFileError(f"schemaVersion {plain.get('schemaVersion')!r} is not supported (runner: {supported})")
    data = copy.deepcopy(_extended(path_text, context))
    TestRun(context, data, data["tests"][index]).run()


class TestRun:
    """The state of one test: its entity map, matcher and fail points."""

    __test__ = False  # not a pytest test class

    def __init__(self, context: UnifiedContext, file_data: Mapping[str, Any], test: Mapping[str, Any]) -> None:
        self.context = context
        self.adapter = context.adapter
        self.file_data = file_data
        self.test = test
        self.entities = EntityMap(context)
        self.entities.run_operation = self.execute
        self.matcher = Matcher(self.adapter.bson, self.entities, self.adapter.json_loads)
        self.fail_points: list = []
        self.blocked_commands: set = set()
        """Commands the test's fail points block (blockConnection): awaited on the server at clean-up."""
        self.expected_errors: list[str] = []
        """The errors operations raised as expected, named in an expectEvents mismatch (a timing failure
        is told apart by them: which step timed out, and how)."""
        self.started_transaction = _uses(test.get("operations", []), _TRANSACTION_OPERATIONS)
        self.entities.fast_heartbeat = _uses(test.get("operations", []), _FAIL_POINT_OPERATIONS)

    # -- the test --------------------------------------------------------------------

    def run(self) -> None:
        self._check_requirements()
        if self.started_transaction:
            self.context.kill_all_sessions()
        passed = False
        try:
            self._seed(self.file_data.get("initialData", []))
            self.entities.create_all(self.file_data.get("createEntities", []))
            for operation in self.test["operations"]:
                self.execute(operation)
            self.entities.stop_capture()
            special.disable_fail_points(self)
            self._assert_events()
            self._assert_outcome()
            passed = True
        except Exception as exc:
            add_note = getattr(exc, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(self._observed_commands())
            raise
        finally:
            self._clean_up(passed)

    def _observed_commands(self) -> str:
        """What each client was seen sending, for a failure's report: a rare failure under load is then
        explained by its own run (a retried statement, an error reply) instead of needing a rerun."""
        lines = ["commands the clients observed:"]
        for client_id, recorder in self.entities.recorders.items():
            for name, event in recorder.observed:
                if not name.startswith("command"):
                    continue
                command = getattr(event, "command", None) or {}
                detail = {key: command[key] for key in ("txnNumber", "startTransaction") if key in command}
                failure = getattr(event, "failure", None)
                lines.append(f"  {client_id} {name} {event.command_name} {detail or ''}"
                             f"{' ' + str(failure)[:200] if failure else ''}".rstrip())
        return "\n".join(lines) if len(lines) > 1 else "no command events were observed"

    def _check_requirements(self) -> None:
        if self.test.get("skipReason"):
            raise RequirementsNotMet(f"skipReason: {self.test['skipReason']}")
        server, csfle = self.context.server, self.adapter.csfle_available
        reason = (skip_reason(self.file_data.get("runOnRequirements"), server, csfle, "file")
                  or skip_reason(self.test.get("runOnRequirements"), server, csfle, "test"))
        if reason:
            raise RequirementsNotMet(reason)
        # Before the initial data: the JSON schemas and encryptedFields it sets up are for that encryption.
        check_auto_encryption(self.file_data.get("createEntities", []))

    def _clean_up(self, passed: bool) -> None:
        first_error: Optional[BaseException] = None
        for step in (lambda: special.disable_fail_points(self), self.entities.close,
                     lambda: special.await_blocked_commands(self)):
            try:
                step()
            except Exception as exc:
                first_error = first_error or exc
        if not passed or self.started_transaction:
            try:
                self.context.kill_all_sessions()
            except Exception as exc:
                first_error = first_error or exc
        if passed and first_error is not None:
            raise first_error

    # -- data ---------------------------------------------------------------------------

    def _seed(self, collections: list) -> None:
        client = self.context.internal_client
        majority = self.context.write_concern({"w": "majority"})
        for data in collections:
            database = client.get_database(data["databaseName"], write_concern=majority)
            name = data["collectionName"]
            database.drop_collection(name)
            create_options = data.get("createOptions")
            if create_options is not None:
                operations.create_collection(database, name, **create_options)
            if data["documents"]:
                database.get_collection(name).insert_many(data["documents"])
            elif create_options is None:
                operations.create_collection(database, name)

    def _assert_outcome(self) -> None:
        client = self.context.internal_client
        options = {"read_preference": self.context.read_preference({"mode": "primary"}),
                   "read_concern": self.context.read_concern({"level": "local"})}
        for data in self.test.get("outcome", []):
            collection = client.get_database(data["databaseName"]).get_collection(data["collectionName"],
                                                                                    **options)
            actual = list(collection.find({}, sort=[("_id", 1)]))
            expected = data["documents"]
            where = f"outcome {data['databaseName']}.{data['collectionName']}"
            if len(actual) != len(expected):
                raise MatchError(f"{where}: expected {len(expected)} documents, got {len(actual)}: {actual}")
            for index, (want, got) in enumerate(zip(expected, actual)):
                if not documents_equal(want, got):
                    raise MatchError(f"{where}[{index}]: expected {want}, got {got}")

    def _assert_events(self) -> None:
        for expected in self.test.get("expectEvents", []):
            try:
                assert_events(self.matcher, expected, self.entities.recorder(expected["client"]))
            except MatchError as exc:
                if not self.expected_errors:
                    raise
                raise MatchError(f"{exc} (expected errors the operations raised: "
                                 f"{'; '.join(self.expected_errors)})") from exc
        for expected in self.test.get("expectLogMessages", []):
            self.entities.get(expected["client"], "client")
            collector = self.entities.log_collectors.get(expected["client"])
            if collector is None:
                raise TestFileError(f"client {expected['client']!r} does not observe log messages")
            assert_log_messages(self.matcher, expected, collector.messages)
        tracing = self.test.get("expectTracingMessages", [])
        for expected in [tracing] if isinstance(tracing, Mapping) else tracing:
            self.entities.get(expected["client"], "client")
            spans = self.entities.span_collectors.get(expected["client"])
            if spans is None:
                raise TestFileError(f"client {expected['client']!r} does not observe tracing messages")
            assert_tracing_messages(self.matcher, self.adapter, expected, spans)

    # -- operations ----------------------------------------------------------------------

    def execute(self, operation: Mapping[str, Any], in_callback: bool = False) -> None:
        """One operation with its expectations (spec: Executing an Operation)."""
        unknown = set(operation) - _OPERATION_KEYS
        if unknown:
            raise TestFileError(f"operation {operation.get('name')!r}: unknown keys {sorted(unknown)}")
        name, target_name = operation["name"], operation["object"]
        if target_name == "testRunner":
            special.run_special(self, name, operation.get("arguments"))
            return
        kind = self.entities.kind(target_name)
        prepared = operations.prepare(self, kind, self.entities.get(target_name), name, operation.get("arguments"))
        try:
            result = prepared.invoke()
        except (TestFileError, NotSupported, MatchError):
            raise
        except Exception as exc:
            if operation.get("ignoreResultAndError"):
                return
            if "expectError" not in operation:
                raise
            assert_error(self.matcher, self.adapter.errors, operation["expectError"], exc)
            self.expected_errors.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
            if in_callback:
                raise  # withTransaction must see its callback's errors
            return
        if operation.get("ignoreResultAndError"):
            return
        if "expectError" in operation:
            raise MatchError(f"{name} on {target_name}: expected an error, got {result!r}")
        if not isinstance(result, CursorEntity):
            result = operations.result_document(result)
        if "expectResult" in operation:
            self._match_result(operation["expectResult"], result, prepared.result_kind)
        if "saveResultAsEntity" in operation:
            self._save(operation["saveResultAsEntity"], result, prepared.entity_kind)

    def _match_result(self, expected: Any, actual: Any, result_kind: str) -> None:
        if actual is None and operator_of(expected) == "$$unsetOrMatches":
            return  # a method that returns nothing (None) leaves the result unset
        if result_kind == "documents" and isinstance(expected, list):
            self.matcher.match_documents(expected, actual, path="expectResult")
        else:
            self.matcher.match(expected, actual, root=True, path="expectResult")

    def _save(self, name: str, value: Any, kind: str) -> None:
        if value is MISSING:
            raise TestFileError(f"saveResultAsEntity {name!r}: the operation returned no result")
        if kind == "bson" and not _is_bson_value(value):
            raise TestFileError(f"saveResultAsEntity {name!r}: {type(value).__name__} is not a BSON value")
        self.entities.add(name, kind, value)


def _uses(operations_list: list, names: frozenset) -> bool:
    """Whether any operation (or one nested in loop, runOnThread, withTransaction) is one of ``names``."""
    for operation in operations_list:
        if operation.get("name") in names:
            return True
        arguments = operation.get("arguments") or {}
        nested = list(arguments.get("operations") or ()) + list(arguments.get("callback") or ())
        if isinstance(arguments.get("operation"), Mapping):
            nested.append(arguments["operation"])
        if _uses(nested, names):
            return True
    return False


def _is_bson_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, bytes, Mapping, list, tuple)):
        return True
    module = type(value).__module__
    return module.split(".")[0] in ("bson", "datetime", "uuid", "re") or module.startswith("greenmongo.bson")
