"""pytest fixtures and parametrization for the unified runner.

``unified_servers`` (session scope) hands out a ``UnifiedContext`` per suite:
with ``MONGODB_URI`` set, one context on that deployment for everything;
otherwise a fresh SecantusDB (single-node replica set ``secantus``) per suite,
the previous one stopped first, because SecantusDB slows down after ~10k
retryable writes. The driver comes from ``GREENMONGO_UNIFIED_DRIVER``; when it
cannot run (greenmongo without MongoClient yet) every unified test is skipped
with that reason.

Import the fixture into a test module (``from spec.unified.fixtures import
unified_servers``) and parametrize with ``unified_params(subdir)``.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from spec.unified.known_failures import LOAD_BALANCED, REPLICA_SET, known_failure, runs_known_failure
from spec.support import params
from spec.unified.context import ConnectionString, UnifiedContext
from spec.unified.drivers import DriverAdapter, DriverUnavailable, load_driver
from spec.unified.outcomes import NotSupported, TestFileError
from spec.unified.runner import run_test, test_descriptions

#: Suites whose cases race the clock with margins of 20-25 ms (a 50 ms block under a 75 ms timeoutMS, a
#: 125 ms block against a 100 ms socketTimeoutMS) that a stall of the machine can eat: a failed case
#: runs again, up to this many times, as PyMongo's own runner does for these tests (flaky, max_runs=3).
#: A case that fails every time fails; one that passed only on a rerun is listed at the end of the run
#: ("timing reruns") with its first error, never silently.
TIMING_RERUNS = {"client-side-operations-timeout/tests": 2}
#: (case, first error) of the cases that passed only on a rerun in this session.
RERUNS: list[tuple[str, str]] = []


@dataclass(frozen=True)
class UnifiedCase:
    """One test of one unified test file, and the suite (server) it belongs to."""

    suite: str
    path: Path
    index: int
    #: What the case runs against: the one-member replica set, or the same server behind the loopback
    #: load balancers (tests/servers/load_balancer.py).
    deployment: str = REPLICA_SET

    def __repr__(self) -> str:
        return f"UnifiedCase({self.path.name}#{self.index}, {self.deployment})"


def unified_params(subdir: str, pattern: str = "*.json", deployment: str = REPLICA_SET) -> list:
    """One pytest param per test case of every file in ``subdir`` (ids: ``<json path>::<description>``)."""

    def cases(path: Path, data: Any):
        for index, description in enumerate(test_descriptions(path)):
            yield description, UnifiedCase(subdir, path, index, deployment)

    marked = []
    for param in params(subdir, cases, pattern):
        reason = known_failure(param.id, deployment)
        mark = pytest.mark.xfail(strict=True, reason=reason, run=runs_known_failure(param.id, deployment))
        marked.append(pytest.param(*param.values, id=param.id, marks=mark) if reason else param)
    return marked


class UnifiedServers:
    """One UnifiedContext at a time, keyed by suite and deployment; starts SecantusDB unless MONGODB_URI is
    set, and for the load-balanced deployment the two loopback load balancers in front of it (one service:
    SINGLE_MONGOS_LB_URI; two: MULTI_MONGOS_LB_URI) unless both variables are set."""

    def __init__(self) -> None:
        self._adapter: Optional[DriverAdapter] = None
        self._unavailable: Optional[str] = None
        self._suite: Optional[tuple[str, str]] = None
        self._server: Any = None
        self._balancers: list = []
        self._context: Optional[UnifiedContext] = None
        self._failure: Optional[tuple[tuple[str, str], BaseException]] = None

    def adapter(self) -> DriverAdapter:
        if self._adapter is None and self._unavailable is None:
            try:
                self._adapter = load_driver()
            except DriverUnavailable as exc:
                self._unavailable = str(exc)
        if self._adapter is None:
            pytest.skip(self._unavailable)
        return self._adapter

    def context_for(self, suite: str, deployment: str = REPLICA_SET) -> UnifiedContext:
        adapter = self.adapter()
        key = (suite, deployment)
        shared_uri = os.environ.get("MONGODB_URI")
        shared = bool(shared_uri) and (deployment == REPLICA_SET or _lb_uris_given())
        if self._context is not None and (key == self._suite or (shared and self._suite is not None
                                                                 and self._suite[1] == deployment)):
            return self._context
        if self._failure is not None and key == self._failure[0]:
            raise RuntimeError(f"the unified runner could not start for {suite} ({deployment}): "
                               f"{self._failure[1]!r}")
        self.close()
        try:
            return self._start(key, adapter, shared_uri)
        except Exception as exc:
            self._failure = (key, exc)  # fail the suite's other tests fast instead of retrying each
            self.close()
            raise

    def _start(self, key: tuple[str, str], adapter: DriverAdapter, shared_uri: Optional[str]) -> UnifiedContext:
        deployment = key[1]
        if deployment == LOAD_BALANCED and _lb_uris_given():
            single, multi = os.environ["SINGLE_MONGOS_LB_URI"], os.environ["MULTI_MONGOS_LB_URI"]
        else:
            if shared_uri:
                uri = shared_uri
            else:
                from tests.servers.secantus import SecantusServer

                self._server = SecantusServer()
                atexit.register(self._server.stop)
                self._server.start()
                uri = f"{self._server.uri}?replicaSet=secantus"
            if deployment == REPLICA_SET:
                self._suite = key
                self._context = UnifiedContext(adapter, uri)
                return self._context
            single, multi = self._start_load_balancers(uri)
        self._suite = key
        self._context = UnifiedContext(adapter, single, load_balancers={"SINGLE_MONGOS_LB_URI": single,
                                                                        "MULTI_MONGOS_LB_URI": multi})
        return self._context

    def _start_load_balancers(self, uri: str) -> tuple[str, str]:
        # Subprocesses: a driver that blocks the OS thread (the PyMongo peer) would starve an in-process proxy.
        from tests.servers.load_balancer import LoadBalancerProcess

        backend = ConnectionString(uri).hosts[0]
        host, _, port = backend.rpartition(":")
        for services in (1, 2):
            balancer = LoadBalancerProcess((host, int(port)), services=services)
            atexit.register(balancer.stop)
            self._balancers.append(balancer.start())
        single, multi = self._balancers
        return single.uri, multi.uri

    def close(self) -> None:
        context, server, balancers = self._context, self._server, self._balancers
        self._context = self._server = self._suite = None
        self._balancers = []
        try:
            if context is not None:
                context.close()
        finally:
            for balancer in balancers:
                balancer.stop()
            if server is not None:
                server.stop()


def _lb_uris_given() -> bool:
    """Both load balancer URIs come from the environment (a real load-balanced deployment)."""
    return bool(os.environ.get("SINGLE_MONGOS_LB_URI") and os.environ.get("MULTI_MONGOS_LB_URI"))


@pytest.fixture(scope="session")
def unified_servers():
    servers = UnifiedServers()
    yield servers
    servers.close()


def run_case(servers: UnifiedServers, case: UnifiedCase) -> None:
    """Run one case; a deliberately unsupported feature or an unmet requirement becomes a skip.

    A failed case of a ``TIMING_RERUNS`` suite runs again (a mistake in the test file does not).
    """
    context = servers.context_for(case.suite, case.deployment)
    reruns = TIMING_RERUNS.get(case.suite, 0)
    first_error: Optional[BaseException] = None
    for attempt in range(reruns + 1):
        try:
            run_test(context, case.path, case.index)
        except NotSupported as exc:
            pytest.skip(str(exc))
        except TestFileError:
            raise
        except Exception as exc:
            if attempt == reruns:
                raise
            first_error = first_error or exc
            continue
        if first_error is not None:
            description = test_descriptions(case.path)[case.index]
            summary = f"{type(first_error).__name__}: {first_error}".splitlines()[0][:500]
            RERUNS.append((f"{case.suite}/{case.path.name}::{description} (attempt {attempt + 1})", summary))
        return
