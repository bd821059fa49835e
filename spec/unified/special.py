"""The testRunner's special operations: fail points, assertions, threads, loops, waiting.

Each takes the test run and the operation's arguments; arguments are checked
against the spec's list first (a missing or unknown one is a TestFileError, as
valid-fail/assertNumberConnectionsCheckedOut requires).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Callable

import gevent

from spec.unified.events import count_matching
from spec.unified.outcomes import MatchError, TestFileError
from tests.waits import wait_until

WAIT_TIMEOUT = 10.0
_TRANSACTION_STATES = frozenset({"none", "starting", "in_progress", "committed", "aborted"})

_loop_termination_requested = False


def request_loop_termination() -> None:
    """Stop ``loop`` operations after their current iteration (the workload executor's signal)."""
    global _loop_termination_requested
    _loop_termination_requested = True


def _arguments(name: str, arguments: Any, required: str, optional: str = "") -> dict:
    arguments = dict(arguments or {})
    required_set, allowed = set(required.split()), set(required.split()) | set(optional.split())
    missing = required_set - set(arguments)
    if missing:
        raise TestFileError(f"{name}: missing required arguments {sorted(missing)}")
    unknown = set(arguments) - allowed
    if unknown:
        raise TestFileError(f"{name}: unsupported arguments {sorted(unknown)}")
    return arguments


# -- fail points -----------------------------------------------------------------------------

def fail_point(run: Any, arguments: Any) -> None:
    args = _arguments("failPoint", arguments, "client failPoint")
    client = run.entities.get(args["client"], "client")
    command = args["failPoint"]
    client.get_database("admin").command(command, read_preference=run.context.read_preference({"mode": "primary"}))
    run.fail_points.append((client, None, command["configureFailPoint"]))
    data = command.get("data") or {}
    if data.get("blockConnection"):
        run.blocked_commands.update(name for name in data.get("failCommands", ()) if name not in _MONITORING)


def targeted_fail_point(run: Any, arguments: Any) -> None:
    args = _arguments("targetedFailPoint", arguments, "session failPoint")
    session = run.entities.get(args["session"], "session")
    address = run.adapter.session_pinned_address(session)
    if address is None:
        raise TestFileError(f"targetedFailPoint: session {args['session']!r} is not pinned to a mongos")
    client = run.adapter.MongoClient(f"{address[0]}:{address[1]}", directConnection=True)
    try:
        client.get_database("admin").command(args["failPoint"])
    finally:
        client.close()
    run.fail_points.append((None, address, args["failPoint"]["configureFailPoint"]))


def disable_fail_points(run: Any) -> None:
    """Turn every fail point of the test off, on the server it was set on."""
    errors = []
    for client, address, name in reversed(run.fail_points):
        command = {"configureFailPoint": name, "mode": "off"}
        try:
            if address is not None:
                direct = run.adapter.MongoClient(f"{address[0]}:{address[1]}", directConnection=True)
                try:
                    direct.get_database("admin").command(command)
                finally:
                    direct.close()
            else:
                try:
                    client.get_database("admin").command(command)
                except Exception:  # the entity client may be closed by now: the internal one reaches the primary
                    run.context.internal_client.get_database("admin").command(command)
        except Exception as exc:
            errors.append(exc)
    run.fail_points.clear()
    if errors:
        raise errors[0]


#: Commands a monitor sends: a blocked one changes no data, and awaitable hellos stay active for long.
_MONITORING = frozenset({"hello", "isMaster", "ismaster"})


def await_blocked_commands(run: Any, timeout: float = WAIT_TIMEOUT) -> None:
    """Wait until no command the test's fail points blocked is still running on the server.

    A client that gives up on a blocked command (a CSOT timeout) closes its connection, but
    SecantusDB still runs the command once the block ends, even past its maxTimeMS (mongod fails it
    with MaxTimeMSExpired instead). Such a late write would land in the next test: a GridFS delete
    timed out by one test deleted the chunks the next test had just inserted. The server's
    ``currentOp`` is the only sign of it, so this polls that, as ``waitForEvent`` polls events.
    """
    names, run.blocked_commands = set(run.blocked_commands), set()
    if not names:
        return
    admin = run.context.internal_client.get_database("admin")

    def settled() -> bool:
        try:
            operations = admin.command("currentOp").get("inprog", [])
        except run.adapter.errors.OperationFailure:
            return True  # the server does not tell: nothing to wait for
        return not any(op.get("active") and next(iter(op.get("command") or {}), None) in names
                       for op in operations)

    _wait_until(settled, timeout, f"the blocked {sorted(names)} commands to finish on the server")


# -- session assertions ------------------------------------------------------------------------

def assert_session_transaction_state(run: Any, arguments: Any) -> None:
    args = _arguments("assertSessionTransactionState", arguments, "session state")
    if args["state"] not in _TRANSACTION_STATES:
        raise TestFileError(f"unknown transaction state {args['state']!r}")
    state = run.adapter.session_transaction_state(run.entities.get(args["session"], "session"))
    if state != args["state"]:
        raise MatchError(f"session {args['session']}: transaction state {state}, expected {args['state']}")


def _pinned(run: Any, arguments: Any, name: str) -> bool:
    args = _arguments(name, arguments, "session")
    return run.adapter.session_pinned_address(run.entities.get(args["session"], "session")) is not None


def assert_session_pinned(run: Any, arguments: Any) -> None:
    if not _pinned(run, arguments, "assertSessionPinned"):
        raise MatchError(f"session {arguments['session']} is not pinned")


def assert_session_unpinned(run: Any, arguments: Any) -> None:
    if _pinned(run, arguments, "assertSessionUnpinned"):
        raise MatchError(f"session {arguments['session']} is pinned")


def _dirty(run: Any, arguments: Any, name: str) -> bool:
    args = _arguments(name, arguments, "session")
    return run.adapter.session_dirty(run.entities.get(args["session"], "session"))


def assert_session_dirty(run: Any, arguments: Any) -> None:
    if not _dirty(run, arguments, "assertSessionDirty"):
        raise MatchError(f"session {arguments['session']} is not dirty")


def assert_session_not_dirty(run: Any, arguments: Any) -> None:
    if _dirty(run, arguments, "assertSessionNotDirty"):
        raise MatchError(f"session {arguments['session']} is dirty")


def _last_two_lsids(run: Any, arguments: Any, name: str) -> tuple[Any, Any]:
    args = _arguments(name, arguments, "client")
    started = run.entities.recorder(args["client"]).command_started()
    if len(started) < 2:
        raise MatchError(f"{name}: fewer than two commandStartedEvents on {args['client']}")
    first, second = started[-2].command, started[-1].command
    if "lsid" not in first or "lsid" not in second:
        raise MatchError(f"{name}: the last two commands do not both carry an lsid")
    return first["lsid"], second["lsid"]


def assert_same_lsid(run: Any, arguments: Any) -> None:
    first, second = _last_two_lsids(run, arguments, "assertSameLsidOnLastTwoCommands")
    if first != second:
        raise MatchError(f"the last two commands used different lsids: {first} != {second}")


def assert_different_lsid(run: Any, arguments: Any) -> None:
    first, second = _last_two_lsids(run, arguments, "assertDifferentLsidOnLastTwoCommands")
    if first == second:
        raise MatchError(f"the last two commands used the same lsid {first}")


# -- collections and indexes (internal client) ----------------------------------------------------

def _collection_exists(run: Any, args: Mapping[str, Any]) -> bool:
    database = run.context.internal_client.get_database(args["databaseName"])
    return args["collectionName"] in database.list_collection_names(filter={"name": args["collectionName"]})


def assert_collection_exists(run: Any, arguments: Any) -> None:
    args = _arguments("assertCollectionExists", arguments, "databaseName collectionName")
    if not _collection_exists(run, args):
        raise MatchError(f"collection {args['databaseName']}.{args['collectionName']} does not exist")


def assert_collection_not_exists(run: Any, arguments: Any) -> None:
    args = _arguments("assertCollectionNotExists", arguments, "databaseName collectionName")
    if _collection_exists(run, args):
        raise MatchError(f"collection {args['databaseName']}.{args['collectionName']} exists")


def _index_names(run: Any, args: Mapping[str, Any]) -> list[str]:
    collection = run.context.internal_client.get_database(args["databaseName"]).get_collection(
        args["collectionName"])
    try:
        return [index["name"] for index in collection.list_indexes()]
    except run.adapter.errors.OperationFailure as exc:
        if exc.code == 26:  # NamespaceNotFound: no collection, so no index
            return []
        raise


def assert_index_exists(run: Any, arguments: Any) -> None:
    args = _arguments("assertIndexExists", arguments, "databaseName collectionName indexName")
    if args["indexName"] not in _index_names(run, args):
        raise MatchError(f"index {args['indexName']} does not exist on {args['collectionName']}")


def assert_index_not_exists(run: Any, arguments: Any) -> None:
    args = _arguments("assertIndexNotExists", arguments, "databaseName collectionName indexName")
    if args["indexName"] in _index_names(run, args):
        raise MatchError(f"index {args['indexName']} exists on {args['collectionName']}")


# -- entities, threads, loops -------------------------------------------------------------------------

def create_entities(run: Any, arguments: Any) -> None:
    args = _arguments("createEntities", arguments, "entities")
    run.entities.create_all(args["entities"])


def assert_number_connections_checked_out(run: Any, arguments: Any) -> None:
    args = _arguments("assertNumberConnectionsCheckedOut", arguments, "client connections")
    checked_out = run.entities.recorder(args["client"]).checked_out
    if checked_out != args["connections"]:
        raise MatchError(f"client {args['client']}: {checked_out} connections checked out, "
                         f"expected {args['connections']}")


def run_on_thread(run: Any, arguments: Any) -> None:
    args = _arguments("runOnThread", arguments, "thread operation")
    run.entities.get(args["thread"], "thread").schedule(args["operation"])


def wait_for_thread(run: Any, arguments: Any) -> None:
    args = _arguments("waitForThread", arguments, "thread")
    run.entities.get(args["thread"], "thread").wait(WAIT_TIMEOUT)


def loop(run: Any, arguments: Any) -> None:
    args = _arguments("loop", arguments, "operations",
                      "storeErrorsAsEntity storeFailuresAsEntity storeSuccessesAsEntity storeIterationsAsEntity")
    errors_name, failures_name = args.get("storeErrorsAsEntity"), args.get("storeFailuresAsEntity")
    lists = {}
    for name in {errors_name, failures_name} - {None}:
        if name in run.entities:
            if run.entities.kind(name) != "errorList":
                raise TestFileError(f"loop: entity {name!r} exists and is not an array")
            lists[name] = run.entities.get(name)
        else:
            lists[name] = []
            run.entities.add(name, "errorList", lists[name])
    for name in (args.get("storeSuccessesAsEntity"), args.get("storeIterationsAsEntity")):
        if name is not None and name in run.entities:
            raise TestFileError(f"loop: entity {name!r} already exists")
    successes = iterations = 0
    while not _loop_termination_requested:
        iterations += 1
        for operation in args["operations"]:
            try:
                run.execute(operation)
            except Exception as exc:
                is_failure = isinstance(exc, AssertionError)
                target = (failures_name or errors_name) if is_failure else (errors_name or failures_name)
                if target is None:
                    raise
                lists[target].append({"error": str(exc), "time": time.time()})
                break
            successes += 1
    if args.get("storeSuccessesAsEntity"):
        run.entities.add(args["storeSuccessesAsEntity"], "bson", successes)
    if args.get("storeIterationsAsEntity"):
        run.entities.add(args["storeIterationsAsEntity"], "bson", iterations)


# -- events and topology --------------------------------------------------------------------------------

def _wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    wait_until(predicate, timeout, lambda: f"timed out after {timeout}s waiting for {what}", error=MatchError)


def wait_for_event(run: Any, arguments: Any) -> None:
    args = _arguments("waitForEvent", arguments, "client event count")
    recorder = run.entities.recorder(args["client"])
    _wait_until(lambda: count_matching(run.matcher, args["event"], recorder) >= args["count"], WAIT_TIMEOUT,
                f"{args['count']} x {args['event']} on {args['client']}")


def assert_event_count(run: Any, arguments: Any) -> None:
    args = _arguments("assertEventCount", arguments, "client event count")
    count = count_matching(run.matcher, args["event"], run.entities.recorder(args["client"]))
    if count != args["count"]:
        raise MatchError(f"{args['event']} seen {count} times on {args['client']}, expected {args['count']}")


def record_topology_description(run: Any, arguments: Any) -> None:
    args = _arguments("recordTopologyDescription", arguments, "client id")
    client = run.entities.get(args["client"], "client")
    run.entities.add(args["id"], "topologyDescription", client.topology_description)


def assert_topology_type(run: Any, arguments: Any) -> None:
    args = _arguments("assertTopologyType", arguments, "topologyDescription topologyType")
    description = run.entities.get(args["topologyDescription"], "topologyDescription")
    if description.topology_type_name != args["topologyType"]:
        raise MatchError(f"topology type {description.topology_type_name}, expected {args['topologyType']}")


def _primary(description: Any) -> Any:
    for address, server in description.server_descriptions().items():
        if server.server_type_name == "RSPrimary":
            return address
    return None


def wait_for_primary_change(run: Any, arguments: Any) -> None:
    args = _arguments("waitForPrimaryChange", arguments, "client priorTopologyDescription", "timeoutMS")
    client = run.entities.get(args["client"], "client")
    prior = _primary(run.entities.get(args["priorTopologyDescription"], "topologyDescription"))

    def changed() -> bool:
        current = _primary(client.topology_description)
        return current is not None and current != prior

    _wait_until(changed, args.get("timeoutMS", WAIT_TIMEOUT * 1000) / 1000.0, "a new primary")


def wait(run: Any, arguments: Any) -> None:
    args = _arguments("wait", arguments, "ms")
    gevent.sleep(args["ms"] / 1000.0)


SPECIAL_OPERATIONS: dict[str, Callable[[Any, Any], None]] = {
    "failPoint": fail_point,
    "targetedFailPoint": targeted_fail_point,
    "assertSessionTransactionState": assert_session_transaction_state,
    "assertSessionPinned": assert_session_pinned,
    "assertSessionUnpinned": assert_session_unpinned,
    "assertDifferentLsidOnLastTwoCommands": assert_different_lsid,
    "assertSameLsidOnLastTwoCommands": assert_same_lsid,
    "assertSessionDirty": assert_session_dirty,
    "assertSessionNotDirty": assert_session_not_dirty,
    "assertCollectionExists": assert_collection_exists,
    "assertCollectionNotExists": assert_collection_not_exists,
    "assertIndexExists": assert_index_exists,
    "assertIndexNotExists": assert_index_not_exists,
    "createEntities": create_entities,
    "loop": loop,
    "assertNumberConnectionsCheckedOut": assert_number_connections_checked_out,
    "runOnThread": run_on_thread,
    "waitForThread": wait_for_thread,
    "waitForEvent": wait_for_event,
    "assertEventCount": assert_event_count,
    "recordTopologyDescription": record_topology_description,
    "assertTopologyType": assert_topology_type,
    "waitForPrimaryChange": wait_for_primary_change,
    "wait": wait,
}


def run_special(run: Any, name: str, arguments: Any) -> None:
    handler = SPECIAL_OPERATIONS.get(name)
    if handler is None:
        raise TestFileError(f"unknown testRunner operation {name!r}")
    handler(run, arguments)
