"""The OCSP Support test plan's integration matrix (``ocsp-support/tests/README.md``, mongodb/specifications
01b73f1) through MongoClient: a TLS server that staples or not, a mock OCSP responder that says good or revoked
(signed by the issuing CA or by a delegate), or none at all, RSA and ECDSA certificates, and the three rows of
URI options. As the README asks, each case connects and pings; OK means the ping succeeds, FAIL that it fails
for the TLS reason.

The README's mongod and mock responder (drivers-evergreen-tools) are replaced by the scripted TLS server
(tests/servers/scripted.py), which staples what the responder says, and the loopback responder
(tests/servers/ocsp_responder.py); "no OCSP responder" is a certificate naming a closed port. Every case mints
its own certificates and starts with an empty process-wide OCSP cache (the README's "clear the caches").
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Iterator, Optional

import pytest

from greenmongo import MongoClient
from greenmongo.errors import ServerSelectionTimeoutError
from greenmongo.net import ocsp
from tests.servers.ocsp_responder import OcspResponder
from tests.servers.scripted import ScriptedServer
from tests.servers.secantus import free_port
from tests.servers.tls_certs import make_ca, make_cert, server_context


@dataclass(frozen=True)
class Column:
    """One column of the README's table."""

    status: Optional[str]  # what the responder says; None: no responder
    staples: bool
    must_staple: bool
    fails_by_default: Optional[str]  # with tls=true alone: None (OK) or the reason it fails


COLUMNS = {
    "test-1-valid-cert-stapled": Column("good", True, False, None),
    "test-2-revoked-cert-stapled": Column("revoked", True, False, "revoked"),
    "test-3-valid-cert-not-stapled": Column("good", False, False, None),
    "test-4-revoked-cert-not-stapled": Column("revoked", False, False, "revoked"),
    "soft-fail-no-responder-not-stapled": Column(None, False, False, None),
    "malicious-1-revoked-must-staple-not-stapled": Column("revoked", False, True, "Must-Staple"),
    "malicious-2-no-responder-must-staple-not-stapled": Column(None, False, True, "Must-Staple"),
}
#: The URI option rows: tlsInsecure and tlsAllowInvalidCertificates turn OCSP off, so every case is OK.
ROWS = {"tls": "", "tlsInsecure": "&tlsInsecure=true",
        "tlsAllowInvalidCertificates": "&tlsAllowInvalidCertificates=true"}


def _cases() -> Iterator:
    for row in ROWS:
        for key_type in ("rsa", "ecdsa"):
            for column_name, column in COLUMNS.items():
                signers = ("ca", "delegate") if column.status is not None else ("none",)
                for signer in signers:
                    yield pytest.param(row, key_type, column, signer, id=f"{row}-{key_type}-{column_name}-{signer}")


@pytest.fixture(scope="module")
def authorities(tmp_path_factory) -> dict:
    """Per key type: the CA, its CA file and a delegated responder certificate."""
    directory = tmp_path_factory.mktemp("ocsp-prose")
    found = {}
    for key_type in ("rsa", "ecdsa"):
        kind = "rsa" if key_type == "rsa" else "ec"
        ca = make_ca(f"OCSP prose {key_type} CA", key_type=kind)
        found[key_type] = {"ca": ca, "ca_file": ca.write(directory, f"ca-{key_type}")[0], "kind": kind,
                           "delegate": make_cert(ca, "OCSP prose responder", ocsp_signing=True, key_type=kind)}
    return found


@pytest.fixture(autouse=True)
def empty_ocsp_cache() -> Iterator[None]:
    ocsp.DEFAULT_CACHE.clear()
    yield
    ocsp.DEFAULT_CACHE.clear()


def _ping(uri: str, fails: Optional[str]) -> None:
    client = MongoClient(uri, serverSelectionTimeoutMS=1000 if fails else 10000)
    try:
        if fails is None:
            assert client.admin.command("ping")["ok"] == 1
        else:
            with pytest.raises(ServerSelectionTimeoutError, match=fails):
                client.admin.command("ping")
    finally:
        client.close()


@pytest.mark.parametrize("row, key_type, column, signer", list(_cases()))
def test_ocsp_matrix(authorities, row: str, key_type: str, column: Column, signer: str) -> None:
    pki = authorities[key_type]
    responder = None
    if column.status is not None:
        responder = OcspResponder(pki["ca"], column.status,
                                  signer=pki["delegate"] if signer == "delegate" else None).start()
    try:
        url = responder.url if responder is not None else f"http://127.0.0.1:{free_port()}/ocsp"
        issued = make_cert(pki["ca"], "localhost", ip_addresses=["127.0.0.1"], ocsp_urls=[url],
                           must_staple=column.must_staple, key_type=pki["kind"])
        staple = None
        if column.staples:
            assert responder is not None
            staple = responder.staple_for(issued.cert)
        with ScriptedServer(tls_context=server_context(issued, pki["ca"], staple=staple)) as server:
            host, port = server.address
            uri = (f"mongodb://{host}:{port}/?directConnection=true&tls=true"
                   f"&tlsCAFile={urllib.parse.quote(pki['ca_file'], safe='')}{ROWS[row]}")
            _ping(uri, column.fails_by_default if row == "tls" else None)
        if responder is not None:
            asked = len(responder.requests)
            if row == "tls" and not column.staples and not column.must_staple:
                assert asked >= 1  # nothing stapled: the driver asked the responder
            else:
                assert asked == 0  # a staple decided, Must-Staple failed first, or OCSP is off
    finally:
        if responder is not None:
            responder.stop()
