"""The KMIP KMS provider against a PyKMIP server on loopback (tests/servers/kmip.py): data keys (secret data
and delegated), KMS TLS options, rewrapping between providers, and 1,000 greenlets at once."""

from __future__ import annotations

import gc
import os
import time
from typing import Any

import gevent
import greenlet
import pytest

from greenmongo import MongoClient
from greenmongo.bson import STANDARD, CodecOptions
from greenmongo.encryption import Algorithm, ClientEncryption
from greenmongo.errors import EncryptionError
from tests.servers.kmip import KmipServer
from tests.waits import wait_until

pytest.importorskip("kmip", reason="PyKMIP (the test extra) is not installed")

OPTS = CodecOptions(uuid_representation=STANDARD)
RAND = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
LOCAL = {"key": os.urandom(96)}


@pytest.fixture(scope="module")
def kmip(tmp_path_factory):
    server = KmipServer(tmp_path_factory.mktemp("kmip")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(server_uri):
    client = MongoClient(server_uri)
    client.keyvault.kmip_keys.drop()
    try:
        yield client
    finally:
        client.close()


def encryption(client: Any, kmip: KmipServer, **tls: Any) -> ClientEncryption:
    return ClientEncryption({"kmip": {"endpoint": kmip.endpoint}, "local": LOCAL}, "keyvault.kmip_keys", client,
                            OPTS, kms_tls_options={"kmip": tls or kmip.tls_options})


def test_kmip_data_keys_secret_and_delegated(client, kmip) -> None:
    with encryption(client, kmip) as ce:
        for master_key in (None, {"delegated": True}):
            key_id = ce.create_data_key("kmip", master_key=master_key, key_alt_names=[f"k{bool(master_key)}"])
            document = ce.get_key(key_id)
            assert document["masterKey"]["provider"] == "kmip"
            assert isinstance(document["masterKey"]["keyId"], str)  # the KMIP unique identifier
            assert document["masterKey"].get("delegated", False) is bool(master_key)
            assert ce.decrypt(ce.encrypt("kmip secret", RAND, key_id=key_id)) == "kmip secret"


def test_rewrap_from_local_to_kmip_and_back(client, kmip) -> None:
    with encryption(client, kmip) as ce:
        key_id = ce.create_data_key("local")
        ciphertext = ce.encrypt(12345, RAND, key_id=key_id)
        result = ce.rewrap_many_data_key({}, provider="kmip")
        assert result.bulk_write_result.modified_count == 1
        assert ce.get_key(key_id)["masterKey"]["provider"] == "kmip"
    with encryption(client, kmip) as fresh:  # a new key cache: the key is unwrapped by the KMIP server
        assert fresh.decrypt(ciphertext) == 12345
        fresh.rewrap_many_data_key({}, provider="local")
    with encryption(client, kmip) as fresh:
        assert dict(fresh.get_key(key_id)["masterKey"]) == {"provider": "local"}
        assert fresh.decrypt(ciphertext) == 12345


def test_kmip_tls_needs_the_ca_and_the_client_certificate(client, kmip, tmp_path) -> None:
    with encryption(client, kmip, tlsCAFile=kmip.ca_file) as ce:  # no client certificate: the server refuses
        with pytest.raises(EncryptionError, match="KMS request to 127.0.0.1"):
            ce.create_data_key("kmip")
    with encryption(client, kmip, tlsCertificateKeyFile=kmip.client_pem) as ce:  # system CAs: not trusted
        with pytest.raises(EncryptionError, match="certificate verify failed"):
            ce.create_data_key("kmip")
    assert client.keyvault.kmip_keys.count_documents({}) == 0


def test_a_thousand_greenlets_encrypt_and_decrypt_without_blocking_the_hub(client, kmip) -> None:
    """1,000 greenlets at once on one ClientEncryption whose keys are on the KMIP server: the first 100 start
    with a cold key cache, so their KMIP requests run concurrently (PyKMIP's thread-per-connection server
    is what limits how many at once), then 1,000 more. No greenlet holds the hub more than 10 ms of CPU
    between two switches (CPU time: the OS giving the machine's two cores to others is not a block)."""
    with encryption(client, kmip) as setup:
        keys = [setup.create_data_key("kmip") for _ in range(5)]
    slices: dict[Any, float] = {}
    last = [time.thread_time()]
    collecting = [0.0, 0.0]  # garbage collection: when the current one started, CPU spent in them so far

    def on_gc(phase: str, info: Any) -> None:
        if phase == "start":
            collecting[0] = time.thread_time()
        else:
            collecting[1] += time.thread_time() - collecting[0]

    def trace(event: str, args: Any) -> None:
        if previous is not None:
            previous(event, args)
        if event in ("switch", "throw"):
            origin = args[0]
            now = time.thread_time()
            spent = now - last[0] - collecting[1]  # collections are the interpreter's, not the greenlet's
            last[0], collecting[1] = now, 0.0
            if spent > slices.get(origin, 0.0):
                slices[origin] = spent

    with encryption(client, kmip) as ce:
        def work(n: int) -> None:
            value = f"value {n}"
            assert ce.decrypt(ce.encrypt(value, RAND, key_id=keys[n % len(keys)])) == value

        previous = None
        previous = greenlet.settrace(trace)
        gc.callbacks.append(on_gc)
        last[0] = time.thread_time()
        try:
            cold = [gevent.spawn(work, n) for n in range(100)]
            gevent.joinall(cold, timeout=120, raise_error=True)
            warm = [gevent.spawn(work, n) for n in range(1000)]
            gevent.joinall(warm, timeout=120, raise_error=True)
        finally:
            greenlet.settrace(previous)
            gc.callbacks.remove(on_gc)
    workers = cold + warm
    assert all(worker.successful() for worker in workers)
    worst = max(slices.get(worker, 0.0) for worker in workers)
    assert worst < 0.010, f"a greenlet held the hub for {worst * 1000:.1f} ms of CPU"


def test_stop_leaves_no_process_of_the_kmip_server(tmp_path) -> None:
    # PyKMIP forks a policy directory monitor: stopping the server alone left it running, orphaned, one per run.
    server = KmipServer(tmp_path).start()
    group = server.process.pid  # the server leads its own process group
    try:
        assert os.getpgid(group) == group
    finally:
        server.stop()

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False  # a killed member not reaped yet by its new parent still counts

    wait_until(group_gone, 10, "a process of the KMIP server's group outlived stop()")
