"""Rescanning the SRV records of a ``mongodb+srv`` URI (Polling SRV Records for mongos Discovery).

One greenlet per topology, only while the topology is Sharded or Unknown
(never for load-balanced or replica-set topologies): wait rescanSRVIntervalMS,
query SRV, keep the targets in the SRV name's domain (logging the others),
and hand the verified hosts to the topology, which applies srvMaxHosts and
publishes the change. A failed or empty lookup changes nothing and retries
after heartbeatFrequencyMS. The wait uses an unreferenced timer and the
greenlet holds the topology by weak reference.

The resolver is anything with ``resolve_srv(name, timeout) -> [(host, port)]``
(``greenmongo.net.dns.DnsResolver``); one that also offers
``resolve_srv_with_ttl(name, timeout) -> ([(host, port)], min_ttl_seconds)``
lets the interval follow the records' TTL.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

from greenmongo.hub.worker import BackgroundWorker
from greenmongo.options.seedlist import normalize_hostname, srv_domain, srv_query_name
from greenmongo.sdam.address import Address
from greenmongo.sdam.topology_type import TopologyType

LOGGER = logging.getLogger("greenmongo.topology")

#: The spec's floor for rescanSRVIntervalMS, and the interval when TTLs are unknown.
MIN_RESCAN_INTERVAL = 60.0
DEFAULT_DNS_TIMEOUT = 20.0

_POLLED_TYPES = (TopologyType.Sharded, TopologyType.Unknown)


def verified_hosts(hostname: str, records: Sequence[Tuple[str, int]],
                   on_rejected: Optional[Callable[[str, str], None]] = None) -> List[Address]:
    """The SRV targets inside the hostname's domain, normalized and de-duplicated; others are reported."""
    domain = srv_domain(normalize_hostname(hostname))
    hosts: List[Address] = []
    for target, port in records:
        host = normalize_hostname(str(target))
        if not host.endswith("." + domain) or not 0 < int(port) <= 65535:
            if on_rejected is not None:
                on_rejected(host, f"not in the domain {domain!r}" if not host.endswith("." + domain)
                            else f"invalid port {port}")
            continue
        address = (host, int(port))
        if address not in hosts:
            hosts.append(address)
    return hosts


class SrvPoller(BackgroundWorker):
    """Periodically re-resolves ``_{service}._tcp.{hostname}`` and feeds the result to the topology."""

    stop_reason = "SRV poller stopped"

    def __init__(self, topology: Any, hostname: str, resolver: Any, *, service_name: str = "mongodb",
                 heartbeat_frequency: float, dns_timeout: Optional[float] = None,
                 min_interval: float = MIN_RESCAN_INTERVAL) -> None:
        super().__init__()
        self._topology_ref = weakref.ref(topology)
        self.hostname = normalize_hostname(hostname)
        self.query_name = srv_query_name(self.hostname, service_name)
        self._resolver = resolver
        self._heartbeat_frequency = heartbeat_frequency
        self._dns_timeout = dns_timeout or DEFAULT_DNS_TIMEOUT
        self._min_interval = min_interval
        self.interval = min_interval  # after the initial seedlist discovery
        self.rescans = 0

    def run(self) -> None:
        while not self._stopped:
            self.sleep(self.interval)
            if self._stopped:
                return
            topology = self._topology_ref()
            if topology is None or topology.description.topology_type not in _POLLED_TYPES:
                return  # the spec: rescans only for Sharded (or not yet known) topologies
            topology = None
            hosts, ttl = self._lookup()
            self.rescans += 1
            if self._stopped:
                return
            if not hosts:
                self.interval = self._heartbeat_frequency
                continue
            self.interval = max(ttl, self._min_interval) if ttl is not None else self._min_interval
            topology = self._topology_ref()
            if topology is None:
                return
            topology.apply_srv_hosts(hosts)
            topology = None

    def _lookup(self) -> Tuple[List[Address], Optional[float]]:
        """Verified hosts and the smallest TTL; ([], None) after any failure (logged, never raised)."""
        resolver = self._resolver
        try:
            with self.interruptible():
                with_ttl = getattr(resolver, "resolve_srv_with_ttl", None)
                if with_ttl is not None:
                    records, ttl = with_ttl(self.query_name, self._dns_timeout)
                else:
                    records, ttl = resolver.resolve_srv(self.query_name, self._dns_timeout), None
        except Exception as exc:
            LOGGER.info("SRV rescan of %s failed, keeping the current hosts: %s", self.query_name, exc)
            return [], None
        hosts = verified_hosts(self.hostname, list(records or ()), self._rejected)
        if not hosts:
            LOGGER.info("SRV rescan of %s found no valid hosts, keeping the current hosts", self.query_name)
        return hosts, (float(ttl) if ttl is not None else None)

    def _rejected(self, host: str, why: str) -> None:
        LOGGER.warning("SRV rescan of %s: ignoring target %s (%s)", self.query_name, host, why)
