"""The test helpers that scan the collector must survive what it holds, dead weak proxies included."""

from __future__ import annotations

import weakref

import gevent

from tests.api_support import gc_instances, live_greenlets


class _Thing:
    pass


def test_gc_instances_skips_a_dead_weak_proxy_and_finds_live_instances() -> None:
    alive, doomed = _Thing(), _Thing()
    proxy = weakref.proxy(doomed)
    del doomed
    found = gc_instances(_Thing)
    assert any(obj is alive for obj in found)
    assert not any(obj is proxy for obj in found)  # its type is weakproxy, never asked for __class__


def test_live_greenlets_sees_a_dead_proxy_and_a_sleeping_greenlet() -> None:
    doomed = _Thing()
    proxy = weakref.proxy(doomed)
    del doomed
    sleeper = gevent.spawn(gevent.sleep, 60)
    try:
        assert sleeper in live_greenlets()
    finally:
        sleeper.kill()
    assert sleeper not in live_greenlets()
    del proxy
