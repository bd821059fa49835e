"""install_as_pymongo(): PyMongo's import names resolve to greenmongo's modules.

Each check runs in a fresh interpreter: the finder changes process-wide import state, and the
suite's own process must keep importing the real PyMongo where the benchmarks and evidence runs
use it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.one_pass


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)


def test_pymongo_bson_gridfs_and_submodules_are_greenmongo_modules() -> None:
    result = run("""
        import greenmongo
        greenmongo.install_as_pymongo()
        greenmongo.install_as_pymongo()  # idempotent
        import pymongo, pymongo.errors, bson, bson.objectid, bson.json_util, gridfs, gridfs.errors
        from pymongo import MongoClient
        from pymongo.errors import OperationFailure
        import greenmongo.errors, greenmongo.bson, greenmongo.gridfs
        assert MongoClient is greenmongo.MongoClient
        assert pymongo.errors is greenmongo.errors and OperationFailure is greenmongo.errors.OperationFailure
        assert bson is greenmongo.bson and bson.objectid.ObjectId is greenmongo.bson.ObjectId
        assert gridfs is greenmongo.gridfs and gridfs.errors is greenmongo.gridfs.errors
        assert pymongo.version == pymongo.__version__ == "4.20.1" and pymongo.version_tuple[:2] == (4, 20)
        assert greenmongo.version == greenmongo.__version__ != pymongo.version
        for name in ("pymongo.bson", "pymongo.gridfs", "pymongo.no_such_module"):
            try:
                __import__(name)
            except ImportError:
                pass
            else:
                raise AssertionError(name + " imported")
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_refused_when_the_real_pymongo_is_already_imported() -> None:
    pytest.importorskip("pymongo")  # the peer is installed with the test extras
    result = run("""
        import pymongo
        import greenmongo
        try:
            greenmongo.install_as_pymongo()
        except ImportError as exc:
            print(exc)
        else:
            raise AssertionError("installed over the real pymongo")
        import sys
        assert sys.modules["pymongo"] is pymongo
    """)
    assert result.returncode == 0, result.stderr
    assert "must run before anything imports pymongo" in result.stdout


def test_uninstall_restores_the_import_system() -> None:
    result = run("""
        import sys
        import greenmongo
        from greenmongo import dropin
        greenmongo.install_as_pymongo()
        import pymongo.errors
        dropin.uninstall()
        assert not any(isinstance(f, dropin.AliasFinder) for f in sys.meta_path)
        assert "pymongo" not in sys.modules and "pymongo.errors" not in sys.modules
        print("ok")
    """)
    assert result.returncode == 0, result.stderr

