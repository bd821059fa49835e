"""A PyKMIP 0.11 KMIP server on loopback for the KMIP KMS provider's tests, with certificates made here.

PyKMIP's server is thread based, so it runs in a subprocess of its own (``python -m tests.servers.kmip
<directory> <port>``): the test process stays free of its threads and its blocking sockets. TLS 1.2 with a
required client certificate, as the drivers' KMIP test server (drivers-evergreen-tools kms_kmip_server.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional

from tests.servers.secantus import free_port, listens
from tests.servers.tls_certs import make_ca, make_cert
from tests.waits import wait_until


class KmipServer:
    """``start()`` writes the certificates into ``directory`` and starts the server; ``stop()`` ends it."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.port = free_port()
        self.process: Optional[subprocess.Popen] = None
        ca = make_ca("greenmongo KMIP test CA")
        self.ca_file = ca.write(self.directory, "kmip-ca")[0]
        self.server_files = make_cert(ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"]).write(
            self.directory, "kmip-server")
        #: The client certificate and key (one PEM), for kms_tls_options' tlsCertificateKeyFile.
        self.client_pem = make_cert(ca, "greenmongo KMIP client", client=True).write(self.directory,
                                                                                   "kmip-client")[2]

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def tls_options(self) -> dict:
        return {"tlsCAFile": self.ca_file, "tlsCertificateKeyFile": self.client_pem}

    def start(self, timeout: float = 30.0) -> "KmipServer":
        root = Path(__file__).resolve().parents[2]
        self.process = subprocess.Popen([sys.executable, "-m", "tests.servers.kmip", str(self.directory),
                                         str(self.port)], cwd=root, stdout=subprocess.DEVNULL,
                                        stderr=open(self.directory / "kmip-stderr.log", "wb"),
                                        start_new_session=True)

        def listening() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the KMIP server exited: {self.log_tail()}")
            if self.process is not None and listens(self.process.pid, self.port) is False:
                return False  # another process's listener on the port is not our server
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                return False
            return True

        wait_until(listening, timeout, lambda: f"the KMIP server did not listen within {timeout}s: "
                                               f"{self.log_tail()}")
        return self

    def log_tail(self) -> str:
        path = self.directory / "kmip-stderr.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        # Killed, not terminated: PyKMIP's graceful shutdown waits ~10 s for its accept loop; nothing of it
        # outlives the test (its database is in ``directory``). The whole process group: PyKMIP forks a policy
        # directory monitor, which a kill of the server alone leaves running, orphaned.
        process, self.process = self.process, None
        if process is None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)

    def environment(self) -> dict[str, str]:
        """The variables the unified runner reads (spec/unified/encryption.py)."""
        return {"GREENMONGO_TEST_KMIP_ENDPOINT": self.endpoint, "GREENMONGO_TEST_KMIP_CA_FILE": self.ca_file,
                "GREENMONGO_TEST_KMIP_CERT_FILE": self.client_pem}


def _serve(directory: str, port: int) -> None:
    from kmip.services.server import KmipServer as PyKmipServer

    policies = os.path.join(directory, "kmip-policies")
    os.makedirs(policies, exist_ok=True)
    server = PyKmipServer(
        hostname="127.0.0.1", port=port,
        certificate_path=os.path.join(directory, "kmip-server.crt"),
        key_path=os.path.join(directory, "kmip-server.key"),
        ca_path=os.path.join(directory, "kmip-ca.crt"),
        auth_suite="TLS1.2", config_path=None, log_path=os.path.join(directory, "kmip-server.log"),
        policy_path=policies, enable_tls_client_auth=True,
        database_path=os.path.join(directory, "kmip.sqlite"),
    )
    with server:
        server.serve()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
