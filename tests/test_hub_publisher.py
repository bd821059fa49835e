"""OrderedPublisher: listener calls in order, one at a time, never holding up another greenlet."""

from __future__ import annotations

import logging
from typing import Any, List

import gevent
import pytest
from gevent.event import Event

from greenmongo.hub.publisher import OrderedPublisher


class Calls:
    """Records (name, greenlet) per call; a call named in ``gates`` blocks until its gate is set."""

    def __init__(self) -> None:
        self.log: List[str] = []
        self.by: List[Any] = []
        self.gates: dict = {}
        self.entered: dict = {}
        self.active = 0
        self.overlapped = False

    def gate(self, name: str) -> Event:
        self.entered[name] = Event()
        gate = self.gates[name] = Event()
        return gate

    def __call__(self, name: str) -> None:
        self.active += 1
        self.overlapped |= self.active > 1
        try:
            self.log.append(name)
            self.by.append(gevent.getcurrent())
            if name in self.gates:
                self.entered[name].set()
                self.gates[name].wait()
        finally:
            self.active -= 1


def test_uncontended_calls_run_at_once_in_the_caller() -> None:
    publisher = OrderedPublisher()
    calls = Calls()
    publisher.publish(calls, "a")
    publisher.publish(calls, "b")
    assert calls.log == ["a", "b"] and calls.by == [gevent.getcurrent()] * 2
    assert publisher.pending == 0


def test_a_batch_delivers_after_it_ends() -> None:
    publisher = OrderedPublisher()
    calls = Calls()
    with publisher.batch():
        publisher.publish(calls, "a")
        with publisher.batch():  # nested: only queues
            publisher.publish(calls, "b")
        assert calls.log == [] and publisher.pending == 2
    assert calls.log == ["a", "b"] and calls.by == [gevent.getcurrent()] * 2


def test_others_queue_behind_a_slow_call_and_are_not_held_by_it() -> None:
    publisher = OrderedPublisher()
    calls = Calls()
    slow = calls.gate("a1")
    first = gevent.spawn(publisher.publish, calls, "a1")
    assert calls.entered["a1"].wait(1)
    # Another greenlet publishes while "a1" is being delivered: queued, and it goes on at once.
    also_slow = calls.gate("b1")
    publisher.publish(calls, "b1")
    publisher.publish(calls, "b2")
    with publisher.batch():
        publisher.publish(calls, "b3")
    assert calls.log == ["a1"] and publisher.pending == 3
    slow.set()
    # The first greenlet delivered only its own call; "b1" (slow too) went to a delivery greenlet.
    first.join(1)
    assert first.dead
    assert calls.entered["b1"].wait(1)
    assert calls.by[1] is not first and calls.by[1] is not gevent.getcurrent()
    assert calls.log == ["a1", "b1"]
    publisher.publish(calls, "c1")  # still behind b1
    assert calls.log == ["a1", "b1"]
    also_slow.set()
    deliverer = calls.by[1]
    deliverer.join(1)
    assert calls.log == ["a1", "b1", "b2", "b3", "c1"] and not calls.overlapped
    assert publisher.pending == 0
    publisher.publish(calls, "d1")  # idle again: delivered in the caller
    assert calls.by[-1] is gevent.getcurrent()


def test_a_call_that_raises_is_logged_and_delivery_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    publisher = OrderedPublisher()
    calls = Calls()

    def broken() -> None:
        raise ValueError("listener bug")

    with caplog.at_level(logging.ERROR, logger="greenmongo.monitoring"):
        with publisher.batch():
            publisher.publish(broken)
            publisher.publish(calls, "after")
    assert calls.log == ["after"]
    assert "listener bug" in caplog.text


def test_a_greenlet_killed_in_a_call_leaves_the_rest_to_be_delivered() -> None:
    publisher = OrderedPublisher()
    calls = Calls()
    calls.gate("a1")
    victim = gevent.spawn(publisher.publish, calls, "a1")
    assert calls.entered["a1"].wait(1)
    publisher.publish(calls, "b1")
    victim.kill()  # lands inside the call it was delivering
    assert isinstance(victim.value, gevent.GreenletExit)
    delivered = Event()
    publisher.publish(delivered.set)
    assert delivered.wait(1)
    assert calls.log == ["a1", "b1"] and publisher.pending == 0
    publisher.publish(calls, "c1")
    assert calls.by[-1] is gevent.getcurrent()  # the token was handed back
