"""``python -m greenmongo doctor``: run as a subprocess against SecantusDB (plain, TLS, with users, a wrong
password), a ``mongodb+srv`` name on the loopback DNS server, a dead host and an unusable connection
string; the report's facts, its exit status and one-line reason, and that no password is ever printed.
In the patched pass the subprocess monkey-patches itself first (as a gunicorn gevent worker would);
one test runs the doctor in-process too."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from greenmongo.tools.doctor import main as doctor_main
from tests.servers.dns import LoopbackDnsServer
from tests.servers.secantus import SecantusServer, free_port, start_with_users
from tests.servers.tls_certs import make_ca, make_cert

pytestmark = pytest.mark.server

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSWORD = "s3cr3t-Pa55word"
WRONG_PASSWORD = "n0t-the-Pa55word"


PATCHED = os.environ.get("GREENMONGO_TEST_PATCHED", "").lower() in ("1", "true", "yes")
#: ``python -m greenmongo`` in a process that calls patch_all() first.
_PATCHED_MAIN = ("from gevent import monkey; monkey.patch_all(); import runpy; "
                 "runpy.run_module('greenmongo', run_name='__main__', alter_sys=True)")


def run_doctor(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    entry = ["-c", _PATCHED_MAIN] if PATCHED else ["-m", "greenmongo"]
    process = subprocess.run([sys.executable, *entry, "doctor", *args], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=timeout)
    return process.returncode, process.stdout, process.stderr


def run_json(*args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_doctor(*args, "--json")
    return code, json.loads(out), err


def host_of(uri: str) -> str:
    return uri.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]


def test_a_plain_server_is_healthy(server_uri: str) -> None:
    address = host_of(server_uri)
    code, out, err = run_doctor(server_uri, "--rtt-samples", "4")
    assert code == 0, out + err
    assert f"Host {address}: reachable" in out
    assert "  tls          off" in out and "RSPrimary, set secantus, wire versions 0-" in out
    assert f"  primary              {address}  <- the connection string's" in out
    assert f"  writes               {address}" in out
    assert "Pool settings: maxPoolSize=100, minPoolSize=0, maxConnecting=2," in out
    assert out.rstrip().endswith("HEALTHY")
    code, report, _ = run_json(server_uri, "--rtt-samples", "4")
    assert code == 0 and report["healthy"] is True and report["reason"] is None
    (host,) = report["hosts"]
    assert host["address"] == address and len(host["rtt_ms"]) == 4 and host["tcp_connect_ms"] >= 0
    assert host["summary"]["type"] == "RSPrimary" and host["summary"]["max_wire_version"] >= 8
    assert report["topology"] == {"type": "ReplicaSetWithPrimary", "set_name": "secantus",
                                  "servers": {address: "RSPrimary"}}
    assert report["selection"]["primary"] == [address] and report["selection"]["secondary"] == []
    assert "credentials" in report and report["credentials"] is None


def test_in_process_the_report_and_the_exit_status(server_uri: str) -> None:
    out = io.StringIO()
    assert doctor_main([server_uri, "--json", "--rtt-samples", "2", "--timeout", "5"], stdout=out) == 0
    report = json.loads(out.getvalue())
    assert report["healthy"] and len(report["hosts"][0]["rtt_ms"]) == 2
    assert report["pool_settings"]["maxPoolSize"] == 100 and report["pool_settings"]["connectTimeoutMS"] == 20000


@pytest.fixture(scope="module")
def users_server(tmp_path_factory):
    server = start_with_users(str(tmp_path_factory.mktemp("doctor-auth") / "db"), [("doc", PASSWORD)])
    try:
        yield server
    finally:
        server.stop()


def test_credentials_that_authenticate(users_server) -> None:
    uri = f"mongodb://doc:{PASSWORD}@{users_server.host}:{users_server.port}/?authSource=admin"
    code, out, err = run_doctor(uri)
    assert code == 0, out + err
    assert "Credentials: user 'doc' on 'admin', mechanism DEFAULT" in out
    assert "SCRAM-SHA-256: ok" in out
    code, report, err = run_json(uri)
    assert report["hosts"][0]["auth"]["ok"] is True and report["hosts"][0]["auth"]["mechanism"] == "SCRAM-SHA-256"
    assert PASSWORD not in out + err + json.dumps(report)


def test_a_wrong_password_is_unhealthy_and_never_printed(users_server) -> None:
    uri = f"mongodb://doc:{WRONG_PASSWORD}@{users_server.host}:{users_server.port}/"
    code, out, err = run_doctor(uri)
    assert code == 1
    reason = out.rstrip().splitlines()[-1]
    assert reason.startswith(f"UNHEALTHY: {users_server.host}:{users_server.port}: authentication failed "
                             f"(SCRAM-SHA-256): "), reason
    assert "reachable" in out and "rtt samples" in out  # the hello and round trips are still reported
    code_json, report, err_json = run_json(uri)
    assert code_json == 1 and report["healthy"] is False and report["hosts"][0]["auth"]["ok"] is False
    assert err_json.strip() == f"UNHEALTHY: {report['reason']}" and len(err_json.strip().splitlines()) == 1
    for text in (out, err, json.dumps(report), err_json):
        assert WRONG_PASSWORD not in text and PASSWORD not in text


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doctor-tls")
    ca = make_ca()
    cert, key, _ = make_cert(ca, "doctor-server", ip_addresses=["127.0.0.1"]).write(directory, "server")
    ca_file = ca.write(directory, "ca")[0]
    server = SecantusServer(tls_cert_file=cert, tls_key_file=key, tls_ca_file=ca_file).start()
    try:
        yield server, ca_file
    finally:
        server.stop()


def test_tls_version_cipher_certificate_and_ocsp(tls_server) -> None:
    server, ca_file = tls_server
    code, report, err = run_json(f"mongodb://127.0.0.1:{server.port}/?tls=true&tlsCAFile={ca_file}")
    assert code == 0, err
    tls = report["hosts"][0]["tls"]
    assert tls["version"] in ("TLSv1.2", "TLSv1.3") and tls["cipher"]
    assert tls["certificate"]["subject"] == "CN=doctor-server" and tls["certificate"]["days_left"] > 0
    assert tls["ocsp"] == "soft-fail: no conclusive OCSP status"
    code, out, _ = run_doctor(f"mongodb://127.0.0.1:{server.port}/?tls=true&tlsCAFile={ca_file}")
    assert code == 0 and "certificate  CN=doctor-server (issuer CN=greenmongo test CA), expires " in out
    # Without the CA the certificate does not verify: the TLS step fails, named in the reason.
    code, out, _ = run_doctor(f"mongodb://127.0.0.1:{server.port}/?tls=true", "--timeout", "5")
    assert code == 1
    assert out.rstrip().splitlines()[-1].startswith(f"UNHEALTHY: 127.0.0.1:{server.port}: connect failed: ")
    assert "certificate verify failed" in out


def test_a_dead_host() -> None:
    port = free_port()
    code, out, err = run_doctor(f"mongodb://127.0.0.1:{port}/?connectTimeoutMS=2000")
    assert code == 1, out + err
    assert f"Host 127.0.0.1:{port}: FAILED at connect" in out
    assert out.rstrip().splitlines()[-1].startswith(f"UNHEALTHY: 127.0.0.1:{port}: connect failed: AutoReconnect: ")
    assert f"Topology: Unknown\n  127.0.0.1:{port}: Unknown\n" in out and "  writes               (none)" in out


def test_an_unusable_connection_string_says_why_without_quoting_it() -> None:
    code, out, err = run_doctor(f"mongodb://doc:{PASSWORD}@127.0.0.1:1/?maxPoolSize=lots")
    assert code == 2
    assert out.rstrip().splitlines()[-1].startswith("UNHEALTHY: the connection string cannot be used: ")
    assert "maxPoolSize" in out and PASSWORD not in out + err and "lots" not in out + err


def test_mongodb_srv_on_the_loopback_dns_server(server_uri: str) -> None:
    host, port = host_of(server_uri).rsplit(":", 1)
    assert host == "127.0.0.1"
    records = {
        ("_mongodb._tcp.doctor.greenmongo.test.", "SRV"): [f"0 0 {port} db.doctor.greenmongo.test."],
        ("db.doctor.greenmongo.test.", "A"): ["127.0.0.1"],
        ("doctor.greenmongo.test.", "TXT"): ['"replicaSet=secantus&authSource=admin"'],
    }
    with LoopbackDnsServer(extra_records=records) as dns_server:
        nameserver = f"{dns_server.host}:{dns_server.port}"
        code, out, err = run_doctor("mongodb+srv://doctor.greenmongo.test/?tls=false", "--dns-server", nameserver)
        assert code == 0, out + err
        lines = out.splitlines()
        assert lines[0].startswith("DNS SRV _mongodb._tcp.doctor.greenmongo.test (")
        assert lines[0].endswith(f"ms): db.doctor.greenmongo.test:{port}")
        assert lines[1].startswith("DNS TXT doctor.greenmongo.test (")
        assert lines[1].endswith("ms): replicaSet=secantus&authSource=admin")
        assert f"Host db.doctor.greenmongo.test:{port}: reachable" in out
        assert "  resolve" in out and "ms  127.0.0.1" in out
        code, report, _ = run_json("mongodb+srv://doctor.greenmongo.test/?tls=false", "--dns-server", nameserver)
        assert report["srv_host"] == "doctor.greenmongo.test"
        assert report["seeds"] == [f"db.doctor.greenmongo.test:{port}"]
        assert report["topology"]["type"] == "ReplicaSetWithPrimary"
        # A name the server does not know: the lookup fails, and the connection string cannot be used.
        code, out, _ = run_doctor("mongodb+srv://nothing.greenmongo.test/", "--dns-server", nameserver)
        assert code == 2 and "UNHEALTHY: the connection string cannot be used: " in out


def test_a_load_balancer(server_uri: str) -> None:
    from tests.servers.load_balancer import LoadBalancerProcess

    host, port = host_of(server_uri).rsplit(":", 1)
    with LoadBalancerProcess((host, int(port))) as balancer:
        code, out, err = run_doctor(f"mongodb://127.0.0.1:{balancer.port}/?loadBalanced=true")
    assert code == 0, out + err
    assert f"Host 127.0.0.1:{balancer.port}: reachable" in out and "LoadBalancer, set secantus" in out
    assert f"Topology: LoadBalanced\n  127.0.0.1:{balancer.port}: LoadBalancer\n" in out
    assert f"  primary              127.0.0.1:{balancer.port}  <- the connection string's" in out
    assert "loadBalanced=True" in out
