"""Ask a certificate's OCSP responders: the I/O half of the OCSP endpoint check (net.ocsp decides).

One HTTP POST (RFC 6960 Appendix A) per responder URL, all at once, each in its own greenlet over
net.http; the first valid conclusive answer wins and the other requests are killed. Every request is
bounded by the same ``timeout``, and the wait for them all ends with it: an unreachable, slow or
broken responder costs at most that long and then counts as no answer (soft-fail, decided in
net.ocsp). The requests are killed (their sockets closed) whatever ends the wait, a kill of the
calling greenlet included.
"""

from __future__ import annotations

import http.client
from time import monotonic
from typing import Optional, Union

import gevent
from gevent.queue import Empty, Queue

from greenmongo.net import ocsp
from greenmongo.net.http import HttpFetcher, http_request

__all__ = ["ask_responders"]

_HEADERS = {"Content-Type": "application/ocsp-request", "Accept": "application/ocsp-response"}
#: What a request that reached no usable answer can raise (refused, reset, timed out, not HTTP, bad URL).
_NO_ANSWER = (OSError, ValueError, http.client.HTTPException)

_Outcome = Union[Optional[ocsp.OcspStatus], Exception]


def ask_responders(query: ocsp.ResponderQuery, timeout: float, *,
                   fetch: HttpFetcher = http_request) -> Optional[ocsp.OcspStatus]:
    """The first usable answer of ``query.urls`` within ``timeout`` seconds, or None.

    A failure that is not about the responder (a bug) is raised, so that the caller fails closed.
    """
    outcomes: Queue = Queue()

    def ask(url: str) -> None:
        outcome: _Outcome
        try:
            reply = fetch("POST", url, _HEADERS, query.request, timeout)
            outcome = ocsp.read_responder_reply(query, reply.status, reply.body)
        except _NO_ANSWER:
            outcome = None
        except Exception as exc:  # handed to the caller, which fails closed with it
            outcome = exc
        outcomes.put(outcome)

    requests = [gevent.spawn(ask, url) for url in query.urls]
    deadline = monotonic() + timeout
    try:
        for _ in requests:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return None
            try:
                outcome = outcomes.get(timeout=remaining)
            except Empty:
                return None
            if isinstance(outcome, Exception):
                try:
                    raise outcome
                finally:
                    outcome = None  # its traceback holds this frame: no reference cycle through the local
            if outcome is not None:
                return outcome
        return None
    finally:
        gevent.killall([request for request in requests if not request.dead], block=True)
