"""A small authoritative DNS server on loopback, for SRV/TXT seedlist tests.

It serves the ``test.build.10gen.cc`` records that the Initial DNS Seedlist
Discovery tests README lists, plus a few of our own under ``greenmongo.test``
(a reserved TLD) to exercise the resolver: a large answer that needs TCP, a
slow answer, one that never comes, and SERVFAIL. UDP and TCP on the same port.

Run it as a subprocess (``LoopbackDnsServer().start()``) so the process under
test shares nothing with it: a resolver that blocked its hub would still get
answers, and only the hub monitor would notice. ``python -m tests.servers.dns``
(from the repository root) prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from typing import Optional

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IN_ZONES = ("10gen.cc.", "greenmongo.test.")
SLOW_SECONDS = 0.05

# (owner, type) -> rdata texts. Owners are absolute; TTLs do not matter here.
_SPEC_RECORDS = {
    ("localhost.test.build.10gen.cc.", "A"): ["127.0.0.1"],
    ("localhost.sub.test.build.10gen.cc.", "A"): ["127.0.0.1"],
    ("_mongodb._tcp.test1.test.build.10gen.cc.", "SRV"): [
        "0 0 27017 localhost.test.build.10gen.cc.", "0 0 27018 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test2.test.build.10gen.cc.", "SRV"): [
        "0 0 27018 localhost.test.build.10gen.cc.", "0 0 27019 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test3.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test5.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test6.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test7.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test8.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test10.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test11.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test12.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.build.10gen.cc."],
    ("_mongodb._tcp.test13.test.build.10gen.cc.", "SRV"): ["0 0 27017 test.build.10gen.cc."],
    ("_mongodb._tcp.test14.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.not-test.build.10gen.cc."],
    ("_mongodb._tcp.test15.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.not-build.10gen.cc."],
    ("_mongodb._tcp.test16.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.not-10gen.cc."],
    ("_mongodb._tcp.test17.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.not-cc."],
    ("_mongodb._tcp.test18.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.sub.test.build.10gen.cc."],
    ("_mongodb._tcp.test19.test.build.10gen.cc.", "SRV"): [
        "0 0 27017 localhost.evil.build.10gen.cc.", "0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test20.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test21.test.build.10gen.cc.", "SRV"): ["0 0 27017 localhost.test.build.10gen.cc."],
    # The README's table lists only the 27017 target, but srv-service-name.json expects both seeds
    # (as the live test.build.10gen.cc zone serves them), so both are here.
    ("_customname._tcp.test22.test.build.10gen.cc.", "SRV"): [
        "0 0 27017 localhost.test.build.10gen.cc.", "0 0 27018 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test23.test.build.10gen.cc.", "SRV"): ["0 0 8000 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.test24.test.build.10gen.cc.", "SRV"): ["0 0 8000 localhost.test.build.10gen.cc."],
    ("_mongodb._tcp.build.10gen.cc.", "SRV"): ["0 0 27017 build.10gen.cc."],
    ("_mongodb._tcp.test.build.10gen.cc.", "SRV"): ["0 0 27017 test.build.10gen.cc."],
    ("test5.test.build.10gen.cc.", "TXT"): ['"replicaSet=repl0&authSource=thisDB"'],
    ("test6.test.build.10gen.cc.", "TXT"): ['"replicaSet=repl0"', '"authSource=otherDB"'],
    ("test7.test.build.10gen.cc.", "TXT"): ['"ssl=false"'],
    ("test8.test.build.10gen.cc.", "TXT"): ['"authSource"'],
    ("test10.test.build.10gen.cc.", "TXT"): ['"socketTimeoutMS=500"'],
    ("test11.test.build.10gen.cc.", "TXT"): ['"replicaS" "et=rep" "l0"'],
    ("test20.test.build.10gen.cc.", "TXT"): ['"loadBalanced=true"'],
    ("test21.test.build.10gen.cc.", "TXT"): ['"loadBalanced=false"'],
    ("test24.test.build.10gen.cc.", "TXT"): ['"loadBalanced=true"'],
}

#: Names under greenmongo.test: the behaviour is in the first label of the SRV owner's host.
#: Both answers exceed the 1232-byte EDNS payload, so UDP comes back truncated and TCP is needed.
MANY_HOSTS = 30     # ~1.5 KB: a large but realistic seedlist
HUGE_HOSTS = 400    # ~19 KB: far past anything real
_OWN_RECORDS = {
    ("_mongodb._tcp.many.greenmongo.test.", "SRV"): [
        f"0 0 {27000 + i} host{i:03d}.many.greenmongo.test." for i in range(MANY_HOSTS)],
    ("_mongodb._tcp.huge.greenmongo.test.", "SRV"): [
        f"0 0 {27000 + i} host{i:03d}.huge.greenmongo.test." for i in range(HUGE_HOSTS)],
    ("_mongodb._tcp.slow.greenmongo.test.", "SRV"): ["0 0 27017 db.slow.greenmongo.test."],
    ("_mongodb._tcp.stall.greenmongo.test.", "SRV"): ["0 0 27017 db.stall.greenmongo.test."],
    ("_mongodb._tcp.servfail.greenmongo.test.", "SRV"): ["0 0 27017 db.servfail.greenmongo.test."],
    ("_mongodb._tcp.three.greenmongo.test.", "SRV"): [
        "0 0 27017 a.three.greenmongo.test.", "0 0 27018 b.three.greenmongo.test.",
        "0 0 27019 c.three.greenmongo.test."],
    ("three.greenmongo.test.", "TXT"): ['"authSource=admin&replicaSet=rs%30"'],
}


def _build_records(extra=None):
    import dns.name
    import dns.rdataclass
    import dns.rdatatype
    import dns.rrset

    records = {}
    for (owner, rdtype), texts in {**_SPEC_RECORDS, **_OWN_RECORDS, **(extra or {})}.items():
        name = dns.name.from_text(owner)
        records[(name, dns.rdatatype.from_text(rdtype))] = dns.rrset.from_text_list(
            name, 86400, dns.rdataclass.IN, dns.rdatatype.from_text(rdtype), texts)
    return records


class _Authority:
    """Answers one query message: authoritative for IN_ZONES, REFUSED elsewhere."""

    def __init__(self, extra=None) -> None:
        import dns.name

        self.records = _build_records(extra)
        self.names = {name for name, _ in self.records}
        self.zones = [dns.name.from_text(zone) for zone in IN_ZONES]

    def behaviour(self, qname) -> str:
        text = qname.to_text().lower()
        for special in ("slow", "stall", "servfail"):
            if f".{special}.greenmongo.test." in text:
                return special
        return "normal"

    def respond(self, wire: bytes, max_size: int):
        """(response wire or None to stay silent, delay seconds)."""
        import dns.exception
        import dns.flags
        import dns.message
        import dns.rcode

        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None, 0.0
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        if not query.question:
            response.set_rcode(dns.rcode.FORMERR)
            return response.to_wire(), 0.0
        question = query.question[0]
        qname, rdtype = question.name, question.rdtype
        behaviour = self.behaviour(qname)
        if behaviour == "stall":
            return None, 0.0
        if behaviour == "servfail":
            response.set_rcode(dns.rcode.SERVFAIL)
            return response.to_wire(), 0.0
        if not any(qname.is_subdomain(zone) for zone in self.zones):
            response.set_rcode(dns.rcode.REFUSED)
        elif (qname, rdtype) in self.records:
            response.answer.append(self.records[(qname, rdtype)])
        elif not any(name.is_subdomain(qname) for name in self.names):
            response.set_rcode(dns.rcode.NXDOMAIN)
        delay = SLOW_SECONDS if behaviour == "slow" else 0.0
        try:
            return response.to_wire(max_size=max_size), delay
        except dns.exception.TooBig:
            truncated = dns.message.make_response(query)
            truncated.flags |= dns.flags.AA | dns.flags.TC
            return truncated.to_wire(), delay


def serve(host: str = "127.0.0.1", port: int = 0, ready=None, extra=None) -> None:
    """Serve UDP and TCP on (host, port) forever with gevent; ``ready(port)`` once listening. ``extra``:
    more records, {(owner, type): [rdata text, ...]}, owners absolute and inside IN_ZONES."""
    import gevent
    from gevent import socket

    authority = _Authority(extra)
    for attempt in range(50):  # UDP picks the port; TCP must get the same one
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((host, port))
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            tcp.bind((host, udp.getsockname()[1]))
            break
        except OSError:
            udp.close()
            tcp.close()
            if port or attempt == 49:
                raise
    port = udp.getsockname()[1]
    tcp.listen(128)

    def answer_udp(wire: bytes, peer) -> None:
        import dns.message

        try:
            payload = dns.message.from_wire(wire).payload
        except Exception:
            payload = 512
        reply, delay = authority.respond(wire, max(512, payload))
        if reply is None:
            return
        if delay:
            gevent.sleep(delay)
        udp.sendto(reply, peer)

    def udp_loop() -> None:
        while True:
            wire, peer = udp.recvfrom(65535)
            gevent.spawn(answer_udp, wire, peer)

    def answer_tcp(conn) -> None:
        try:
            while True:
                header = _read(conn, 2)
                if header is None:
                    return
                wire = _read(conn, int.from_bytes(header, "big"))
                if wire is None:
                    return
                reply, delay = authority.respond(wire, 65535)
                if reply is None:
                    continue
                if delay:
                    gevent.sleep(delay)
                conn.sendall(len(reply).to_bytes(2, "big") + reply)
        finally:
            conn.close()

    def tcp_loop() -> None:
        while True:
            conn, _ = tcp.accept()
            gevent.spawn(answer_tcp, conn)

    loops = [gevent.spawn(udp_loop), gevent.spawn(tcp_loop)]
    if ready is not None:
        ready(port)
    gevent.joinall(loops, raise_error=True)


def _read(conn, count: int) -> Optional[bytes]:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class LoopbackDnsServer:
    """The server in its own process; ``address`` is ("127.0.0.1", port) once started."""

    def __init__(self, host: str = "127.0.0.1", extra_records=None) -> None:
        """``extra_records``: {(owner, type): [rdata text, ...]} served besides the fixed ones (a test's
        own SRV record pointing at its server's port, say)."""
        self.host = host
        self.extra_records = dict(extra_records or {})
        self.port: Optional[int] = None
        self._process: Optional[subprocess.Popen] = None

    @property
    def address(self) -> tuple[str, int]:
        assert self.port is not None, "not started"
        return self.host, self.port

    def start(self) -> "LoopbackDnsServer":
        # As a module from the repository root: run as a script, this file would shadow dnspython.
        records = [arg for (owner, rdtype), texts in self.extra_records.items() for text in texts
                   for arg in ("--record", owner, rdtype, text)]
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.servers.dns", "--host", self.host, *records], cwd=_REPO_ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._process.stdout.readline()  # test set-up: blocking is fine here
        if not line.startswith("PORT "):
            self._process.kill()
            error = self._process.stderr.read()
            self.stop()
            raise RuntimeError(f"DNS test server did not start: {line!r} {error}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> "LoopbackDnsServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", nargs=3, action="append", default=[], metavar=("OWNER", "TYPE", "RDATA"),
                        help="one more record (repeatable)")
    args = parser.parse_args()
    extra: dict = {}
    for owner, rdtype, text in args.record:
        extra.setdefault((owner, rdtype), []).append(text)

    def ready(port: int) -> None:
        print(f"PORT {port}", flush=True)

    serve(args.host, args.port, ready, extra)


if __name__ == "__main__":
    main()
