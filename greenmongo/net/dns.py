"""Cooperative SRV and TXT lookups: dnspython builds and parses, gevent sockets carry.

dnspython's own ``dns.query``/``dns.resolver`` wait on stdlib sockets and
``selectors``, which block the whole hub unless the process is monkey-patched.
Here only ``dns.message`` (pure) is used; every wait is on a gevent socket, so
lookups are cooperative either way. UDP first, TCP (2-byte length prefix) when
the answer is truncated; each attempt has a timeout and the whole lookup a
deadline. Any failure raises ConfigurationError naming the query and the reason.

Nameservers come from the system (``/etc/resolv.conf`` via dnspython, read
once) unless given: ``DnsResolver(["127.0.0.1:5353"])`` for one lookup path, or
``configure(...)`` to change the process-wide default used by ``mongodb+srv``.

dnspython is imported when the first resolver is made (``_load_dnspython``), not with greenmongo:
only ``mongodb+srv`` needs it, and a process (a gunicorn worker) that never resolves one never pays
its ~40 ms import.
"""

from __future__ import annotations

import socket as _stdlib_socket
import struct
import time
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from gevent import socket as gsocket

from greenmongo.errors import ConfigurationError
from greenmongo.options import uri

if TYPE_CHECKING:
    import dns.message
    import dns.name
    import dns.rdatatype

Nameserver = Union[str, tuple[str, int]]

#: Seconds one nameserver gets to answer one query before the next is tried.
DEFAULT_ATTEMPT_TIMEOUT = 2.0
#: Seconds a whole lookup may take when the caller gives no timeout.
DEFAULT_LIFETIME = 20.0
#: EDNS(0) UDP payload size we advertise (the DNS Flag Day 2020 recommendation).
EDNS_PAYLOAD = 1232
_LENGTH = struct.Struct("!H")


def _load_dnspython() -> None:
    """Import every dnspython module a lookup uses, at once.

    Called where a resolver is made (MongoClient parsing a ``mongodb+srv`` URI, ``configure``,
    ``DnsResolver(...)``), so a lookup running in a greenlet never imports: dnspython imports rdata
    classes on first use, and dns.resolver (only its resolv.conf reader is used) takes ~10 ms, either of
    which would stall the hub mid-lookup. The imports inside the functions below then only read
    ``sys.modules``.
    """
    import dns.exception  # noqa: F401
    import dns.flags  # noqa: F401
    import dns.message  # noqa: F401
    import dns.name  # noqa: F401
    import dns.rcode  # noqa: F401
    import dns.rdatatype  # noqa: F401
    import dns.rdtypes.ANY.TXT  # noqa: F401
    import dns.rdtypes.IN.SRV  # noqa: F401
    import dns.resolver  # noqa: F401


class _Unusable(Exception):
    """This nameserver gave no usable answer to this query: try the next one."""


def _parse_nameserver(entry: Nameserver) -> tuple[str, int]:
    """An IP address and port: a nameserver named by hostname would need DNS to be found."""
    import ipaddress

    try:
        if isinstance(entry, tuple):
            host, port = str(entry[0]), int(entry[1])
        else:
            text = str(entry).strip()
            if text.startswith("["):  # [v6]:port
                host, _, rest = text[1:].partition("]")
                port = int(rest[1:]) if rest.startswith(":") else 53
            elif text.count(":") == 1:  # v4:port
                host, _, port_text = text.partition(":")
                port = int(port_text)
            else:
                host, port = text, 53
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigurationError(f"Invalid DNS nameserver {entry!r}: expected an IP address with an "
                                 "optional port") from None
    if not 0 < port <= 65535:
        raise ConfigurationError(f"Invalid DNS nameserver port in {entry!r}")
    return host, port


_system_nameservers: Optional[list[tuple[str, int]]] = None


def system_nameservers() -> list[tuple[str, int]]:
    """The host's resolvers (read once: a small local file, then cached)."""
    global _system_nameservers
    if _system_nameservers is None:
        _load_dnspython()
        import dns.exception
        import dns.resolver

        try:
            config = dns.resolver.Resolver(configure=True)
        except dns.exception.DNSException as exc:
            raise ConfigurationError(f"Cannot read the system DNS configuration: {exc}") from exc
        port = getattr(config, "port", 53)
        _system_nameservers = [(str(ns), port) for ns in config.nameservers]
    return list(_system_nameservers)


class DnsResolver:
    """Resolves SRV and TXT names against a list of nameservers, cooperatively.

    ``nameservers``: addresses as ``"ip"``, ``"ip:port"``, ``"[v6]:port"`` or
    ``(ip, port)``; None means the system's. ``attempt_timeout`` bounds one
    query to one server; ``lifetime`` bounds a whole lookup when the caller
    passes no timeout.
    """

    def __init__(self, nameservers: Optional[Sequence[Nameserver]] = None, *,
                 attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT, lifetime: float = DEFAULT_LIFETIME) -> None:
        _load_dnspython()
        self._nameservers = [_parse_nameserver(ns) for ns in nameservers] if nameservers is not None else None
        if self._nameservers is not None and not self._nameservers:
            raise ConfigurationError("DnsResolver needs at least one nameserver")
        self.attempt_timeout = attempt_timeout
        self.lifetime = lifetime

    @property
    def nameservers(self) -> list[tuple[str, int]]:
        return list(self._nameservers) if self._nameservers is not None else system_nameservers()

    def __repr__(self) -> str:
        return f"DnsResolver(nameservers={self._nameservers!r}, attempt_timeout={self.attempt_timeout})"

    # -- public lookups ----------------------------------------------------------

    def resolve_srv(self, name: str, timeout: Optional[float] = None) -> list[tuple[str, int]]:
        """(target, port) of each SRV record at ``name``; targets lower-cased, without the final dot."""
        import dns.rdatatype

        answer = self.query(name, dns.rdatatype.SRV, timeout)
        if answer is None:
            raise ConfigurationError(f"No SRV records found for {name!r} (the name does not exist)")
        records = [(rdata.target.to_text(omit_final_dot=True).lower(), int(rdata.port)) for rdata in answer]
        if not records:
            raise ConfigurationError(f"No SRV records found for {name!r}")
        return records

    def resolve_txt(self, name: str, timeout: Optional[float] = None) -> list[str]:
        """One string per TXT record (its character-strings concatenated in order); [] when there are none."""
        import dns.rdatatype

        answer = self.query(name, dns.rdatatype.TXT, timeout)
        texts = []
        for rdata in answer or ():
            try:
                texts.append(b"".join(rdata.strings).decode("utf-8"))
            except UnicodeDecodeError:
                raise ConfigurationError(f"The TXT record for {name!r} is not valid UTF-8") from None
        return texts

    # -- the protocol ------------------------------------------------------------

    def query(self, name: str, rdtype: dns.rdatatype.RdataType,
              timeout: Optional[float] = None) -> Optional[list[Any]]:
        """The rdatas of ``rdtype`` at ``name`` ([] for no data), or None when the name does not exist."""
        import dns.exception
        import dns.name
        import dns.rcode
        import dns.rdatatype

        try:
            qname = dns.name.from_text(name)  # absolute: search domains never apply
        except dns.exception.DNSException as exc:
            raise ConfigurationError(f"Invalid DNS name {name!r}: {exc}") from None
        deadline = time.monotonic() + (timeout if timeout else self.lifetime)
        problems: list[str] = []
        servers = self.nameservers
        while True:
            timed_out = False
            for server in servers:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    response = self._ask(server, qname, rdtype, min(remaining, self.attempt_timeout))
                except _Unusable as exc:
                    problems.append(f"{server[0]}:{server[1]}: {exc}")
                    continue
                except (_stdlib_socket.timeout, TimeoutError):
                    timed_out = True
                    problems.append(f"{server[0]}:{server[1]}: timed out")
                    continue
                except OSError as exc:
                    problems.append(f"{server[0]}:{server[1]}: {exc.strerror or exc}")
                    continue
                rcode = response.rcode()
                if rcode == dns.rcode.NXDOMAIN:
                    return None
                answers: list[Any] = []
                for rrset in response.answer:
                    if rrset.rdtype == rdtype and rrset.name == qname:
                        answers.extend(rrset)
                return answers
            # Servers that refuse or fail will do so again; only timeouts are worth another round.
            if not timed_out or deadline - time.monotonic() <= 0:
                break
        reason = "; ".join(dict.fromkeys(problems)) or "the lookup timed out"
        raise ConfigurationError(f"DNS query for {dns.rdatatype.to_text(rdtype)} {name!r} failed: {reason}")

    def _ask(self, server: tuple[str, int], qname: dns.name.Name, rdtype: dns.rdatatype.RdataType,
             timeout: float) -> dns.message.Message:
        import dns.flags
        import dns.message
        import dns.rcode

        query = dns.message.make_query(qname, rdtype, use_edns=0, payload=EDNS_PAYLOAD)
        response = self._udp(server, query, timeout)
        if response.flags & dns.flags.TC:
            response = self._tcp(server, query, timeout)
        rcode = response.rcode()
        if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
            raise _Unusable(dns.rcode.to_text(rcode))
        return response

    @staticmethod
    def _family(host: str) -> int:
        return gsocket.AF_INET6 if ":" in host else gsocket.AF_INET

    def _udp(self, server: tuple[str, int], query: dns.message.Message, timeout: float) -> dns.message.Message:
        deadline = time.monotonic() + timeout
        sock = gsocket.socket(self._family(server[0]), gsocket.SOCK_DGRAM)
        try:
            sock.connect(server)  # the kernel then drops datagrams from anyone else
            sock.send(query.to_wire())
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _stdlib_socket.timeout("timed out")
                sock.settimeout(remaining)
                wire = sock.recv(65535)
                response = self._parse(wire, query)
                if response is not None:
                    return response
        finally:
            sock.close()

    def _tcp(self, server: tuple[str, int], query: dns.message.Message, timeout: float) -> dns.message.Message:
        deadline = time.monotonic() + timeout
        # Not gevent's create_connection: it would send even an IP literal through getaddrinfo.
        sock = gsocket.socket(self._family(server[0]), gsocket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(server)
            wire = query.to_wire()
            sock.sendall(_LENGTH.pack(len(wire)) + wire)
            (length,) = _LENGTH.unpack(self._recv_exactly(sock, 2, deadline))
            response = self._parse(self._recv_exactly(sock, length, deadline), query)
            if response is None:
                raise _Unusable("TCP answer does not match the query")
            return response
        finally:
            sock.close()

    @staticmethod
    def _recv_exactly(sock: gsocket.socket, count: int, deadline: float) -> bytes:
        chunks, needed = [], count
        while needed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _stdlib_socket.timeout("timed out")
            sock.settimeout(remaining)
            chunk = sock.recv(needed)
            if not chunk:
                raise _Unusable("connection closed mid-answer")
            chunks.append(chunk)
            needed -= len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _parse(wire: bytes, query: dns.message.Message) -> Optional[dns.message.Message]:
        """The response if ``wire`` answers ``query``; None for garbage or someone else's answer."""
        import dns.message

        try:
            response = dns.message.from_wire(wire, ignore_trailing=True)
        except Exception:  # whatever arrived, it is not an answer we can use
            return None
        return response if query.is_response(response) else None


_default: Optional[DnsResolver] = None


def default_resolver() -> DnsResolver:
    """The resolver ``mongodb+srv`` URIs use unless one is passed in."""
    global _default
    if _default is None:
        _default = DnsResolver()
    return _default


def configure(nameservers: Optional[Sequence[Nameserver]] = None, *,
              attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT, lifetime: float = DEFAULT_LIFETIME) -> DnsResolver:
    """Replace the process-wide default resolver (None nameservers: back to the system's)."""
    global _default
    _default = DnsResolver(nameservers, attempt_timeout=attempt_timeout, lifetime=lifetime)
    return _default


__all__ = ["DEFAULT_ATTEMPT_TIMEOUT", "DEFAULT_LIFETIME", "DnsResolver", "configure", "default_resolver",
           "system_nameservers"]

uri.set_default_srv_resolver(default_resolver)  # options/ parses mongodb+srv URIs without importing net/
