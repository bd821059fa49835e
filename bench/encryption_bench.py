"""Explicit encryption throughput: greenmongo's ClientEncryption against PyMongo 4.20's, same pymongocrypt.

Both encrypt (deterministic and random) and decrypt the same small values with the local KMS provider and a
warm data key cache, so the figure is the driver's own path around libmongocrypt: BSON wrapping of the value,
the state machine, the result's decoding. Iterations alternate between the drivers, and each driver's figure
is the best of N, so machine noise hits both alike. The server is a throwaway SecantusDB (or MONGODB_URI); it
is used only to hold the one data key.

    python bench/encryption_bench.py [--iterations N] [--ops N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOCAL_KEY = os.urandom(96)
TASKS = ("encrypt-det", "encrypt-rand", "decrypt")


def _setup(uri: str, driver: str):
    if driver == "greenmongo":
        from greenmongo import MongoClient
        from greenmongo.bson import STANDARD, CodecOptions
        from greenmongo.encryption import Algorithm, ClientEncryption
    else:
        from bson import STANDARD, CodecOptions
        from pymongo import MongoClient
        from pymongo.encryption import Algorithm, ClientEncryption
    client = MongoClient(uri)
    namespace = f"bench_keyvault.{driver}"
    client.bench_keyvault[driver].drop()
    ce = ClientEncryption({"local": {"key": LOCAL_KEY}}, namespace, client, CodecOptions(uuid_representation=STANDARD))
    key_id = ce.create_data_key("local")
    det, rand = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic, Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
    ciphertext = ce.encrypt("123-45-6789", rand, key_id=key_id)
    tasks = {
        "encrypt-det": lambda: ce.encrypt("123-45-6789", det, key_id=key_id),
        "encrypt-rand": lambda: ce.encrypt("123-45-6789", rand, key_id=key_id),
        "decrypt": lambda: ce.decrypt(ciphertext),
    }
    for task in tasks.values():  # warm the key cache
        task()
    return client, ce, tasks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--ops", type=int, default=2000)
    args = parser.parse_args(argv)
    server = None
    uri = os.environ.get("MONGODB_URI")
    if not uri:
        from tests.servers.secantus import SecantusServer

        server = SecantusServer().start()
        uri = server.uri
    try:
        drivers = {name: _setup(uri, name) for name in ("greenmongo", "pymongo")}
        best = {(driver, task): float("inf") for driver in drivers for task in TASKS}
        for _ in range(args.iterations):
            for task in TASKS:
                for driver, (_client, _ce, tasks) in drivers.items():
                    run = tasks[task]
                    start = time.perf_counter()
                    for _ in range(args.ops):
                        run()
                    best[driver, task] = min(best[driver, task], time.perf_counter() - start)
        print(f"{'task':<14}{'greenmongo ops/s':>18}{'pymongo ops/s':>16}{'ratio':>8}")
        for task in TASKS:
            ours, theirs = best["greenmongo", task], best["pymongo", task]
            print(f"{task:<14}{args.ops / ours:>18.0f}{args.ops / theirs:>16.0f}{theirs / ours:>8.2f}")
        for client, ce, _tasks in drivers.values():
            ce.close()
            client.close()
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
