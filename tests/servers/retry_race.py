"""Does the server run one retryable write twice when its retry arrives while the first attempt runs?

``python -m tests.servers.retry_race [rounds]`` starts a fresh SecantusDB and, each round, sends the same
insert (same ``lsid`` and ``txnNumber``) on two connections before reading either reply, as happens when a
fault proxy stalls a request past the driver's socket timeout and then delivers it while the driver's retry
runs. MongoDB checks a session out to one operation at a time, so the second waits and answers with the
first one's result; a server that does not serialise them answers one with a duplicate key error.
No driver is involved (plain sockets): this is the evidence for the soak's (bench/soak.py)
DuplicateKeyErrors after its stepdowns and stalls.
"""

from __future__ import annotations

import socket
import sys
import uuid
from collections import Counter

from greenmongo.bson import Binary, Int64
from tests.servers.secantus import SecantusServer, read_reply, send_command


def run(rounds: int) -> Counter:
    outcomes: Counter = Counter()
    with SecantusServer() as server:
        for n in range(rounds):
            command = {"insert": "race", "documents": [{"_id": n}], "txnNumber": Int64(1), "$db": "probe",
                       "lsid": {"id": Binary(uuid.uuid4().bytes, 4)}}
            first, second = (socket.create_connection(server.address, timeout=10) for _ in range(2))
            with first, second:
                send_command(first, command)
                send_command(second, command)
                replies = [read_reply(first), read_reply(second)]
            kinds = sorted("duplicate key" if any(error.get("code") == 11000
                                                  for error in reply.get("writeErrors", ()))
                           else "applied once" if reply.get("ok") == 1 and reply.get("n") == 1
                           else f"other: {reply!r:.100}" for reply in replies)
            outcomes[" + ".join(kinds)] += 1
    return outcomes


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    for outcome, count in run(rounds).most_common():
        print(f"{count:5d}  {outcome}")


if __name__ == "__main__":
    main()
