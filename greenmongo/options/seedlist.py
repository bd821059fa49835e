"""Initial DNS Seedlist Discovery without the DNS: what SRV and TXT answers mean.

The resolver (``greenmongo.net.dns`` by default) only fetches records; this
module checks them: SRV targets must share the SRV name's parent domain, at
most one TXT record may exist and it may only set authSource, replicaSet and
loadBalanced, and ``srvMaxHosts`` picks hosts at random. Every failure is a
ConfigurationError that says which name and why.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Protocol, Sequence, TypeVar
from urllib.parse import unquote

from greenmongo.errors import ConfigurationError
from greenmongo.options.validators import TXT_ALLOWED

Address = tuple[str, int]
_Host = TypeVar("_Host", bound=tuple[str, Optional[int]])  # SRV targets, or seeds whose port may be None
_R = TypeVar("_R")


class SrvResolver(Protocol):
    """What seedlist discovery needs from DNS; both calls raise ConfigurationError on failure."""

    def resolve_srv(self, name: str, timeout: Optional[float] = None) -> list[Address]:
        """(target, port) of every SRV record at ``name``; an error if there are none."""

    def resolve_txt(self, name: str, timeout: Optional[float] = None) -> list[str]:
        """One string per TXT record at ``name`` (its character-strings joined); [] if none."""


@dataclass(frozen=True)
class Seedlist:
    """What DNS said: seed hosts (all of them, before srvMaxHosts) and raw TXT option pairs."""

    hosts: tuple[Address, ...]
    txt_options: tuple[tuple[str, str], ...]


def normalize_hostname(name: str) -> str:
    """DNS names compare case-insensitively and may end with the root's dot."""
    return name.rstrip(".").lower()


def srv_domain(hostname: str) -> str:
    """The part SRV targets must share: the hostname minus its first label when it has 3+ labels."""
    labels = hostname.split(".")
    return ".".join(labels[1:]) if len(labels) >= 3 else hostname


def check_srv_hostname(hostname: str) -> str:
    """A ``mongodb+srv`` host must be one DNS name: no port, no IP literal, no empty labels.

    The rejected text is not quoted: it is the connection string's, where a misplaced password may sit.
    """
    name = normalize_hostname(hostname)
    if not name or any(not label for label in name.split(".")):
        raise ConfigurationError("Invalid mongodb+srv hostname: empty label")
    if name.startswith("[") or name.replace(".", "").isdigit():
        raise ConfigurationError("mongodb+srv needs a DNS hostname, not an IP address")
    return name


def srv_query_name(hostname: str, service_name: str = "mongodb") -> str:
    return f"_{service_name}._tcp.{hostname}"


def verify_srv_targets(hostname: str, records: Sequence[Address]) -> list[Address]:
    """Normalize SRV targets and reject any outside the SRV name's domain (the spec's security check).

    A target must end with ``"." + domain``; for a hostname of one or two
    labels the domain is the whole hostname, so the target needs an extra label.
    """
    domain = srv_domain(hostname)
    hosts: list[Address] = []
    for target, port in records:
        host = normalize_hostname(target)
        if not host.endswith("." + domain):
            raise ConfigurationError(
                f"SRV record target {host!r} for {hostname!r} is not in the domain {domain!r}")
        if not 0 < port <= 65535:
            raise ConfigurationError(f"SRV record target {host!r} has invalid port {port}")
        if (host, port) not in hosts:
            hosts.append((host, port))
    return hosts


def parse_txt_records(hostname: str, records: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The option pairs of the single TXT record (if any); values percent-decoded like a URI's."""
    if not records:
        return ()
    if len(records) > 1:
        raise ConfigurationError(f"Only one TXT record is allowed for {hostname!r}, found {len(records)}")
    pairs = []
    for item in records[0].split("&"):
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ConfigurationError(f"Malformed option {item!r} in the TXT record for {hostname!r}: "
                                     "expected key=value")
        if key.lower() not in TXT_ALLOWED:
            raise ConfigurationError(f"Option {key!r} is not allowed in a TXT record (only authSource, "
                                     f"replicaSet and loadBalanced are), found for {hostname!r}")
        pairs.append((unquote(key), unquote(value)))
    return tuple(pairs)


def choose_hosts(hosts: Sequence[_Host], srv_max_hosts: Optional[int],
                 rng: Optional[random.Random] = None) -> list[_Host]:
    """All hosts, or ``srv_max_hosts`` of them picked uniformly at random (Fisher-Yates)."""
    chosen = list(hosts)
    if not srv_max_hosts or srv_max_hosts >= len(chosen):
        return chosen
    (rng or random).shuffle(chosen)
    return chosen[:srv_max_hosts]


def discover(hostname: str, service_name: str, resolver: SrvResolver,
             timeout: Optional[float] = None) -> Seedlist:
    """Query SRV then TXT for ``hostname`` and check both answers."""
    name = check_srv_hostname(hostname)
    query = srv_query_name(name, service_name)
    records = _call(resolver.resolve_srv, query, timeout)
    if not records:
        raise ConfigurationError(f"No SRV records found for {query!r}")
    hosts = verify_srv_targets(name, records)
    txt = _call(resolver.resolve_txt, name, timeout)
    return Seedlist(tuple(hosts), parse_txt_records(name, txt))


def _call(method: Callable[[str, Optional[float]], Iterable[_R]], name: str, timeout: Optional[float]) -> list[_R]:
    try:
        return list(method(name, timeout))
    except ConfigurationError:
        raise
    except Exception as exc:  # a custom resolver's own errors: still "this URI cannot be used"
        raise ConfigurationError(f"DNS lookup of {name!r} failed: {exc}") from exc


__all__ = ["Seedlist", "SrvResolver", "check_srv_hostname", "choose_hosts", "discover", "normalize_hostname",
           "parse_txt_records", "srv_domain", "srv_query_name", "verify_srv_targets"]
