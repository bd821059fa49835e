"""Retries meeting real network faults, one at a time (tests/servers/faults.py's ``force()``), through
SecantusDB: what the pure retry table (tests/test_retry_decisions.py) decides, seen end to end."""

from __future__ import annotations

import gevent
import pytest

from greenmongo import MongoClient, monitoring
from tests.servers.faults import FaultPlan, FaultProxy
from tests.waits import wait_until

pytestmark = pytest.mark.server


class PoolEvents(monitoring.ConnectionPoolListener):
    def __init__(self) -> None:
        self.cleared = 0

    def pool_cleared(self, event) -> None:
        self.cleared += 1

    def __getattr__(self, name):  # every other CMAP event: not needed here
        if name.startswith(("pool_", "connection_")):
            return lambda event: None
        raise AttributeError(name)


@pytest.fixture
def upstream(server_uri):
    host, port = server_uri.split("//", 1)[1].split("/", 1)[0].split(",")[0].rsplit(":", 1)
    return host, int(port)


def test_a_getmore_waiting_for_a_connection_survives_a_cleared_pool(server_uri, upstream) -> None:
    """A getMore queued for the pool's only connection when another operation's network error clears the
    pool sent nothing: the cursor cannot have moved, so it is retried (once the server is checked again)
    instead of failing the iteration with PoolClearedError."""
    with MongoClient(server_uri) as direct:
        direct.retry_faults.docs.drop()
        direct.retry_faults.docs.insert_many([{"_id": n} for n in range(10)])
    events = PoolEvents()
    with FaultProxy(*upstream, FaultPlan(), enabled=False) as proxy:
        client = MongoClient(f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true&maxPoolSize=1",
                             event_listeners=[events])
        try:
            docs = client.retry_faults.docs
            cursor = docs.find({}, batch_size=2).sort("_id", 1)
            first = next(cursor)
            # The writer holds the only connection: its reply stalls, then the connection is closed.
            proxy.force("stall", command="insert", cut=0.0, seconds=30.0, close=True)
            writer = gevent.spawn(docs.insert_one, {"_id": "writer"})
            wait_until(lambda: proxy.log, message="the writer's stall")
            reader = gevent.spawn(lambda: [first] + list(cursor))
            pool = client._core.topology.servers()[(proxy.host, proxy.port)].pool
            wait_until(lambda: pool.stats().waiters == 1, message="the getMore waiting for the connection")
            proxy.disable()  # the stall ends with the connection closed: a network error, the pool is cleared
            assert reader.get(timeout=10) == [{"_id": n} for n in range(10)]
            writer.get(timeout=10)  # a retryable write: retried, and the server recognised it
            assert events.cleared == 1
        finally:
            client.close()
