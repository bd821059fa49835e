"""``python -m greenmongo doctor URI [--json]``: what a client would meet, host by host, and whether it is healthy.

Reads the connection string as MongoClient does (``mongodb+srv``: the SRV and TXT lookups, cooperative,
timed), probes every seed and every member the seeds' hellos name (``net.probe``: resolution, TCP, TLS
with certificate and OCSP verdict, the hello, round trips, authentication on a second connection), builds
the topology from those hellos with the pure SDAM code (``sdam.update``) and asks server selection
(``sdam.selection``) which servers each read preference would pick. Exit status 0 when healthy, 1 with a
one-line reason when not (a host down, authentication refused, no server for the read preference or for
writes), 2 when the connection string itself cannot be used. No output ever shows the password or the
connection string's text (a mistyped one can carry secrets): hosts, user name and options are shown
from the parsed values.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from time import monotonic
from typing import Any, Mapping, Optional, Sequence, TextIO

from greenmongo.auth.mechanisms import Authenticator, resolve_mechanism
from greenmongo.client_options import ClientOptions
from greenmongo.errors import ConfigurationError, PyMongoError
from greenmongo.net.dns import DnsResolver, default_resolver
from greenmongo.net.probe import probe_host
from greenmongo.options.credentials import MongoCredential
from greenmongo.options.read_preferences import ReadPreference, ServerMode
from greenmongo.sdam.address import Address, format_address
from greenmongo.sdam.selection import select_servers
from greenmongo.sdam.server_description import ServerDescription
from greenmongo.sdam.topology_description import TopologyDescription
from greenmongo.sdam.update import apply_server_description

#: Hosts probed at most (seeds and the members their hellos name).
MAX_HOSTS = 50
DEFAULT_TIMEOUT = 5.0

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_UNUSABLE = 0, 1, 2


class _RecordingResolver:
    """The SRV resolver ClientOptions uses, timing and keeping each lookup for the report."""

    def __init__(self, inner: DnsResolver) -> None:
        self._inner = inner
        self.lookups: list[dict[str, Any]] = []

    def _timed(self, kind: str, name: str, call: Any, timeout: Optional[float]) -> Any:
        started = monotonic()
        try:
            result = call(name, timeout)
        except Exception as exc:
            self.lookups.append({"type": kind, "name": name, "error": str(exc),
                                 "ms": round((monotonic() - started) * 1000.0, 3)})
            raise
        self.lookups.append({"type": kind, "name": name, "ms": round((monotonic() - started) * 1000.0, 3),
                             "records": [f"{host}:{port}" for host, port in result] if kind == "SRV" else
                             list(result)})
        return result

    def resolve_srv(self, name: str, timeout: Optional[float] = None) -> list[tuple[str, int]]:
        return list(self._timed("SRV", name, self._inner.resolve_srv, timeout))

    def resolve_txt(self, name: str, timeout: Optional[float] = None) -> list[str]:
        return list(self._timed("TXT", name, self._inner.resolve_txt, timeout))


class _ReportingAuthenticator:
    """``auth.Authenticator`` that also knows the mechanism it tried when authentication fails."""

    def __init__(self, credentials: MongoCredential) -> None:
        self._credentials = credentials
        self._inner = Authenticator(credentials)
        self.mechanism: Optional[str] = None

    def handshake_fields(self) -> Mapping[str, Any]:
        return self._inner.handshake_fields()

    def authenticate(self, conn: Any, hello_reply: Mapping[str, Any]) -> None:
        self.mechanism = resolve_mechanism(self._credentials, hello_reply)
        self._inner.authenticate(conn, hello_reply)
        self.mechanism = self._inner.mechanism or self.mechanism


_READ_PREFERENCES: Sequence[ServerMode] = (ReadPreference.PRIMARY, ReadPreference.PRIMARY_PREFERRED,
                                           ReadPreference.SECONDARY, ReadPreference.SECONDARY_PREFERRED,
                                           ReadPreference.NEAREST)


def _hello_summary(probe: Mapping[str, Any], description: ServerDescription) -> dict[str, Any]:
    hello = probe["hello"]
    return {
        "type": description.server_type.name,
        "set_name": hello.get("setName"),
        "primary": hello.get("primary"),
        "hosts": list(hello.get("hosts") or []),
        "min_wire_version": hello.get("minWireVersion"),
        "max_wire_version": hello.get("maxWireVersion"),
        "compression": probe.get("compression"),
        "server_compressors": list(hello.get("compression") or []),
        "logical_session_timeout_minutes": hello.get("logicalSessionTimeoutMinutes"),
        "server_version": probe.get("server_version"),
    }


def _pool_settings(options: ClientOptions) -> dict[str, Any]:
    pool = options.pool_options
    return {
        "maxPoolSize": pool.max_pool_size, "minPoolSize": pool.min_pool_size,
        "maxConnecting": pool.max_connecting, "maxIdleTimeMS": _ms(pool.max_idle_time),
        "waitQueueTimeoutMS": _ms(pool.wait_queue_timeout), "connectTimeoutMS": _ms(options.connect_timeout),
        "socketTimeoutMS": _ms(options.socket_timeout), "timeoutMS": _ms(options.timeout),
        "serverSelectionTimeoutMS": _ms(options.server_selection_timeout),
        "heartbeatFrequencyMS": _ms(options.heartbeat_frequency), "localThresholdMS": options.local_threshold_ms,
        "compressors": list(options.compressors), "loadBalanced": options.load_balanced,
        "pool_debug": pool.debug,
    }


def _ms(seconds: Optional[float]) -> Optional[float]:
    if seconds is None:
        return None
    value = seconds * 1000.0
    return int(value) if value == int(value) else value


def _credentials_summary(credentials: Optional[MongoCredential]) -> Optional[dict[str, Any]]:
    if credentials is None:
        return None
    return {"username": credentials.username, "source": credentials.source,
            "mechanism": credentials.mechanism or "DEFAULT"}  # never the password


def diagnose(uri: str, *, dns_servers: Sequence[str] = (), timeout: Optional[float] = None,
             rtt_samples: int = 3) -> dict[str, Any]:
    """The whole report (plain data); ``report["healthy"]`` and ``report["reason"]`` give the verdict."""
    resolver = _RecordingResolver(DnsResolver(list(dns_servers)) if dns_servers else default_resolver())
    report: dict[str, Any] = {"healthy": False, "reason": None, "dns": resolver.lookups}
    try:
        options = ClientOptions(uri, srv_resolver=resolver)
    except (ConfigurationError, ValueError) as exc:
        report["reason"] = f"the connection string cannot be used: {exc}"
        report["exit_status"] = EXIT_UNUSABLE
        return report
    report["srv_host"] = options.srv_host
    report["seeds"] = [format_address(seed) for seed in options.seeds]
    report["credentials"] = _credentials_summary(options.credentials)
    report["pool_settings"] = _pool_settings(options)
    settings = options.connection_settings()
    step_timeout = timeout if timeout is not None else (options.connect_timeout or DEFAULT_TIMEOUT)
    host_resolver = DnsResolver(list(dns_servers)) if dns_servers else None
    credentials = options.credentials

    def make_authenticator() -> Any:
        assert credentials is not None
        return _ReportingAuthenticator(credentials)

    description = TopologyDescription.initial(options.topology_settings())
    hosts: dict[Address, dict[str, Any]] = {}
    while len(hosts) < MAX_HOSTS:
        pending = [address for address in description.server_descriptions() if address not in hosts]
        if not pending:
            break
        for address in pending[:MAX_HOSTS - len(hosts)]:
            probe = probe_host(address, settings, timeout=step_timeout, resolver=host_resolver,
                               rtt_samples=rtt_samples,
                               make_authenticator=make_authenticator if credentials is not None else None)
            hosts[address] = probe
            if probe["ok"]:
                rtt = statistics.median(probe["rtt_ms"]) / 1000.0 if probe["rtt_ms"] else probe["hello_ms"] / 1000.0
                server = ServerDescription(address, probe["hello"], round_trip_time=rtt, min_round_trip_time=rtt)
                probe["summary"] = _hello_summary(probe, server)
            else:
                server = ServerDescription(address, error=ConnectionError(probe.get("error", "failed")))
            probe.pop("hello", None)  # raw replies hold dates and binary: the summary is what is reported
            if options.load_balanced and probe["ok"]:
                # A load-balanced topology is one LoadBalancer, every other field unset (Load Balancer spec).
                server = ServerDescription.load_balancer(address)
            description = apply_server_description(description, server)
    report["hosts"] = [hosts[address] for address in hosts]
    report["topology"] = {"type": description.topology_type.name, "set_name": description.replica_set_name,
                          "servers": {format_address(address): sd.server_type.name
                                      for address, sd in description.server_descriptions().items()}}
    selections: dict[str, Any] = {}
    configured = options.read_preference
    preferences = list(_READ_PREFERENCES)
    if all(configured != preference for preference in preferences):
        preferences.insert(0, configured)
    for preference in preferences:
        selections[_preference_name(preference)] = _select(description, preference)
    selections["writes"] = _select(description, None, is_write=True)
    report["selection"] = selections
    report["read_preference"] = _preference_name(configured)
    report["reason"] = _verdict(report, _preference_name(configured))
    report["healthy"] = report["reason"] is None
    report["exit_status"] = EXIT_HEALTHY if report["healthy"] else EXIT_UNHEALTHY
    return report


def _preference_name(preference: ServerMode) -> str:
    extra = []
    if preference.tag_sets and preference.tag_sets != [{}]:
        extra.append(f"tags={preference.tag_sets}")
    if preference.max_staleness != -1:
        extra.append(f"maxStalenessSeconds={preference.max_staleness}")
    return preference.mongos_mode if not extra else f"{preference.mongos_mode}({', '.join(extra)})"


def _select(description: TopologyDescription, preference: Optional[ServerMode], is_write: bool = False) -> Any:
    try:
        found = select_servers(description, preference, is_write=is_write)
    except ConfigurationError as exc:
        return {"error": str(exc)}
    return [format_address(server.address) for server in found]


def _verdict(report: Mapping[str, Any], configured: str) -> Optional[str]:
    """The first problem, in one line; None when healthy."""
    for host in report["hosts"]:
        if not host["ok"]:
            return f"{host['address']}: {host.get('failed_step', 'probe')} failed: {host.get('error')}"
    for host in report["hosts"]:
        auth = host.get("auth")
        if auth is not None and not auth["ok"]:
            return (f"{host['address']}: authentication failed ({auth.get('mechanism') or 'mechanism unknown'}): "
                    f"{auth.get('error')}")
    chosen = report["selection"].get(configured)
    if isinstance(chosen, dict):
        return f"read preference {configured}: {chosen['error']}"
    if not chosen:
        return f"no server matches the read preference {configured} (topology {report['topology']['type']})"
    if not report["selection"]["writes"] and report["topology"]["type"] == "ReplicaSetNoPrimary":
        return "the replica set has no primary: no server accepts writes"
    return None


# -- output ------------------------------------------------------------------------------------------------


def render(report: Mapping[str, Any]) -> str:
    """The human-readable report."""
    lines: list[str] = []
    out = lines.append
    for lookup in report.get("dns", []):
        if "error" in lookup:
            out(f"DNS {lookup['type']} {lookup['name']}: failed after {lookup['ms']:.1f} ms: {lookup['error']}")
        else:
            records = ", ".join(lookup["records"]) or "(none)"
            out(f"DNS {lookup['type']} {lookup['name']} ({lookup['ms']:.1f} ms): {records}")
    if "seeds" in report:
        out(f"Seeds: {', '.join(report['seeds'])}")
    credentials = report.get("credentials")
    if credentials:
        out(f"Credentials: user {credentials['username']!r} on {credentials['source']!r}, "
            f"mechanism {credentials['mechanism']}")
    for host in report.get("hosts", []):
        out("")
        out(f"Host {host['address']}: {'reachable' if host['ok'] else 'FAILED at ' + host.get('failed_step', '?')}")
        if "addresses" in host:
            out(f"  resolve      {host['resolve_ms']:8.1f} ms  {', '.join(host['addresses'])}")
        if "tcp_connect_ms" in host:
            out(f"  tcp connect  {host['tcp_connect_ms']:8.1f} ms")
        if "connect_ms" in host:
            out(f"  connect      {host['connect_ms']:8.1f} ms")
        tls = host.get("tls")
        if tls:
            cert = tls.get("certificate") or {}
            out(f"  tls          {tls['handshake_ms']:8.1f} ms  {tls['version']}, {tls['cipher']}")
            if cert:
                out(f"    certificate  {cert['subject']} (issuer {cert['issuer']}), expires {cert['not_after']} "
                    f"({cert['days_left']} days)")
            out(f"    ocsp         {tls['ocsp']}")
        elif host["ok"]:
            out("  tls          off")
        summary = host.get("summary")
        if summary:
            setname = f", set {summary['set_name']}" if summary["set_name"] else ""
            offered = ", ".join(summary["server_compressors"]) or "none"
            out(f"  hello        {host['hello_ms']:8.1f} ms  {summary['type']}{setname}, wire versions "
                f"{summary['min_wire_version']}-{summary['max_wire_version']}, server version "
                f"{summary['server_version'] or '?'}, compression {summary['compression'] or 'none'} "
                f"(server offers: {offered})")
        if host.get("rtt_ms"):
            out(f"  rtt samples  {', '.join(f'{sample:.1f}' for sample in host['rtt_ms'])} ms")
        auth = host.get("auth")
        if auth is not None:
            state = "ok" if auth["ok"] else f"FAILED: {auth['error']}"
            out(f"  auth         {auth['duration_ms']:8.1f} ms  {auth.get('mechanism') or '?'}: {state}")
        if not host["ok"]:
            out(f"  error        {host.get('error')}")
    topology = report.get("topology")
    if topology:
        out("")
        setname = f" (set {topology['set_name']})" if topology["set_name"] else ""
        out(f"Topology: {topology['type']}{setname}")
        for address, kind in topology["servers"].items():
            out(f"  {address}: {kind}")
        out("Server selection:")
        for name, chosen in report["selection"].items():
            shown = chosen["error"] if isinstance(chosen, dict) else (", ".join(chosen) or "(none)")
            marker = "  <- the connection string's" if name == report.get("read_preference") else ""
            out(f"  {name:<20} {shown}{marker}")
    pool = report.get("pool_settings")
    if pool:
        out("Pool settings: " + ", ".join(f"{key}={value}" for key, value in pool.items()))
    out("")
    out("HEALTHY" if report["healthy"] else f"UNHEALTHY: {report['reason']}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None, stdout: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m greenmongo doctor",
                                     description="Check a MongoDB deployment the way greenmongo connects to it.")
    parser.add_argument("uri", help="the connection string (never printed)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--dns-server", action="append", default=[], metavar="IP[:PORT]",
                        help="resolve SRV/TXT and host names with this nameserver (repeatable)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per step (default: connectTimeoutMS, else 5)")
    parser.add_argument("--rtt-samples", type=int, default=3, help="hello round trips to time per host")
    args = parser.parse_args(argv)
    try:
        report = diagnose(args.uri, dns_servers=args.dns_server, timeout=args.timeout, rtt_samples=args.rtt_samples)
    except PyMongoError as exc:  # pragma: no cover - diagnose reports what it meets; this is a bug's last resort
        report = {"healthy": False, "reason": f"{type(exc).__name__}: {exc}", "exit_status": EXIT_UNHEALTHY}
    if args.json:
        stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        stdout.write(render(report) + "\n")
    if not report["healthy"] and args.json:
        sys.stderr.write(f"UNHEALTHY: {report['reason']}\n")
    return int(report["exit_status"])
