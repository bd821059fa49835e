"""SOCKS5 (RFC 1928/1929) through a tiny in-test proxy that relays to the scripted server."""

from __future__ import annotations

import ipaddress
import struct

import gevent
import pytest
from gevent.server import StreamServer

from greenmongo.errors import AutoReconnect, NetworkTimeout
from greenmongo.net import socks5
from greenmongo.net.handshake import open_connection
from greenmongo.options.connection_settings import ConnectionSettings, ProxySettings, TlsSettings
from tests.servers.scripted import ScriptedServer
from tests.servers.secantus import free_port
from tests.servers.tls_certs import make_ca, make_cert, server_context

# -- the byte builders -----------------------------------------------------------


def test_greetings() -> None:
    assert socks5.greeting(False) == b"\x05\x01\x00"
    assert socks5.greeting(True) == b"\x05\x02\x00\x02"


def test_password_request() -> None:
    assert socks5.password_request("user", "pw") == b"\x01\x04user\x02pw"
    with pytest.raises(AutoReconnect):
        socks5.password_request("u" * 256, "pw")


@pytest.mark.parametrize("host, expected", [
    ("db.example.com", b"\x05\x01\x00\x03\x0edb.example.com\x69\x87"),
    ("127.0.0.1", b"\x05\x01\x00\x01\x7f\x00\x00\x01\x69\x87"),
    ("::1", b"\x05\x01\x00\x04" + b"\x00" * 15 + b"\x01\x69\x87"),
    ("[::1]", b"\x05\x01\x00\x04" + b"\x00" * 15 + b"\x01\x69\x87"),
])
def test_connect_request(host: str, expected: bytes) -> None:
    assert socks5.connect_request(host, 27015) == expected


# -- a proxy ----------------------------------------------------------------------


def _read(sock, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


class Socks5Proxy:
    """Speaks just enough SOCKS5; resolves names only through ``routes`` (never DNS)."""

    def __init__(self, routes, *, credentials=None, refuse_with: int = 0, accept_methods=None):
        self.routes = routes
        self.credentials = credentials
        self.refuse_with = refuse_with
        self.accept_methods = accept_methods
        self.requests = []  # (offered methods, address type, host, port)
        self.server = StreamServer(("127.0.0.1", 0), self._handle)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(timeout=1)

    @property
    def settings(self):
        username, password = self.credentials or (None, None)
        return ProxySettings("127.0.0.1", self.server.address[1], username, password)

    def _handle(self, client, _peer):
        upstream = None
        try:
            version, count = _read(client, 2)
            methods = list(_read(client, count))
            wanted = socks5.METHOD_USERNAME_PASSWORD if self.credentials else socks5.METHOD_NO_AUTH
            if self.accept_methods is not None:
                wanted = self.accept_methods
            if wanted not in methods:
                client.sendall(b"\x05\xff")
                return
            client.sendall(bytes([5, wanted]))
            if wanted == socks5.METHOD_USERNAME_PASSWORD:
                _, user_length = _read(client, 2)
                user = _read(client, user_length).decode()
                (password_length,) = _read(client, 1)
                password = _read(client, password_length).decode()
                ok = (user, password) == self.credentials
                client.sendall(b"\x01" + (b"\x00" if ok else b"\x01"))
                if not ok:
                    return
            _, command, _, address_type = _read(client, 4)
            if address_type == socks5.ATYP_DOMAIN:
                (length,) = _read(client, 1)
                host = _read(client, length).decode()
            elif address_type == socks5.ATYP_IPV4:
                host = str(ipaddress.ip_address(_read(client, 4)))
            else:
                host = str(ipaddress.ip_address(_read(client, 16)))
            (port,) = struct.unpack(">H", _read(client, 2))
            self.requests.append((methods, address_type, host, port))
            target = self.routes.get((host, port))
            if self.refuse_with or target is None:
                client.sendall(bytes([5, self.refuse_with or 4, 0, 1]) + b"\x00" * 6)
                return
            upstream = gevent.socket.create_connection(target)
            client.sendall(b"\x05\x00\x00\x01" + bytes(4) + b"\x00\x00")
            pump = gevent.spawn(self._pump, upstream, client)
            self._pump(client, upstream)
            pump.kill()
        except (OSError, ConnectionError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream.close()
            client.close()

    @staticmethod
    def _pump(source, destination):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    return
                destination.sendall(data)
        except OSError:
            return


HIDDEN = "mongo.internal.invalid"  # resolvable only by the proxy: proves we never resolve it ourselves


@pytest.fixture
def mongod():
    with ScriptedServer() as server:
        yield server


def settings_for(proxy, **extra):
    return ConnectionSettings(proxy=proxy.settings, connect_timeout=2, socket_timeout=2, **extra)


def test_hostname_is_sent_unresolved(mongod) -> None:
    with Socks5Proxy({(HIDDEN, 27017): mongod.address}) as proxy:
        with open_connection((HIDDEN, 27017), settings_for(proxy)) as conn:
            assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
        (methods, address_type, host, port), = proxy.requests
    assert methods == [socks5.METHOD_NO_AUTH]
    assert (address_type, host, port) == (socks5.ATYP_DOMAIN, HIDDEN, 27017)
    assert [request.name for request in mongod.requests] == ["isMaster", "ping"]


def test_ip_literal_destination(mongod) -> None:
    with Socks5Proxy({("127.0.0.1", 27017): mongod.address}) as proxy:
        with open_connection(("127.0.0.1", 27017), settings_for(proxy)) as conn:
            conn.command("admin", {"ping": 1})
        assert proxy.requests[0][1] == socks5.ATYP_IPV4


def test_username_password(mongod) -> None:
    with Socks5Proxy({(HIDDEN, 1): mongod.address}, credentials=("alice", "s3cret")) as proxy:
        with open_connection((HIDDEN, 1), settings_for(proxy)) as conn:
            conn.command("admin", {"ping": 1})
        assert proxy.requests[0][0] == [socks5.METHOD_NO_AUTH, socks5.METHOD_USERNAME_PASSWORD]


def test_wrong_password_is_a_network_error(mongod) -> None:
    with Socks5Proxy({(HIDDEN, 1): mongod.address}, credentials=("alice", "s3cret")) as proxy:
        wrong = ProxySettings("127.0.0.1", proxy.server.address[1], "alice", "nope")
        with pytest.raises(AutoReconnect, match="rejected the username/password"):
            open_connection((HIDDEN, 1), ConnectionSettings(proxy=wrong, connect_timeout=2))


def test_proxy_wants_auth_we_do_not_have(mongod) -> None:
    with Socks5Proxy({(HIDDEN, 1): mongod.address}, accept_methods=socks5.METHOD_USERNAME_PASSWORD) as proxy:
        no_auth = ProxySettings("127.0.0.1", proxy.server.address[1])
        with pytest.raises(AutoReconnect, match="none of the offered"):
            open_connection((HIDDEN, 1), ConnectionSettings(proxy=no_auth, connect_timeout=2))


def test_proxy_cannot_reach_destination(mongod) -> None:
    with Socks5Proxy({}, refuse_with=5) as proxy:
        with pytest.raises(AutoReconnect, match="connection refused") as info:
            open_connection((HIDDEN, 1), settings_for(proxy))
        assert f"{HIDDEN}:1" in str(info.value)


def test_proxy_not_listening() -> None:
    dead = ProxySettings("127.0.0.1", free_port())
    with pytest.raises(AutoReconnect):
        open_connection((HIDDEN, 1), ConnectionSettings(proxy=dead, connect_timeout=2))


def test_silent_proxy_times_out() -> None:
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        silent = ProxySettings("127.0.0.1", listener.getsockname()[1])
        with pytest.raises(NetworkTimeout):
            open_connection((HIDDEN, 1), ConnectionSettings(proxy=silent, connect_timeout=0.3))
    finally:
        listener.close()


def test_tls_through_the_proxy_checks_the_destination_name(tmp_path) -> None:
    ca = make_ca()
    ca_file = ca.write(tmp_path, "ca")[0]
    cert = make_cert(ca, HIDDEN, dns_names=[HIDDEN])
    seen_sni = []

    context = server_context(cert, ca)
    context.set_tlsext_servername_callback(lambda connection: seen_sni.append(connection.get_servername()))
    with ScriptedServer(tls_context=context) as mongod:
        with Socks5Proxy({(HIDDEN, 27017): mongod.address}) as proxy:
            settings = settings_for(proxy, tls=TlsSettings(ca_file=ca_file))
            with open_connection((HIDDEN, 27017), settings) as conn:
                assert conn.command("admin", {"ping": 1}) == {"ok": 1.0}
    assert seen_sni == [HIDDEN.encode()]
