"""OpenTelemetry tracing: the spec's prose tests, the option and environment rules, and where spans nest.

The unified cases (open-telemetry/tests, spec/test_unified_suites.py) hold the span names and attributes;
these tests hold what they cannot express: the environment variables (prose tests 1 and 2), the getMore's
cursor id (prose test 4 of the spec's draft tests), greenmongo without OpenTelemetry installed, the option's
validation, and parents across greenlets. Spans go to the SDK's in-memory exporter (``tests/otel_support.py``).
"""

from __future__ import annotations

import contextvars
import os
import subprocess
import sys

import gevent
import pytest

from greenmongo import MongoClient
from greenmongo.errors import ConfigurationError, OperationFailure
from greenmongo.logs.tracing import ENABLED_ENV, QUERY_TEXT_MAX_LENGTH_ENV, make_tracer
from tests.otel_support import memory_exporter, sdk_available

pytestmark = pytest.mark.skipif(not sdk_available(), reason="opentelemetry-sdk is not installed (the test extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def exporter(monkeypatch):
    monkeypatch.delenv(ENABLED_ENV, raising=False)
    monkeypatch.delenv(QUERY_TEXT_MAX_LENGTH_ENV, raising=False)
    exporter = memory_exporter()
    exporter.clear()
    yield exporter
    exporter.clear()


@pytest.fixture
def clients():
    made: list = []
    yield made
    for client in made:
        client.close()


def _spans(exporter, name=None):
    return [span for span in exporter.get_finished_spans() if name is None or span.name == name]


def _find_once(client, clients, exporter):
    clients.append(client)
    exporter.clear()
    list(client.otel_db.coll.find({"x": 1}))
    return _spans(exporter)


# -- the spec's prose tests -----------------------------------------------------------------------

@pytest.mark.server
def test_prose_1_enable_and_disable_by_environment(server_uri, exporter, clients, monkeypatch):
    monkeypatch.setenv(ENABLED_ENV, "false")
    assert _find_once(MongoClient(server_uri), clients, exporter) == []
    monkeypatch.setenv(ENABLED_ENV, "true")
    names = [span.name for span in _find_once(MongoClient(server_uri), clients, exporter)]
    assert names == ["find", "find otel_db.coll"]  # the command's span ends first


@pytest.mark.server
def test_prose_2_query_text_by_environment(server_uri, exporter, clients, monkeypatch):
    monkeypatch.setenv(ENABLED_ENV, "true")
    monkeypatch.setenv(QUERY_TEXT_MAX_LENGTH_ENV, "1024")
    (command,) = [span for span in _find_once(MongoClient(server_uri), clients, exporter) if span.name == "find"]
    assert command.attributes["db.query.text"] == '{"find": "coll", "filter": {"x": 1}}'
    monkeypatch.delenv(QUERY_TEXT_MAX_LENGTH_ENV)
    (command,) = [span for span in _find_once(MongoClient(server_uri), clients, exporter) if span.name == "find"]
    assert "db.query.text" not in command.attributes


@pytest.mark.server
def test_get_more_records_the_cursor_id_it_sent(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    coll = client.otel_db.get_more
    coll.drop()
    coll.insert_many([{"_id": i} for i in range(3)])
    exporter.clear()
    cursor = coll.find(batch_size=2)
    next(cursor), next(cursor)
    cursor_id = cursor.cursor_id
    assert cursor_id
    assert [doc["_id"] for doc in cursor] == [2]
    (operation,) = _spans(exporter, "getMore otel_db.get_more")
    (command,) = _spans(exporter, "getMore")
    assert operation.attributes["db.mongodb.cursor_id"] == cursor_id
    assert command.attributes["db.mongodb.cursor_id"] == cursor_id
    assert command.parent.span_id == operation.context.span_id
    (find,) = _spans(exporter, "find")
    assert find.attributes["db.mongodb.cursor_id"] == cursor_id  # the cursor the find created


@pytest.mark.server
def test_killcursors_records_the_cursor_it_kills(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    coll = client.otel_db.kill
    coll.drop()
    coll.insert_many([{"_id": i} for i in range(3)])
    exporter.clear()
    cursor = coll.find(batch_size=2)
    next(cursor)
    cursor_id = cursor.cursor_id
    cursor.close()
    (operation,) = _spans(exporter, "killCursors otel_db.kill")
    (command,) = _spans(exporter, "killCursors")
    assert command.attributes["db.mongodb.cursor_id"] == cursor_id
    assert command.attributes["db.collection.name"] == "kill"
    assert command.parent.span_id == operation.context.span_id


@pytest.mark.server
def test_admin_commands_name_no_collection(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    exporter.clear()
    client.admin.command("ping")
    (operation,) = _spans(exporter, "runCommand admin")
    (command,) = _spans(exporter, "ping")
    assert command.attributes["db.query.summary"] == "ping admin"
    assert "db.collection.name" not in command.attributes and "db.collection.name" not in operation.attributes
    assert operation.attributes["db.operation.name"] == "runCommand"
    assert operation.attributes["db.namespace"] == command.attributes["db.namespace"] == "admin"


# -- where spans nest ---------------------------------------------------------------------------------

@pytest.mark.server
def test_transaction_span_parents_statements_run_from_another_greenlet(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    coll = client.otel_db.txn
    coll.drop()
    client.otel_db.create_collection("txn")
    with client.start_session() as session:
        exporter.clear()
        session.start_transaction()
        gevent.spawn(coll.insert_one, {"_id": 1}, session=session).get()  # a new greenlet: an empty context
        session.commit_transaction()
    (transaction,) = _spans(exporter, "transaction")
    assert dict(transaction.attributes) == {"db.system.name": "mongodb"}
    insert, commit = _spans(exporter, "insert otel_db.txn"), _spans(exporter, "commitTransaction admin")
    assert insert[0].parent.span_id == transaction.context.span_id
    assert commit[0].parent.span_id == transaction.context.span_id
    assert transaction.end_time >= commit[0].end_time
    (command,) = _spans(exporter, "insert")
    assert command.attributes["db.mongodb.txn_number"] == 1
    assert command.attributes["db.mongodb.lsid"].startswith('{"id": {"$binary"')


@pytest.mark.server
def test_operation_span_is_a_child_of_the_applications_span_in_its_greenlet(server_uri, exporter, clients):
    from opentelemetry import trace

    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        client.otel_db.coll.find_one()
        # A greenlet spawned here starts with an empty context: its operation is a root of its own...
        gevent.spawn(client.otel_db.coll.find_one).get()
        # ...unless it is given the caller's context (the README's advice).
        gevent.spawn(contextvars.copy_context().run, client.otel_db.coll.find_one).get()
    first, second, third = _spans(exporter, "find otel_db.coll")
    assert first.parent.span_id == request.get_span_context().span_id
    assert second.parent is None
    assert third.parent.span_id == request.get_span_context().span_id
    assert trace.get_current_span() is trace.INVALID_SPAN  # the operation's span did not stay current


@pytest.mark.server
def test_errors_are_recorded_on_the_command_and_operation_spans(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    exporter.clear()
    with pytest.raises(OperationFailure):
        client.otel_db.command("noSuchCommand")
    (operation,) = _spans(exporter, "runCommand otel_db")
    (command,) = _spans(exporter, "noSuchCommand")
    assert command.attributes["db.response.status_code"] == "59"
    assert command.attributes["exception.type"] == "greenmongo.errors.OperationFailure"
    assert "exception.stacktrace" in command.attributes and command.events[0].name == "exception"
    assert not command.status.is_ok and not operation.status.is_ok
    assert "exception.message" in operation.attributes


@pytest.mark.server
def test_sensitive_commands_have_no_span(server_uri, exporter, clients):
    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    exporter.clear()
    with pytest.raises(OperationFailure):
        client.admin.command("saslStart", 1, mechanism="PLAIN", payload=b"x")
    assert _spans(exporter, "saslStart") == []
    assert [span.name for span in _spans(exporter)] == ["runCommand admin"]


@pytest.mark.server
def test_off_by_default(server_uri, exporter, clients):
    client = MongoClient(server_uri)
    assert client._core.tracer is None
    assert _find_once(client, clients, exporter) == []


# -- the option, the environment, and no OpenTelemetry installed ---------------------------------------

@pytest.mark.parametrize("tracing, message", [
    ({"enabled": True, "query_text_max": 10}, "unknown key"),
    ({"enabled": "yes"}, "True or False"),
    ({"query_text_max_length": -1}, "non-negative"),
    ({"query_text_max_length": True}, "non-negative"),
    ([("enabled", True)], "must be a dict"),
])
def test_the_tracing_option_is_validated(tracing, message):
    with pytest.raises(ConfigurationError, match=message):
        MongoClient(connect=False, tracing=tracing)


def test_the_client_option_overrides_the_environment():
    on = {ENABLED_ENV: "true", QUERY_TEXT_MAX_LENGTH_ENV: "50"}
    assert make_tracer({"enabled": False, "query_text_max_length": None}, on) is None
    assert make_tracer({"enabled": None, "query_text_max_length": 7}, on).query_text_max_length == 7
    assert make_tracer(None, on).query_text_max_length == 50
    assert make_tracer(None, {ENABLED_ENV: "1"}).query_text_max_length == 0
    assert make_tracer(None, {ENABLED_ENV: "YES"}) is not None
    assert make_tracer(None, {ENABLED_ENV: "on"}) is None  # the spec's values are 1, true and yes
    with pytest.raises(ConfigurationError, match=QUERY_TEXT_MAX_LENGTH_ENV):
        make_tracer(None, {ENABLED_ENV: "true", QUERY_TEXT_MAX_LENGTH_ENV: "lots"})


def test_without_opentelemetry_greenmongo_imports_and_tracing_names_the_extra():
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"  # import opentelemetry -> ImportError
        "import greenmongo\n"
        "greenmongo.MongoClient(connect=False).close()\n"
        "try:\n"
        "    greenmongo.MongoClient(connect=False, tracing={'enabled': True})\n"
        "except greenmongo.errors.ConfigurationError as exc:\n"
        "    print('refused:', exc)\n"
        "print('opentelemetry' in sys.modules and sys.modules['opentelemetry'] is not None)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != ENABLED_ENV}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "greenmongo[otel]" in out.stdout
    assert out.stdout.strip().endswith("False")


@pytest.mark.server
def test_a_bulk_write_of_several_batches_is_one_operation_span(server_uri, exporter, clients):
    # insert_many cut into batches (maxWriteBatchSize), then bulk_write with a write error: one driver
    # operation each, so one operation span each, every batch's command span nested in it, and the
    # BulkWriteError (raised after the last batch) recorded on the operation's span.
    from greenmongo import InsertOne
    from greenmongo.errors import BulkWriteError

    client = MongoClient(server_uri, tracing={"enabled": True})
    clients.append(client)
    client.otel_db.bulk.drop()
    limit = client.otel_db.command("hello")["maxWriteBatchSize"]
    exporter.clear()
    client.otel_db.bulk.insert_many([{"_id": n} for n in range(limit + 5)])
    (operation,) = _spans(exporter, "insert otel_db.bulk")
    commands = _spans(exporter, "insert")
    assert len(commands) == 2
    assert all(command.parent.span_id == operation.context.span_id for command in commands)
    assert operation.status.is_ok

    exporter.clear()
    with pytest.raises(BulkWriteError):
        client.otel_db.bulk.bulk_write([InsertOne({"_id": -1}), InsertOne({"_id": 0})], ordered=False)
    (operation,) = _spans(exporter, "insert otel_db.bulk")
    (command,) = _spans(exporter, "insert")
    assert command.parent.span_id == operation.context.span_id
    assert not operation.status.is_ok
    assert operation.attributes["exception.type"] == "greenmongo.errors.BulkWriteError"
