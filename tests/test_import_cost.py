"""``import greenmongo`` leaves the heavy, rarely needed dependencies unimported (issue 20, start-up).

gunicorn workers and short-lived processes import greenmongo often: dnspython is needed only for
``mongodb+srv``, pyOpenSSL/cryptography and the OCSP/HTTP code only for TLS, snappy/zstandard only when
that compressor is negotiated, importlib.metadata only by ``check_for_min_version``. Each check runs in a
fresh interpreter (this test session has imported everything already), and the same fresh process then
shows that using the feature does import it, so a module left out of the list below cannot pass vacuously.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Imported only when first needed (and what needs them).
LAZY = {
    "dns": "mongodb+srv (net.dns)",
    "OpenSSL": "TLS (net.tls)",
    "cryptography": "TLS and OCSP (net.tls, net.ocsp)",
    "snappy": "the snappy compressor",
    "zstandard": "the zstd compressor",
    "greenmongo.net.tls": "the first TLS client",
    "greenmongo.net.ocsp": "the first TLS client",
    "greenmongo.net.ocsp_responders": "the first TLS client",
    "http.client": "OCSP responders and cloud credentials (net.http)",
    "importlib.metadata": "check_for_min_version",
    "importlib.abc": "nothing at run time (dropin's loader and finder do without its base classes)",
    "difflib": "a misspelled option's suggestions",
    "greenmongo.bson.json_reader": "json_util.loads",
    "hashlib": "SCRAM and MONGODB-AWS conversations",
    "greenmongo.auth.oidc": "MONGODB-OIDC, and the OIDC names of greenmongo.auth / auth_oidc",
    "greenmongo.auth.aws": "MONGODB-AWS, and encryption's AWS credentials",
    "greenmongo.crypt.auto": "a client with auto_encryption_opts",
    "greenmongo.bson.json_util": "the first log message with a document (and json_util's users)",
}


def _fresh(code: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "GREENMONGO_TEST_PATCHED"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("patched", [False, True], ids=["unpatched", "monkey-patched"])
def test_import_greenmongo_leaves_heavy_dependencies_unimported(patched: bool) -> None:
    # patch_all itself imports importlib.metadata (gevent's plugin entry points): only what greenmongo
    # adds to the patched process counts.
    loaded = _fresh(
        "import sys, json\n"
        + ("from gevent import monkey; monkey.patch_all()\n" if patched else "")
        + "before = set(sys.modules)\n"
        + "import greenmongo, greenmongo.bson, greenmongo.gridfs\n"
        + "from greenmongo import MongoClient\n"
        + "MongoClient('mongodb://127.0.0.1:1/', connect=False).close()\n"  # a plain client needs none of them
        + f"print(json.dumps([name for name in {sorted(LAZY)!r} if name in set(sys.modules) - before]))\n")
    assert loaded == [], {name: LAZY[name] for name in loaded}


def test_the_features_do_import_them_when_used() -> None:
    """The check above can fail: the same names do appear once the features that need them are used."""
    loaded = _fresh(
        "import sys, json\nimport greenmongo\n"
        "from greenmongo.net.dns import DnsResolver\nDnsResolver(['127.0.0.1:53'])\n"
        "client = greenmongo.MongoClient('mongodb://127.0.0.1:1/', tls=True, connect=False)\nclient.close()\n"
        "from greenmongo.auth.scram import ScramConversation\n"
        "ScramConversation('SCRAM-SHA-256', 'user', 'pencil').client_first()\n"
        "from greenmongo.auth import OIDCCallback\n"
        "from greenmongo.logs.messages import format_document\nformat_document({'a': 1})\n"
        f"print(json.dumps([name for name in {sorted(LAZY)!r} if name in sys.modules]))\n")
    for name in ("dns", "OpenSSL", "cryptography", "greenmongo.net.tls", "greenmongo.net.ocsp",
                 "greenmongo.net.ocsp_responders", "http.client", "hashlib", "greenmongo.auth.oidc",
                 "greenmongo.bson.json_util"):
        assert name in loaded, (name, loaded)
