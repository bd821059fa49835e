"""greenmongo quickstart: a MongoClient shared by 100 greenlets writing and reading concurrently.

With MONGODB_URI unset it starts a throwaway local server (SecantusDB, installed by the
``server`` extra) on a free loopback port and stops it at the end.

    python examples/quickstart.py
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import gevent

from greenmongo import ASCENDING, MongoClient


@contextmanager
def server_uri() -> Iterator[str]:
    uri = os.environ.get("MONGODB_URI")
    if uri:
        yield uri
        return
    # The throwaway server launcher lives with the test servers; the example reuses it.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.servers.secantus import SecantusServer

    with SecantusServer() as server:
        print(f"started a throwaway SecantusDB at {server.host}:{server.port}")
        yield server.uri


def main() -> int:
    with server_uri() as uri, MongoClient(uri) as client:
        greetings = client.quickstart.greetings
        greetings.drop()
        greetings.create_index([("n", ASCENDING)], unique=True)

        def writer(n: int) -> None:  # greenlets share the client; its pool hands out connections
            greetings.insert_one({"n": n, "text": f"hello #{n}"})

        gevent.joinall([gevent.spawn(writer, n) for n in range(100)], raise_error=True)
        count = greetings.count_documents({})
        first = [doc["n"] for doc in greetings.find({"n": {"$lt": 3}}).sort("n", ASCENDING)]
        greetings.update_many({"n": {"$gte": 50}}, {"$set": {"second_half": True}})
        second_half = greetings.count_documents({"second_half": True})
        print(f"100 greenlets inserted {count} documents; the first three: {first}; "
              f"{second_half} marked as the second half")
        return 0 if count == 100 and second_half == 50 else 1


if __name__ == "__main__":
    sys.exit(main())
