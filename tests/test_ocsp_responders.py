"""Asking OCSP responders over HTTP (net.ocsp_responders) against a loopback responder: good, revoked,
unknown, malformed, HTTP errors, forged signatures, a closed port, a responder too slow to wait for, several
responders at once, and a caller killed mid-request."""

from __future__ import annotations

from time import monotonic

import gevent
import pytest
from gevent.event import Event

from greenmongo.net import ocsp
from greenmongo.net.http import http_request
from greenmongo.net.ocsp_responders import ask_responders
from tests.servers.ocsp_responder import GOOD, REVOKED, OcspResponder
from tests.servers.secantus import free_port
from tests.servers.tls_certs import make_ca, make_cert
from tests.waits import wait_event, wait_until

#: Longer than any answer takes here: a test that returns sooner did not wait for the timeout.
PATIENT = 20.0


@pytest.fixture(scope="module")
def pki():
    ca = make_ca()
    return {"ca": ca, "delegate": make_cert(ca, "ocsp responder", ocsp_signing=True),
            "stranger": make_ca("stranger")}


def query_for(pki, *urls: str) -> ocsp.ResponderQuery:
    cert = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=urls).cert
    decision = ocsp.check_certificate(cert, [pki["ca"].cert], b"", cache=ocsp.OcspCache(), endpoint_check=True)
    assert decision.ask is not None
    return decision.ask


def ask(query: ocsp.ResponderQuery, timeout: float = PATIENT):
    started = monotonic()
    status = ask_responders(query, timeout)
    return status, monotonic() - started


@pytest.mark.parametrize("mode, expected", [("good", GOOD), ("revoked", REVOKED)])
@pytest.mark.parametrize("signer", ["issuer", "delegate"])
def test_conclusive_answer(pki, mode, expected, signer) -> None:
    with OcspResponder(pki["ca"], mode, signer=pki[signer] if signer == "delegate" else None) as responder:
        query = query_for(pki, responder.url)
        status, _ = ask(query)
    assert status is not None and status.status == expected
    assert [request.serial_number for request in responder.requests] == [query.cert.serial_number]


@pytest.mark.parametrize("mode", ["unknown", "malformed", "http-error", "forged"])
def test_answers_that_prove_nothing_are_no_answer(pki, mode) -> None:
    with OcspResponder(pki["ca"], mode, stranger=pki["stranger"]) as responder:
        status, elapsed = ask(query_for(pki, responder.url))
    assert status is None and len(responder.requests) == 1
    assert elapsed < PATIENT / 2  # answered at once: nothing waited for the timeout


def test_closed_port_is_no_answer(pki) -> None:
    status, elapsed = ask(query_for(pki, f"http://127.0.0.1:{free_port()}/ocsp"))
    assert status is None and elapsed < PATIENT / 2


def test_slow_responder_is_given_up_at_the_timeout_without_blocking_the_hub(pki) -> None:
    ticks: list = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0.05)) for _ in range(10)])
    with OcspResponder(pki["ca"], "slow", delay=30) as responder:
        try:
            status, elapsed = ask(query_for(pki, responder.url), timeout=1.0)
        finally:
            ticker.kill()
    assert status is None and len(responder.requests) == 1
    assert 0.9 <= elapsed < 5.0
    assert len(ticks) == 10  # other greenlets ran while it waited


def test_the_first_conclusive_answer_wins(pki) -> None:
    with OcspResponder(pki["ca"], "slow", delay=30) as slow, OcspResponder(pki["ca"], "good") as good:
        status, elapsed = ask(query_for(pki, slow.url, good.url))
    assert status is not None and status.status == GOOD and elapsed < PATIENT / 2


def test_an_inconclusive_answer_does_not_end_the_wait(pki) -> None:
    unknown_answered = Event()

    def fetch(method, url, headers, body, timeout):
        if url == revoked.url:
            unknown_answered.wait()  # the revoked answer comes only after the unknown one was read
        reply = http_request(method, url, headers, body, timeout)
        if url == unknown.url:
            unknown_answered.set()
        return reply

    with OcspResponder(pki["ca"], "unknown") as unknown, OcspResponder(pki["ca"], "revoked") as revoked:
        status = ask_responders(query_for(pki, unknown.url, revoked.url), PATIENT, fetch=fetch)
    assert status is not None and status.status == REVOKED
    assert len(unknown.requests) == len(revoked.requests) == 1


def test_a_failure_that_is_not_the_responders_is_raised(pki) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in the HTTP client")

    with pytest.raises(RuntimeError, match="a bug"):
        ask_responders(query_for(pki, "http://127.0.0.1:1/"), 5.0, fetch=broken)


def test_killing_the_caller_kills_the_requests(pki) -> None:
    asked, ended = Event(), Event()

    def hanging(*_args, **_kwargs):
        asked.set()
        try:
            gevent.sleep(60)
        finally:
            ended.set()

    caller = gevent.spawn(ask_responders, query_for(pki, "http://127.0.0.1:1/"), 60.0, fetch=hanging)
    wait_event(asked, message="the request under way")
    caller.kill()
    wait_event(ended, message="the request killed with its caller")
    wait_until(lambda: caller.dead, message="the caller gone")
