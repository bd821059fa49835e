"""A connection stand-in and a ready pool of them, for pool tests that need no socket."""

from __future__ import annotations

from typing import Any

from greenmongo.pool import Pool, PoolOptions


class Conn:
    def __init__(self, connection_id: int) -> None:
        self.id = connection_id
        self.closed = False

    def close(self) -> None:
        self.closed = True


def make_pool(address: tuple[str, int], **options: Any) -> Pool:
    pool = Pool(address, Conn, PoolOptions(**options))
    pool.ready()
    return pool
