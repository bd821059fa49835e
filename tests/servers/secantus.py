"""Start and stop a SecantusDB server as a subprocess on a free loopback port.

SecantusDB is GPL-2.0: we only ever run its executable, never import it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from greenmongo import bson
from tests.waits import wait_until

_OP_MSG = 2013
_HEADER = struct.Struct("<iiii")


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now: another process may take it before our server binds it (see ``listens``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def listens(pid: int, port: int) -> Optional[bool]:
    """Whether process ``pid`` holds the TCP listener on ``port`` (None where /proc cannot tell).

    A server started on a ``free_port()`` that another test process took meanwhile exits with
    "Address already in use", but until it does, connecting to the port reaches the *other* process's
    server: a test would then share its data with another pass's tests (a duplicate key on a collection
    it has just emptied is what that looks like). Asking who owns the listener closes that window.
    """
    try:
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        for table_path in ("/proc/net/tcp", "/proc/net/tcp6"):
            if not os.path.exists(table_path):
                continue
            with open(table_path) as table:
                next(table)
                for line in table:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                        return True
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return False


class PortTaken(RuntimeError):
    """The server could not bind its port: another process took it after ``free_port()``."""


def executable() -> str:
    beside = Path(sys.executable).parent / "secantusd-py"
    if beside.exists():
        return str(beside)
    found = shutil.which("secantusd-py")
    if not found:
        raise RuntimeError("secantusd-py not found: install the test extra (pip install -e '.[test]')")
    return found


def raw_command(host: str, port: int, command: dict, timeout: float = 2.0) -> dict:
    """One OP_MSG round trip on a plain blocking socket: independent of the driver under test."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        send_command(sock, command)
        return read_reply(sock)


def send_command(sock: socket.socket, command: dict) -> None:
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(command)
    sock.sendall(_HEADER.pack(16 + len(body), 1, 0, _OP_MSG) + body)


def read_reply(sock: socket.socket) -> dict:
    header = _recv_exactly(sock, 16)
    length, _request_id, response_to, opcode = _HEADER.unpack(header)
    if opcode != _OP_MSG or response_to != 1:
        raise RuntimeError(f"unexpected reply header opcode={opcode} responseTo={response_to}")
    payload = _recv_exactly(sock, length - 16)
    # flags (4 bytes) + section kind 0 + document
    return bson.decode(payload[5:])


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("server closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class SecantusServer:
    """One ``secantusd-py`` process; ``stop()`` always kills it, even mid-start."""

    def __init__(
        self,
        *,
        auth: bool = False,
        standalone: bool = False,
        tls_cert_file: Optional[str] = None,
        tls_key_file: Optional[str] = None,
        tls_ca_file: Optional[str] = None,
        extra_args: Sequence[str] = (),
        port: Optional[int] = None,
        host: str = "127.0.0.1",
        storage_path: str = ":memory:",
    ) -> None:
        self.host = host
        self._fixed_port = port is not None
        self.port = port or free_port(host)
        self.args = [executable(), "--host", host, "--port", str(self.port),
                     "--storage-path", storage_path, "--enable-test-commands", "--log-level", "WARNING"]
        if auth:
            self.args.append("--auth")
        if standalone:
            self.args.append("--standalone")
        for flag, value in (("--tls-cert-file", tls_cert_file), ("--tls-key-file", tls_key_file),
                            ("--tls-ca-file", tls_ca_file)):
            if value:
                self.args += [flag, value]
        self.args += list(extra_args)
        self.tls = bool(tls_cert_file)
        self.in_memory = storage_path == ":memory:"
        self.process: Optional[subprocess.Popen] = None
        self._log = tempfile.TemporaryFile()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def uri(self) -> str:
        return f"mongodb://{self.host}:{self.port}/"

    def start(self, timeout: float = 30.0) -> "SecantusServer":
        for attempt in range(3):
            try:
                return self._start(timeout)
            except PortTaken:
                if self._fixed_port or attempt == 2:
                    raise
                self._move_to(free_port(self.host))
        raise AssertionError("unreachable")

    def _move_to(self, port: int) -> None:
        self.args[self.args.index("--port") + 1] = str(port)
        self.port = port
        self._log.seek(0)
        self._log.truncate()

    def _start(self, timeout: float) -> "SecantusServer":
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_until_listening(timeout)
            if not self.tls:
                reply = raw_command(self.host, self.port, {"hello": 1, "$db": "admin"})
                if reply.get("ok") != 1:
                    raise RuntimeError(f"SecantusDB answered hello with {reply!r}")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_listening(self, timeout: float) -> None:
        def listening() -> bool:
            if self.process.poll() is not None:
                tail = self.log_tail()
                error = PortTaken if "Address already in use" in tail else RuntimeError
                raise error(f"secantusd-py exited with {self.process.returncode}: {tail}")
            if listens(self.process.pid, self.port) is False:
                return False  # not (yet) ours, whoever answers on the port
            try:
                socket.create_connection(self.address, timeout=0.5).close()
                return True
            except OSError:
                return False

        wait_until(listening, timeout, lambda: f"secantusd-py did not listen within {timeout}s: {self.log_tail()}",
                   error=RuntimeError, interval=0.05)

    def log_tail(self, limit: int = 4000) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-limit:]

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # An in-memory server has nothing to keep: SIGKILL at once (its SIGTERM shutdown takes ~2 s, and
        # a run stops hundreds). A server on disk gets SIGTERM first, to write its files.
        signals = ((signal.SIGKILL, 5.0),) if self.in_memory else ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
        for sig, wait in signals:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> "SecantusServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_with_users(storage_path: str, users: Sequence[tuple[str, str]]) -> SecantusServer:
    """A started SecantusDB with --auth that knows ``users`` (name, password; root, SCRAM-SHA-256).

    They are created on the same storage without auth first, then the server restarts with --auth
    (``:memory:`` storage would lose them). The caller stops it; so does the interpreter's exit."""
    with SecantusServer(storage_path=storage_path) as setup:
        for user, password in users:
            reply = raw_command(setup.host, setup.port, {"createUser": user, "pwd": password, "roles": ["root"],
                                                         "mechanisms": ["SCRAM-SHA-256"], "$db": "admin"})
            if reply.get("ok") != 1:
                raise RuntimeError(f"createUser {user!r} failed: {reply}")
    server = SecantusServer(storage_path=storage_path, auth=True, port=setup.port)
    atexit.register(server.stop)
    return server.start()
