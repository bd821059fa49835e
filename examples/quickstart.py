"""greenmongo quickstart: 100 greenlets writing and reading concurrently over the gevent hub.

With MONGODB_URI unset it starts a throwaway local server (SecantusDB, installed by the
``server`` extra) on a free loopback port and stops it at the end.

    python examples/quickstart.py

It talks to the server through greenmongo's connection layer (``open_connection`` +
``Connection.command``): ``MongoClient`` and the CRUD API are the next layer being built, and this
example will move to them as they land.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import gevent

from greenmongo.net.handshake import open_connection


@contextmanager
def server_address() -> Iterator[tuple[str, int]]:
    uri = os.environ.get("MONGODB_URI")
    if uri:  # mongodb://host:port/...: the first host is enough for this example
        host, _, port = uri.split("://", 1)[1].split("/", 1)[0].split(",")[0].rsplit("@", 1)[-1].partition(":")
        yield host, int(port or 27017)
        return
    # The throwaway server launcher lives with the test servers; the example reuses it.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.servers.secantus import SecantusServer

    with SecantusServer() as server:
        print(f"started a throwaway SecantusDB at {server.host}:{server.port}")
        yield server.address


def main() -> int:
    with server_address() as address:
        setup = open_connection(address)
        setup.command("quickstart", {"drop": "greetings"}, check=False)

        def writer(n: int) -> None:
            conn = open_connection(address)  # one connection per greenlet; a pool comes with MongoClient
            try:
                conn.command("quickstart", {"insert": "greetings"}, sequences={"documents": [{"n": n}]})
            finally:
                conn.close()

        gevent.joinall([gevent.spawn(writer, n) for n in range(100)], raise_error=True)
        reply = setup.command("quickstart", {"count": "greetings"})
        found = setup.command("quickstart", {"find": "greetings", "filter": {"n": {"$lt": 3}}, "sort": {"n": 1}})
        setup.close()
        print(f"100 greenlets inserted {reply['n']} documents; the first three: "
              f"{[doc['n'] for doc in found['cursor']['firstBatch']]}")
        return 0 if reply["n"] == 100 else 1


if __name__ == "__main__":
    sys.exit(main())
