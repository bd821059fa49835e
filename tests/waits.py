"""The one way tests wait: for something to happen, or through a window in which it must not.

A fixed sleep before an assertion guesses how long the awaited thing takes: on a loaded machine
the guess is too short and the test fails, and where the guess is long the test is slow and still
does not say what it waited for. These helpers return as soon as the thing has happened and,
when it never does, fail with a message naming it:

- ``wait_event``: an Event that a listener or a fake server sets (the first choice);
- ``wait_until`` / ``eventually``: poll a condition / an asserting check, for state that
  announces nothing (``poll`` is the same without failing, for callers that report it);
- ``assert_stays``: something must NOT happen within a window (the one place a window is inherent);
- ``observe``: a measured window (wakeups or CPU are counted meanwhile).

Two kinds of sleep are not waits and stay sleeps: time a fake server or an instrument spends on
purpose (a reply that comes late, a ticker), and spec operations that say "wait N ms".

Everything here runs in the calling greenlet and yields to the hub while it waits, so it works
in plain and monkey-patched processes alike.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Callable, Optional, Type, Union

import gevent

DEFAULT_TIMEOUT = 5.0  # generous: a bound on a stall, never a guess at how long things take
POLL_INTERVAL = 0.005

Message = Union[str, Callable[[], str]]


def _check(condition: Callable[[], Any]) -> tuple[Any, Optional[AssertionError]]:
    """``condition()``, with an AssertionError it raises counting as "not yet"."""
    try:
        return condition(), None
    except AssertionError as exc:
        return None, exc


def poll(condition: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT,
         interval: float = POLL_INTERVAL) -> Any:
    """``condition()``'s first truthy value within ``timeout`` seconds, else its last (falsy) one.

    For callers that report a timeout their own way; ``wait_until`` fails the test instead.
    """
    deadline = monotonic() + timeout
    while True:
        value, _ = _check(condition)
        if value or monotonic() >= deadline:
            return value
        gevent.sleep(interval)


def wait_until(condition: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, message: Message = "condition",
               *, error: Type[Exception] = AssertionError, interval: float = POLL_INTERVAL) -> Any:
    """Poll ``condition()`` until it is truthy and return that value; ``error`` on timeout.

    ``condition`` may also assert: an AssertionError means "not yet", and the last one is
    quoted in the timeout's message. ``message`` names what was awaited (or builds the text).
    """
    deadline = monotonic() + timeout
    while True:
        value, failure = _check(condition)
        if value:
            return value
        if monotonic() >= deadline:
            text = message() if callable(message) else f"{message} not reached within {timeout}s"
            raise error(f"{text}: {failure}" if failure is not None else text)
        gevent.sleep(interval)


def eventually(check: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, message: Message = "check") -> None:
    """Run ``check`` (which asserts) until it passes; on timeout the AssertionError names ``message``."""
    wait_until(lambda: check() or True, timeout, message)


def wait_event(event: Any, timeout: float = DEFAULT_TIMEOUT, message: str = "event") -> None:
    """Wait for ``event`` (anything with ``wait(timeout) -> bool``); AssertionError when not set in time."""
    if not event.wait(timeout):
        raise AssertionError(f"{message}: not set within {timeout}s")


def assert_stays(condition: Callable[[], Any], seconds: float, message: str = "condition",
                 *, interval: float = POLL_INTERVAL) -> None:
    """Assert ``condition()`` holds now and throughout the next ``seconds``; fail the moment it does not.

    For claims that something does NOT happen (no request goes out, a waiter keeps waiting, no
    further check runs): no event can announce a non-event, so the claim needs a window. The
    window is the claim's own bound ("not within 0.3 s"): choose it from the behaviour under test,
    and note at the call why that length says what the test means.
    """
    deadline = monotonic() + seconds
    while True:
        value, failure = _check(condition)
        if not value:
            raise AssertionError(f"{message} stopped holding {seconds - (deadline - monotonic()):.3f}s "
                                 f"into a {seconds}s window" + (f": {failure}" if failure is not None else ""))
        remaining = deadline - monotonic()
        if remaining <= 0:
            return
        gevent.sleep(min(interval, remaining))


def observe(seconds: float) -> None:
    """Let a measured window pass: the test records what happens meanwhile (wakeups, CPU, pings).

    The window is the measurement itself, not a wait for something; ``seconds`` is its length.
    """
    gevent.sleep(seconds)
