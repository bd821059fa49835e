"""TLS on pyOpenSSL over gevent sockets, driven non-blocking so the hub never stalls.

The gevent socket's file descriptor is already non-blocking at the OS level,
so OpenSSL answers "want read"/"want write" instead of blocking; each time it
does we park this greenlet on an I/O watcher that this socket owns. Owning the
watchers matters: ``close()`` cancels them (waking any parked greenlet with
EBADF) before the descriptor is released, and no OpenSSL call is made after
close. Waiting on the bare descriptor number instead would let a parked
greenlet wake up on whatever new socket reuses that number, and OpenSSL would
then read bytes off a stranger's connection.

Hostname verification is done here (RFC 6125 rules: SAN DNS names
with a left-most wildcard label, SAN IP addresses; no CN fallback), because
pyOpenSSL has no public API for OpenSSL's own.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket as _socket
import ssl as _ssl_paths
import time
from typing import Any, Callable, Optional

import gevent
from cryptography import x509
from gevent.socket import wait
from OpenSSL import SSL

from greenmongo.errors import AutoReconnect, ConfigurationError, NetworkTimeout
from greenmongo.net import ocsp
from greenmongo.options.connection_settings import TlsSettings

# -- context -----------------------------------------------------------------

class TlsContext:
    """A pyOpenSSL client context plus what OCSP checks need (the trusted CA certificates)."""

    def __init__(self, settings: TlsSettings, context: SSL.Context, trusted: list[x509.Certificate]) -> None:
        self.settings = settings
        self.context = context
        self.trusted = trusted


def _load_private_key(path: str, password: Optional[str]):
    """The key from a PEM file (optionally encrypted), as pyOpenSSL wants it."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    with open(path, "rb") as handle:
        data = handle.read()
    try:
        key = load_pem_private_key(data, password.encode("utf-8") if password is not None else None)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"invalid TLS configuration: cannot load the private key in the "
                                 f"tlsCertificateKeyFile file: {exc}") from None
    return key


def _read_pem_certificates(path: str) -> list[x509.Certificate]:
    try:
        with open(path, "rb") as handle:
            return x509.load_pem_x509_certificates(handle.read())
    except (OSError, ValueError):
        return []


def _load_system_store(context: SSL.Context) -> None:
    """OpenSSL's compiled-in defaults may point inside a wheel; also load the platform's bundle."""
    context.set_default_verify_paths()
    paths = _ssl_paths.get_default_verify_paths()
    cafile = os.environ.get(paths.openssl_cafile_env) or paths.cafile or paths.openssl_cafile
    capath = os.environ.get(paths.openssl_capath_env) or paths.capath or paths.openssl_capath
    if cafile and os.path.isfile(cafile):
        context.load_verify_locations(cafile)
    if capath and os.path.isdir(capath):
        context.load_verify_locations(None, capath)


@functools.lru_cache(maxsize=32)
def build_context(settings: TlsSettings) -> TlsContext:
    """A client context for ``settings`` (cached: settings are immutable and hashable).

    Errors name the option whose file failed, never the path: it may come from a mistyped connection
    string (``tlsCAFile=/ca.pem?tlsCertificateKeyFilePassword=...``), so the OSError, whose text has the
    path, is not chained either.
    """
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_NO_RENEGOTIATION)
    trusted: list[x509.Certificate] = []
    option = "tlsCertificateKeyFile"  # the option whose file is being read
    try:
        if settings.certificate_key_file:
            context.use_certificate_chain_file(settings.certificate_key_file)
            context.use_privatekey(_load_private_key(settings.certificate_key_file,
                                                     settings.certificate_key_file_password))
            context.check_privatekey()
        if settings.verify_certificates:
            context.set_verify(SSL.VERIFY_PEER)
            if settings.ca_file:
                option = "tlsCAFile"
                context.load_verify_locations(settings.ca_file)
                trusted = _read_pem_certificates(settings.ca_file)
            else:
                option = "the system CA store"
                _load_system_store(context)
            if settings.crl_file:
                option = "tlsCRLFile"
                _load_crl(context, settings.crl_file)
        else:
            context.set_verify(SSL.VERIFY_NONE)
    except SSL.Error as exc:  # OpenSSL's reasons (no paths)
        raise ConfigurationError(f"invalid TLS configuration ({option}): {_describe_ssl_error(exc)}") from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(f"invalid TLS configuration: {option}: cannot read the file ({reason})") from None
    except ValueError as exc:  # cryptography: a CRL that is neither PEM nor DER
        raise ConfigurationError(f"invalid TLS configuration ({option}): {exc}") from None
    if settings.check_ocsp:
        context.set_ocsp_client_callback(_ocsp_callback)
    return TlsContext(settings, context, trusted)


def _load_crl(context: SSL.Context, path: str) -> None:
    from OpenSSL import crypto

    with open(path, "rb") as handle:
        data = handle.read()
    try:
        crl = x509.load_pem_x509_crl(data)
    except ValueError:
        crl = x509.load_der_x509_crl(data)
    store = context.get_cert_store()
    assert store is not None  # every SSL context has a certificate store
    store.add_crl(crl)
    store.set_flags(crypto.X509StoreFlags.CRL_CHECK)


def _describe_ssl_error(exc: BaseException) -> str:
    if isinstance(exc, SSL.Error) and exc.args and isinstance(exc.args[0], list):
        reasons = [entry[2] for entry in exc.args[0] if len(entry) >= 3 and entry[2]]
        if reasons:
            return "; ".join(reasons)
    return str(exc) or type(exc).__name__


# -- OCSP glue -----------------------------------------------------------------

#: How wrap_socket asks OCSP responders (net.ocsp_responders.ask_responders): query, timeout -> status.
AskResponders = Callable[[ocsp.ResponderQuery, float], Optional[ocsp.OcspStatus]]


class _HandshakeState:
    """Per-connection data the OCSP callback reads (and where it leaves its verdict)."""

    def __init__(self, tls_context: TlsContext, cache: ocsp.OcspCache) -> None:
        self.tls_context = tls_context
        self.cache = cache
        self.ocsp_failure: Optional[str] = None
        self.ocsp_verdict: Optional[str] = None  # why the certificate passed OCSP (None: not checked)
        self.responder_query: Optional[ocsp.ResponderQuery] = None
        """What the callback left for after the handshake: it runs inside OpenSSL, where no I/O may wait."""


def _ocsp_callback(connection: SSL.Connection, stapled: bytes, _data: Any) -> bool:
    state: _HandshakeState = connection.get_app_data()
    try:
        cert = connection.get_peer_certificate(as_cryptography=True)
        chain = connection.get_peer_cert_chain(as_cryptography=True) or []
        if cert is None:
            return True  # nothing to check; certificate verification rejects this on its own
        decision = ocsp.check_certificate(cert, chain, stapled or b"", trusted=state.tls_context.trusted,
                                          cache=state.cache,
                                          endpoint_check=state.tls_context.settings.check_ocsp_endpoint)
    except Exception as exc:  # a bug here must fail closed, with the reason kept
        state.ocsp_failure = f"OCSP check failed: {exc!r}"
        return False
    if not decision.accept:
        state.ocsp_failure = decision.reason
    state.ocsp_verdict = decision.reason
    state.responder_query = decision.ask
    return decision.accept


def _check_with_responders(state: _HandshakeState, ask_responders: AskResponders, timeout: Optional[float]) -> None:
    """The OCSP endpoint check the callback asked for; AutoReconnect if the certificate is revoked."""
    query = state.responder_query
    assert query is not None
    try:
        status = ask_responders(query, ocsp.responder_timeout(timeout))
        decision = ocsp.decide_from_responders(query, status, state.cache)
    except Exception as exc:  # not the responders' answer: a bug, which must fail closed
        raise AutoReconnect(f"TLS handshake failed: OCSP check failed: {exc!r}") from exc
    if not decision.accept:
        raise AutoReconnect(f"TLS handshake failed: {decision.reason}")
    state.ocsp_verdict = decision.reason


# -- hostname verification -------------------------------------------------------

def _dns_name_matches(pattern: str, hostname: str) -> bool:
    pattern = pattern.lower().rstrip(".")
    hostname = hostname.lower().rstrip(".")
    if "*" not in pattern:
        return pattern == hostname
    wildcard, _, pattern_rest = pattern.partition(".")
    host_first, _, host_rest = hostname.partition(".")
    if wildcard != "*" or not pattern_rest or "*" in pattern_rest or pattern_rest.count(".") < 1:
        return False  # only a whole left-most label, and never for a bare TLD ("*.com")
    return bool(host_first) and host_rest == pattern_rest


def hostname_matches(cert: x509.Certificate, hostname: str) -> bool:
    """True when ``cert`` names ``hostname`` in its subjectAltName."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    try:
        address = ipaddress.ip_address(hostname.strip("[]").split("%")[0])
    except ValueError:
        address = None
    if address is not None:
        return address in names.get_values_for_type(x509.IPAddress)
    try:
        ascii_host = hostname.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_host = hostname
    return any(_dns_name_matches(name, ascii_host) for name in names.get_values_for_type(x509.DNSName))


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False
    return True


# -- the socket ----------------------------------------------------------------

class TlsSocket:
    """The subset of a socket that ``Connection`` uses, over a pyOpenSSL connection."""

    def __init__(self, sock: _socket.socket, connection: SSL.Connection) -> None:
        self._sock = sock
        self._connection = connection
        self._fileno = sock.fileno()
        self._timeout: Optional[float] = sock.gettimeout()
        self._closed = False
        #: How the certificate passed OCSP ("stapled OCSP response: good", "soft-fail: ...", ...); None when
        #: OCSP was not checked (tlsInsecure, tlsDisableCertificateRevocationCheck, ...).
        self.ocsp_verdict: Optional[str] = None
        loop = gevent.get_hub().loop
        self._read_watcher = loop.io(self._fileno, 1)
        self._write_watcher = loop.io(self._fileno, 2)

    # Each wait uses the whole per-call timeout, like a socket timeout does.
    def _wait(self, want_write: bool, deadline: Optional[float]) -> None:
        if deadline is None:
            timeout = self._timeout
        else:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise _socket.timeout("timed out")
        watcher = self._write_watcher if want_write else self._read_watcher
        wait(watcher, timeout=timeout, timeout_exc=_socket.timeout("timed out"))

    def _retry(self, operation, *args, deadline: Optional[float] = None):
        while True:
            # Never let OpenSSL touch a descriptor number that was given back: not after our
            # close(), nor after someone closed the underlying socket behind our back (then our
            # watcher may wake for whichever new socket reuses the number).
            if self._closed or self._sock.fileno() != self._fileno:
                raise OSError(errno.EBADF, "TLS socket is closed")
            try:
                return operation(*args)
            except SSL.WantReadError:
                self._wait(False, deadline)
            except SSL.WantWriteError:
                self._wait(True, deadline)

    def do_handshake(self, timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._retry(self._connection.do_handshake, deadline=deadline)

    def unref_watchers(self) -> None:
        """Waits on this socket stop counting as work that keeps the hub alive (monitoring sockets)."""
        self._read_watcher.ref = False
        self._write_watcher.ref = False

    def settimeout(self, timeout: Optional[float]) -> None:
        self._timeout = timeout

    def gettimeout(self) -> Optional[float]:
        return self._timeout

    def fileno(self) -> int:
        return self._fileno

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        sent = 0
        try:
            while sent < len(view):
                sent += self._retry(self._connection.send, view[sent:])
        except SSL.ZeroReturnError:
            raise ConnectionResetError("TLS connection closed by the server") from None
        except SSL.Error as exc:
            raise ConnectionResetError(f"TLS connection broken: {_describe_ssl_error(exc)}") from None

    def recv_into(self, buffer, nbytes: int = 0) -> int:
        try:
            return self._retry(self._connection.recv_into, buffer, nbytes or None)
        except SSL.ZeroReturnError:
            return 0
        except SSL.SysCallError as exc:
            if exc.args and exc.args[0] == -1:  # unexpected EOF
                return 0
            raise ConnectionResetError(f"TLS connection broken: {exc}") from None
        except SSL.Error as exc:
            raise ConnectionResetError(f"TLS connection broken: {_describe_ssl_error(exc)}") from None

    def recv(self, bufsize: int) -> bytes:
        buffer = bytearray(bufsize)
        count = self.recv_into(buffer, bufsize)
        return bytes(buffer[:count])

    def peer_certificate(self) -> Optional[x509.Certificate]:
        return self._connection.get_peer_certificate(as_cryptography=True)

    @property
    def protocol_version(self) -> Optional[str]:
        """The negotiated TLS version ("TLSv1.3", ...)."""
        name = self._connection.get_protocol_version_name()
        return str(name) if name else None

    @property
    def cipher(self) -> Optional[str]:
        """The negotiated cipher suite's OpenSSL name."""
        name = self._connection.get_cipher_name()
        return str(name) if name else None

    def close(self) -> None:
        """Wake any greenlet parked on this socket (with EBADF), then release the descriptor.

        The descriptor is closed only after the parked greenlets have been thrown out of their
        waits and the watchers closed (the hub does it in order), exactly as gevent's own
        sockets do, so no watcher ever outlives its descriptor number.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._connection.set_shutdown(SSL.SENT_SHUTDOWN | SSL.RECEIVED_SHUTDOWN)
        finally:
            gevent.get_hub().cancel_waits_close_and_then(
                [self._read_watcher, self._write_watcher],
                OSError(errno.EBADF, "TLS socket closed in another greenlet"), self._sock.close)

    @property
    def closed(self) -> bool:
        return self._closed


def wrap_socket(
    sock: _socket.socket,
    tls_context: TlsContext,
    server_hostname: str,
    *,
    timeout: Optional[float],
    ocsp_cache: ocsp.OcspCache = ocsp.DEFAULT_CACHE,
    ask_responders: Optional[AskResponders] = None,
) -> TlsSocket:
    """Run the client TLS handshake on a connected gevent socket; close it on any failure.

    SNI is sent for every hostname (RFC 6066 forbids it for IP literals).
    Certificate, hostname and OCSP failures raise AutoReconnect with the
    reason; a handshake that outlives ``timeout`` raises NetworkTimeout.
    Settings with the OCSP endpoint check need ``ask_responders``: after the
    handshake and the hostname check it asks the certificate's OCSP
    responders when no staple or cached response settled its status, for
    at most ``ocsp.responder_timeout(timeout)``.
    """
    settings = tls_context.settings
    if settings.check_ocsp_endpoint and ask_responders is None:
        raise TypeError("wrap_socket: TLS settings with the OCSP endpoint check need ask_responders")
    connection = SSL.Connection(tls_context.context, sock)
    state = _HandshakeState(tls_context, ocsp_cache)
    connection.set_app_data(state)
    connection.set_connect_state()
    if not _is_ip_literal(server_hostname):
        connection.set_tlsext_host_name(server_hostname.encode("idna"))
    if settings.check_ocsp:
        connection.request_ocsp()
    tls_socket = TlsSocket(sock, connection)
    ok = False
    try:
        try:
            tls_socket.do_handshake(timeout)
        except _socket.timeout:
            raise NetworkTimeout("TLS handshake timed out") from None
        except SSL.Error as exc:
            if state.ocsp_failure:
                raise AutoReconnect(f"TLS handshake failed: {state.ocsp_failure}") from None
            raise AutoReconnect(f"TLS handshake failed: {_describe_ssl_error(exc)}") from None
        except OSError as exc:
            raise AutoReconnect(f"TLS handshake failed: {exc}") from None
        if settings.verify_hostname:
            cert = tls_socket.peer_certificate()
            if cert is None or not hostname_matches(cert, server_hostname):
                raise AutoReconnect(f"TLS hostname verification failed: the server certificate does not "
                                    f"match {server_hostname!r}")
        if state.responder_query is not None:
            assert ask_responders is not None  # the query exists only under the endpoint check
            _check_with_responders(state, ask_responders, timeout)
        tls_socket.ocsp_verdict = state.ocsp_verdict
        ok = True
        return tls_socket
    finally:
        if not ok:
            tls_socket.close()
