"""DriverBench single- and multi-document tasks: greenmongo vs PyMongo under gevent monkey-patching.

Tasks (Driver Performance Benchmarking spec, op counts scaled down for a 2-core machine):
FindOneById, SmallDocInsertOne, LargeDocInsertOne, FindManyAndEmptyCursor, SmallDocBulkInsert,
LargeDocBulkInsert by default; ``--tasks`` also takes RunCommand, GridFsUpload, GridFsDownload and the
parallel tasks (``LdjsonMultiImport/greenlets`` .. ``GridFsMultiDownload/processes``, SecantusDB only),
which bench/driverbench.py (the whole suite, with the spec's timing rules) runs. ``--peers`` also
takes ``floor``: the raw-socket floor (pre-encoded OP_MSG bytes, no driver; canned targets,
FindOneById and SmallDocInsertOne). Each runs against these servers ("targets"), a fresh process
for each peer:

* ``secantus``: SecantusDB (``secantusd-py``, a one-member replica set);
* ``canned``: a canned-reply server (bench/canned_server.py) posing as a one-member replica set,
  whose replies are built before the clock starts, so the round trip costs the client almost
  everything;
* ``canned-nosessions``: the same without ``logicalSessionTimeoutMinutes`` in hello, so PyMongo,
  like greenmongo today, sends no implicit-session ``lsid`` and no retryable-write ``txnNumber``:
  the like-for-like comparison of the two drivers' per-op paths.

Each peer is its own process: greenmongo (gevent, no patching) and PyMongo after
``gevent.monkey.patch_all()``. Both use the same public API calls. Reported per task:

* MB/s -- the spec's score: source file size x documents / wall time of the "do task" phase;
* client CPU µs per op -- ``time.process_time()`` of the client process over "do task" divided by
  the documents handled (one op = one document, the spec's scale unit). The server is another
  process, so its CPU is not in this figure (it is shown separately, read from /proc);
* the ratio greenmongo / PyMongo (target for CPU: <= 0.8);
* that CPU split into "codec" (the peer's own BSON encode/decode of the op's messages, timed
  alone in the same process) and "path" (the rest: selection, pool, wire, parsing, the hub).

The peers alternate over ``--passes`` passes (fresh client and server processes each time), so a
noisy spell on the shared machine hits both; each figure is the best of all passes x
``--iterations`` runs, each pass after one warm-up run (medians are in ``--json``).

Then FindOneById with 1, 100 and 1,000 concurrent greenlets (maxPoolSize 100) against the canned
server: throughput, p50/p99/max latency per op (pool wait included; rounds of all passes pooled)
and the p99 ratio (target at 1,000 greenlets: <= 0.1).

    python bench/driver_bench.py [--targets secantus,canned,canned-nosessions] [--iterations 3]
        [--passes 2] [--small-ops 2000] [--large-ops 5] [--concurrent-ops 10000] [--concurrent-rounds 3]
        [--json out.json]
    python bench/driver_bench.py --profile DIR [--targets canned] [--tasks FindOneById]
        # cProfile (CPU-time clock) of greenmongo's "do task" phases instead of comparing
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402
from benchlib import (  # noqa: E402,F401  (re-exported: csot_bench imports them from here)
    CannedServerProcess,
    IterationPolicy,
    SecantusProcess,
    nearest_rank,
    percentiles,
    process_cpu_seconds,
)

ROOT = benchlib.ROOT
DATA_DIR = benchlib.SINGLE_DIR

#: The tasks this script ran before the whole suite (bench/driverbench.py); still its default.
TASKS = ("FindOneById", "SmallDocInsertOne", "LargeDocInsertOne", "FindManyAndEmptyCursor",
         "SmallDocBulkInsert", "LargeDocBulkInsert")
PARALLEL_BASES = ("LdjsonMultiImport", "LdjsonMultiExport", "GridFsMultiUpload", "GridFsMultiDownload")
PARALLEL_MODES = ("greenlets", "processes")
#: Every task the client process knows, the spec's order; parallel ones as "<task>/<mode>".
ALL_TASKS = ("RunCommand", "FindOneById", "SmallDocInsertOne", "LargeDocInsertOne",
             "FindManyAndEmptyCursor", "SmallDocBulkInsert", "LargeDocBulkInsert", "GridFsUpload",
             "GridFsDownload", *(f"{base}/{mode}" for mode in PARALLEL_MODES for base in PARALLEL_BASES))
LARGE_TASKS = ("LargeDocInsertOne", "LargeDocBulkInsert")  # the spec's 10-op tasks
#: Tasks the raw-socket floor has (the canned targets only).
FLOOR_TASKS = ("FindOneById", "SmallDocInsertOne")
TARGETS = ("secantus", "canned", "canned-nosessions")
PEERS = ("greenmongo", "pymongo", "floor")
CONCURRENCY = (1, 100, 1000)
MAX_POOL_SIZE = 100

#: The scale of the data-set tasks (GridFS, parallel); the spec's full scale.
SPEC_SCALE = {"gridfs_large_bytes": benchlib.GRIDFS_LARGE_BYTES,
              "ldjson_files": benchlib.LDJSON_FILES, "ldjson_lines": benchlib.LDJSON_LINES,
              "gridfs_files": benchlib.GRIDFS_MULTI_FILES, "gridfs_bytes": benchlib.GRIDFS_MULTI_BYTES,
              "greenlets": 16, "workers": 2}


# -- the tasks (run in the client process; the API calls are the same for both peers) ----------

class Task:
    """One micro-benchmark: ``setup`` once, then ``before`` + timed ``run`` per iteration."""

    source_file = ""
    spec_ops = 10_000
    #: An untimed run before the timed ones (connections made, caches warm); the data-set tasks
    #: skip it: their setup already runs the same path, and a run costs seconds.
    warmup = True

    def __init__(self, client: Any, ops: int, env: Optional[dict] = None) -> None:
        self.client = client
        self.ops = ops
        self.env = env or {}
        self.database = client.perftest
        self.corpus = self.database.corpus
        path = DATA_DIR / self.source_file
        self.document = json.loads(path.read_text())
        self.size_bytes = path.stat().st_size * ops  # the spec's dataset size: file size x ops

    def setup(self) -> None:
        self.client.drop_database("perftest")

    def before(self) -> None:
        pass

    def run(self) -> None:
        raise NotImplementedError

    def after(self) -> None:
        """The spec's "after task" phase (untimed)."""

    def check(self) -> None:
        """After the timed runs: the work really happened."""

    def teardown(self) -> None:
        self.client.drop_database("perftest")

    def _recreate_corpus(self) -> None:
        self.corpus.drop()
        self.database.command("create", "corpus")


class FindOneById(Task):
    source_file = "tweet.json"

    def setup(self) -> None:
        super().setup()
        self.corpus.insert_many([{**self.document, "_id": number} for number in range(1, self.ops + 1)])

    def run(self) -> None:
        find_one = self.corpus.find_one
        for number in range(1, self.ops + 1):
            find_one({"_id": number})

    def check(self) -> None:
        found = self.corpus.find_one({"_id": self.ops})
        assert found is not None and found["_id"] == self.ops, found


class _InsertTask(Task):
    def before(self) -> None:
        self._recreate_corpus()
        # fresh copies outside the clock: the driver adds _id to each one
        self.documents = [dict(self.document) for _ in range(self.ops)]

    def check(self) -> None:
        assert all("_id" in document for document in self.documents)


class SmallDocInsertOne(_InsertTask):
    source_file = "small_doc.json"

    def run(self) -> None:
        insert_one = self.corpus.insert_one
        for document in self.documents:
            insert_one(document)


class LargeDocInsertOne(SmallDocInsertOne):
    source_file = "large_doc.json"
    spec_ops = 10


class SmallDocBulkInsert(_InsertTask):
    source_file = "small_doc.json"

    def run(self) -> None:
        result = self.corpus.insert_many(self.documents, ordered=True)
        assert len(result.inserted_ids) == self.ops


class LargeDocBulkInsert(SmallDocBulkInsert):
    source_file = "large_doc.json"
    spec_ops = 10


class FindManyAndEmptyCursor(Task):
    source_file = "tweet.json"

    def setup(self) -> None:
        super().setup()
        self.corpus.insert_many([dict(self.document) for _ in range(self.ops)])

    def run(self) -> None:
        count = 0
        for _document in self.corpus.find({}):
            count += 1
        self.count = count

    def check(self) -> None:
        assert self.count == self.ops, (self.count, self.ops)


def codec_cost_us(task: Task, codec: Any, repeat: int = 5) -> Optional[float]:
    """Client CPU µs per op spent in the peer's own BSON codec alone for this task's messages.

    The BSON work each op implies, done directly (best of ``repeat``): encoding the command and
    document(s), decoding the reply. The rest of the "CPU µs/op" is the driver's own path.
    """
    int64, object_id = codec.Int64, codec.ObjectId
    name = type(task).__name__
    if name not in TASKS:
        return None
    if name == "FindOneById":
        reply = codec.encode({"cursor": {"firstBatch": [{**task.document, "_id": 1}], "id": int64(0),
                                         "ns": "perftest.corpus"}, "ok": 1.0})
        command = {"find": "corpus", "filter": {"_id": 1}, "limit": 1, "singleBatch": True, "$db": "perftest"}
        per_op, work = 1, lambda: (codec.encode(command), codec.decode(reply))
    elif name == "FindManyAndEmptyCursor":
        batch = [{**task.document, "_id": object_id()} for _ in range(100)]
        reply = codec.encode({"cursor": {"nextBatch": batch, "id": int64(0), "ns": "perftest.corpus"}, "ok": 1.0})
        per_op, work = 100, lambda: codec.decode(reply)
    else:  # inserts: the document (with the ObjectId the driver adds) is encoded
        command = {"insert": "corpus", "ordered": True, "$db": "perftest"}
        reply = codec.encode({"n": 1, "ok": 1.0})
        bulk = "Bulk" in name
        documents = [{**task.document, "_id": object_id()} for _ in range(10 if "Large" in name else 200)]

        def work() -> None:
            for document in documents:
                codec.encode(document)
                if not bulk:
                    codec.encode(command)
                    codec.decode(reply)
        per_op = len(documents)
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best / per_op * 1e6


class RunCommand(Task):
    """``{hello: true}`` ``ops`` times; the spec's size is 13 bytes (the command) per op."""

    def __init__(self, client: Any, ops: int, env: Optional[dict] = None) -> None:
        self.client, self.ops, self.env = client, ops, env or {}
        self.database = client.perftest
        self.size_bytes = 13 * ops

    def setup(self) -> None:
        pass

    def run(self) -> None:
        command = self.database.command
        for _ in range(self.ops):
            command({"hello": True})

    def teardown(self) -> None:
        pass


def gridfs_bucket(database: Any) -> Any:
    """The peer's GridFSBucket on ``database`` (greenmongo's or PyMongo's ``gridfs``)."""
    if type(database).__module__.startswith("greenmongo"):
        from greenmongo.gridfs import GridFSBucket
    else:
        from gridfs import GridFSBucket
    return GridFSBucket(database)


def drop_bucket(database: Any) -> None:
    """Drop the default bucket's collections (PyMongo's GridFSBucket has no ``drop``)."""
    database.drop_collection("fs.files")
    database.drop_collection("fs.chunks")


class _DatasetTask(Task):
    """A task over files of a spec data set (GridFS, parallel): one op = one file."""

    warmup = False

    def __init__(self, client: Any, ops: int, env: Optional[dict] = None) -> None:
        self.client, self.env = client, env or {}
        self.scale = {**SPEC_SCALE, **self.env.get("scale", {})}
        self.database = client.perftest
        self.corpus = self.database.corpus
        self.dataset = self.load_dataset()
        self.paths = self.dataset.paths
        self.ops = len(self.paths)
        self.size_bytes = self.dataset.size_bytes
        self._bucket: Any = None

    def load_dataset(self) -> benchlib.Dataset:
        raise NotImplementedError

    @property
    def bucket(self) -> Any:
        if self._bucket is None:
            self._bucket = gridfs_bucket(self.database)
        return self._bucket


class GridFsUpload(_DatasetTask):
    def load_dataset(self) -> benchlib.Dataset:
        return benchlib.gridfs_large(self.scale["gridfs_large_bytes"])

    def setup(self) -> None:
        super().setup()
        self.data = self.paths[0].read_bytes()

    def before(self) -> None:
        drop_bucket(self.database)
        self.bucket.upload_from_stream("one-byte", b"\x00")  # the bucket's collections and indexes exist

    def run(self) -> None:
        stream = self.bucket.open_upload_stream("gridfstest")
        stream.write(self.data)
        stream.close()
        self.file_id = stream._id

    def check(self) -> None:
        assert self.bucket.open_download_stream(self.file_id).read() == self.data


class GridFsDownload(GridFsUpload):
    def setup(self) -> None:
        super().setup()
        self.file_id = self.bucket.upload_from_stream("gridfstest", self.data)

    def before(self) -> None:
        pass

    def run(self) -> None:
        self.downloaded = self.bucket.open_download_stream(self.file_id).read()

    def check(self) -> None:
        assert len(self.downloaded) == len(self.data)


class _ParallelTask(_DatasetTask):
    """A parallel ETL task: ``do_file`` per file, across greenlets or across worker processes.

    ``greenlets`` mode: a gevent pool of ``scale["greenlets"]`` greenlets in the client process.
    ``processes`` mode: ``scale["workers"]`` worker processes (each its own client, as gunicorn
    workers would have), started and connected in "before task", each taking every Nth file one
    after another; the clock runs from their "go" to the last one's "done".
    """

    mode = "greenlets"

    def __init__(self, client: Any, ops: int, env: Optional[dict] = None) -> None:
        super().__init__(client, ops, env)
        self.out_dir = Path(self.env.get("out_dir") or tempfile.mkdtemp(prefix="driverbench-out-"))
        self.workers: Optional[WorkerGroup] = None

    def do_file(self, index: int) -> None:
        raise NotImplementedError

    def worker_extra(self) -> dict:
        """What a worker process needs beyond the data set (set up in this process)."""
        return {"out_dir": str(self.out_dir)}

    def before(self) -> None:
        if self.mode == "processes":
            count = min(self.scale["workers"], self.ops)
            shares = [list(range(first, self.ops, count)) for first in range(count)]
            self.workers = WorkerGroup(self.env, f"{type(self).__name__}/processes", shares, self.worker_extra())

    def run(self) -> None:
        if self.workers is not None:
            self.workers.go()
            return
        import gevent.pool

        pool = gevent.pool.Pool(self.scale["greenlets"])
        for _ in pool.imap_unordered(self.do_file, range(self.ops)):
            pass

    def after(self) -> None:
        if self.workers is not None:
            self.workers.finish()  # their client.close() and exit, off the clock
            self.workers = None

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.out_dir, ignore_errors=True)

    def _clear_out_dir(self) -> None:
        shutil.rmtree(self.out_dir, ignore_errors=True)
        self.out_dir.mkdir(parents=True)


class LdjsonMultiImport(_ParallelTask):
    def load_dataset(self) -> benchlib.Dataset:
        return benchlib.ldjson_multi(self.scale["ldjson_files"], self.scale["ldjson_lines"])

    def before(self) -> None:
        self._recreate_corpus()
        super().before()

    def do_file(self, index: int) -> None:
        loads = json.loads
        with open(self.paths[index], "rb") as source:  # loaded from disk in the timed phase
            documents = [loads(line) for line in source]
        self.corpus.insert_many(documents, ordered=False)

    def check(self) -> None:
        expected = self.ops * self.scale["ldjson_lines"]
        assert self.corpus.count_documents({}) == expected, expected


class LdjsonMultiExport(_ParallelTask):
    """Each file's documents are the ``_id`` range ``[index * lines, (index + 1) * lines)``."""

    def load_dataset(self) -> benchlib.Dataset:
        return benchlib.ldjson_multi(self.scale["ldjson_files"], self.scale["ldjson_lines"])

    def setup(self) -> None:
        super().setup()
        lines = self.scale["ldjson_lines"]
        for index, path in enumerate(self.paths):
            with open(path, "rb") as source:
                documents = [{**json.loads(line), "_id": index * lines + number}
                             for number, line in enumerate(source)]
            self.corpus.insert_many(documents, ordered=False)

    def before(self) -> None:
        self._clear_out_dir()
        super().before()

    def do_file(self, index: int) -> None:
        lines = self.scale["ldjson_lines"]
        dumps = json.dumps
        with open(self.out_dir / f"ldjson{index:03d}.txt", "w") as target:
            for document in self.corpus.find({"_id": {"$gte": index * lines, "$lt": (index + 1) * lines}}):
                target.write(dumps(document) + "\n")
            target.flush()
            os.fsync(target.fileno())

    def check(self) -> None:
        written = sum(len(path.read_bytes().splitlines()) for path in self.out_dir.iterdir())
        assert written == self.ops * self.scale["ldjson_lines"], written


class GridFsMultiUpload(_ParallelTask):
    def load_dataset(self) -> benchlib.Dataset:
        return benchlib.gridfs_multi(self.scale["gridfs_files"], self.scale["gridfs_bytes"])

    def before(self) -> None:
        drop_bucket(self.database)
        self.bucket.upload_from_stream("one-byte", b"\x00")  # indexes made outside the clock
        super().before()

    def do_file(self, index: int) -> None:
        path = self.paths[index]
        with open(path, "rb") as source:
            self.bucket.upload_from_stream(path.name, source)

    def check(self) -> None:
        assert self.database["fs.files"].count_documents({}) == self.ops + 1


class GridFsMultiDownload(_ParallelTask):
    def load_dataset(self) -> benchlib.Dataset:
        return benchlib.gridfs_multi(self.scale["gridfs_files"], self.scale["gridfs_bytes"])

    def setup(self) -> None:
        super().setup()
        drop_bucket(self.database)
        self.file_ids = []
        for path in self.paths:
            with open(path, "rb") as source:
                self.file_ids.append(self.bucket.upload_from_stream(path.name, source))

    def worker_extra(self) -> dict:
        return {**super().worker_extra(), "file_ids": [str(file_id) for file_id in self.file_ids]}

    def attach(self, extra: dict) -> None:
        """In a worker process: the file ids uploaded by the client process."""
        if type(self.database).__module__.startswith("greenmongo"):
            from greenmongo.bson import ObjectId
        else:
            from bson import ObjectId
        self.file_ids = [ObjectId(file_id) for file_id in extra["file_ids"]]

    def before(self) -> None:
        self._clear_out_dir()
        super().before()

    def do_file(self, index: int) -> None:
        with open(self.out_dir / self.paths[index].name, "wb") as target:
            self.bucket.download_to_stream(self.file_ids[index], target)
            target.flush()
            os.fsync(target.fileno())

    def check(self) -> None:
        sizes = sorted(path.stat().st_size for path in self.out_dir.iterdir())
        assert sizes == sorted(path.stat().st_size for path in self.paths), sizes


class WorkerGroup:
    """Worker processes for a parallel task: started and connected now, released by ``go``."""

    def __init__(self, env: dict, task: str, shares: list[list[int]], extra: dict) -> None:
        child_env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.processes = []
        for share in shares:
            config = {"peer": env["peer"], "uri": env["uri"], "scale": env.get("scale", {}), "task": task,
                      "indices": share, "extra": extra}
            self.processes.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--parallel-worker", json.dumps(config)],
                cwd=ROOT, env=child_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for process in self.processes:
            self._expect(process, "ready")

    @staticmethod
    def _expect(process: subprocess.Popen, word: str) -> None:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if line != word:
            process.kill()
            raise RuntimeError(f"parallel worker {process.pid}: expected {word!r}, got {line!r}")

    def go(self) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in self.processes:
            self._expect(process, "done")

    def finish(self) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.close()
            if process.wait() != 0:
                raise RuntimeError(f"parallel worker {process.pid} exited with {process.returncode}")


def run_parallel_worker(config: dict) -> None:
    """A worker process of a parallel task: connect, say "ready", wait for "go", do its files."""
    client, _label, _codec = make_client(config["peer"], config["uri"])
    env = {"peer": config["peer"], "uri": config["uri"], "scale": config["scale"],
           "out_dir": config["extra"]["out_dir"]}
    task = TASK_CLASSES[config["task"]](client, 0, env)
    if hasattr(task, "attach"):
        task.attach(config["extra"])
    client.admin.command("ping")
    print("ready", flush=True)
    import gevent.socket

    gevent.socket.wait_read(sys.stdin.fileno())  # the hub keeps running (monitors, pool) until "go"
    sys.stdin.readline()
    for index in config["indices"]:
        task.do_file(index)
    print("done", flush=True)
    client.close()


# -- the raw floor: pre-encoded OP_MSG bytes over a plain gevent socket, no driver -----------------

_OP_MSG_HEADER = struct.Struct("<iiii")


class _FloorTask(Task):
    """The least a client can do for the task: send prepared bytes, read the reply's bytes.

    The messages (one per op, with the ids and ObjectIds the driver would send) are encoded
    before the clock; "do task" is ``sendall`` and ``recv_into`` on one gevent socket to the
    canned-reply server: no driver, no BSON, no pool, no server selection, no session.
    """

    def __init__(self, client: Any, ops: int, env: Optional[dict] = None) -> None:
        from urllib.parse import urlsplit

        import gevent.socket

        from greenmongo import bson

        self.client, self.ops, self.env = None, ops, env or {}
        path = DATA_DIR / self.source_file
        self.document = json.loads(path.read_text())
        self.size_bytes = path.stat().st_size * ops
        address = urlsplit(self.env["uri"])
        self.sock = gevent.socket.create_connection((address.hostname, address.port))
        self.sock.setsockopt(gevent.socket.IPPROTO_TCP, gevent.socket.TCP_NODELAY, 1)
        self.buffer = bytearray(1 << 16)
        self.messages = [self.message(number, bson) for number in range(1, ops + 1)]

    @staticmethod
    def op_msg(request_id: int, body: bytes, sequence: bytes = b"") -> bytes:
        payload = b"\x00\x00\x00\x00\x00" + body + sequence
        return _OP_MSG_HEADER.pack(16 + len(payload), request_id, 0, 2013) + payload

    def message(self, number: int, bson: Any) -> bytes:
        raise NotImplementedError

    def setup(self) -> None:
        pass

    def run(self) -> None:
        sendall, recv_into = self.sock.sendall, self.sock.recv_into
        view = memoryview(self.buffer)
        unpack_from = _OP_MSG_HEADER.unpack_from
        for message in self.messages:
            sendall(message)
            received = recv_into(view)
            while received < 16:
                received += recv_into(view[received:])
            length = unpack_from(view)[0]
            while received < length:
                received += recv_into(view[received:])

    def teardown(self) -> None:
        self.sock.close()


class FloorFindOneById(_FloorTask):
    source_file = "tweet.json"

    def message(self, number: int, bson: Any) -> bytes:
        return self.op_msg(number, bson.encode({"find": "corpus", "filter": {"_id": number}, "limit": 1,
                                                "singleBatch": True, "$db": "perftest"}))


class FloorSmallDocInsertOne(_FloorTask):
    source_file = "small_doc.json"

    def message(self, number: int, bson: Any) -> bytes:
        document = bson.encode({"_id": bson.ObjectId(), **self.document})
        sequence = b"documents\x00" + document
        return self.op_msg(number, bson.encode({"insert": "corpus", "ordered": True, "$db": "perftest"}),
                           b"\x01" + struct.pack("<i", 4 + len(sequence)) + sequence)


def _parallel_class(base: type, mode: str) -> type:
    return type(base.__name__, (base,), {"mode": mode})


TASK_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in
    (RunCommand, FindOneById, SmallDocInsertOne, LargeDocInsertOne, FindManyAndEmptyCursor, SmallDocBulkInsert,
     LargeDocBulkInsert, GridFsUpload, GridFsDownload)}
TASK_CLASSES.update({f"{base.__name__}/{mode}": _parallel_class(base, mode) for mode in PARALLEL_MODES
                     for base in (LdjsonMultiImport, LdjsonMultiExport, GridFsMultiUpload, GridFsMultiDownload)})
FLOOR_CLASSES = {"FindOneById": FloorFindOneById, "SmallDocInsertOne": FloorSmallDocInsertOne}


def task_ops(task: str, small_ops: int, large_ops: int) -> int:
    return large_ops if task in LARGE_TASKS else small_ops


# -- the client process ---------------------------------------------------------------------------

def make_client(peer: str, uri: str) -> tuple[Any, str, Any]:
    """(client, peer label, the peer's BSON module); PyMongo is imported only after monkey-patching."""
    if peer == "pymongo":
        from gevent import monkey

        monkey.patch_all()
        import bson
        import pymongo

        assert bson.has_c(), "PyMongo's C extension is not available"
        return pymongo.MongoClient(uri, maxPoolSize=MAX_POOL_SIZE), f"pymongo {pymongo.version}", bson
    import greenmongo
    from greenmongo import bson as greenmongo_bson

    return greenmongo.MongoClient(uri, maxPoolSize=MAX_POOL_SIZE), "greenmongo", greenmongo_bson


def measure_task(task: Task, policy: IterationPolicy, server_pid: Optional[int], profiler: Any = None) -> dict:
    """The spec's phases: setup, then before + timed "do task" while ``policy`` asks for more."""
    task.setup()
    if task.warmup:
        task.before()
        task.run()  # warm-up: connections made, code paths and caches warm
    walls: list[float] = []
    cpus: list[float] = []
    server_cpus: list[float] = []
    while policy.more(len(walls), sum(walls)):
        task.before()
        server_started = process_cpu_seconds(server_pid)
        cpu_started = time.process_time()
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        task.run()
        if profiler is not None:
            profiler.disable()
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        server_cpus.append(process_cpu_seconds(server_pid) - server_started)
        walls.append(wall)
        cpus.append(cpu)
        task.after()
    task.check()
    task.teardown()
    return {"ops": task.ops, "size_bytes": task.size_bytes, "walls": walls, "cpus": cpus,
            "server_cpus": server_cpus}


def summarize_task(passes: list[dict]) -> dict:
    """The figures of one task from the raw timings of every pass (best and median over all).

    The spec's score is ``mb_per_s_median`` (size / median wall time); the percentiles are the
    spec's recorded ones (nearest rank, of the wall times).
    """
    first = passes[0]
    ops, size = first["ops"], first["size_bytes"]
    walls = [wall for raw in passes for wall in raw["walls"]]
    cpus = [cpu for raw in passes for cpu in raw["cpus"]]
    server_cpus = [cpu for raw in passes for cpu in raw["server_cpus"]]
    codecs = [raw["codec_us_per_op"] for raw in passes if raw.get("codec_us_per_op") is not None]
    return {
        "ops": ops, "size_bytes": size, "iterations": len(walls),
        "mb_per_s_best": size / 1e6 / min(walls),
        "mb_per_s_median": size / 1e6 / statistics.median(walls),
        "cpu_us_per_op_best": min(cpus) / ops * 1e6,
        "cpu_us_per_op_median": statistics.median(cpus) / ops * 1e6,
        "server_cpu_us_per_op_median": statistics.median(server_cpus) / ops * 1e6,
        "codec_us_per_op": min(codecs) if codecs else None,
        "percentiles_s": percentiles(walls),
        "walls": walls, "cpus": cpus,
    }


def measure_concurrency(client: Any, greenlets: int, total_ops: int, ids: int, rounds: int,
                        server_pid: Optional[int] = None) -> dict:
    """FindOneById from ``greenlets`` greenlets at once; latency of each op includes its pool wait.

    A greenlet's first op is timed from its spawn (the moment the request "arrives"), not from
    when the hub first runs it: with thousands spawned at once, when a greenlet starts is part of
    its wait. After a warm-up round (it fills the pool), ``rounds`` rounds of ``total_ops`` ops;
    latencies of all rounds are pooled (one round's tail swings with what else the machine does).
    """
    import gevent

    corpus = client.perftest.corpus
    per_greenlet = max(1, total_ops // greenlets)

    def worker(offset: int, latencies: list, spawned: float) -> None:
        find_one = corpus.find_one
        clock = time.perf_counter
        started = spawned
        for step in range(per_greenlet):
            find_one({"_id": (offset + step) % ids + 1})
            finished = clock()
            latencies.append(finished - started)
            started = finished

    def one_round(ops_each: int) -> tuple[list, float, float]:
        nonlocal per_greenlet
        saved, per_greenlet = per_greenlet, ops_each
        latencies: list = []
        cpu_started = time.process_time()
        started = time.perf_counter()
        clock = time.perf_counter
        gevent.joinall([gevent.spawn(worker, index * 7919, latencies, clock()) for index in range(greenlets)],
                       raise_error=True)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        per_greenlet = saved
        return latencies, elapsed, cpu

    one_round(max(1, per_greenlet // 10))  # warm-up: fills the pool
    latencies, elapsed, cpu = [], 0.0, 0.0
    for _ in range(rounds):
        round_latencies, round_elapsed, round_cpu = one_round(per_greenlet)
        latencies += round_latencies
        elapsed += round_elapsed
        cpu += round_cpu
    result = {"greenlets": greenlets, "latencies_us": [round(latency * 1e6) for latency in latencies],
              "elapsed": elapsed, "cpu": cpu}
    if greenlets > MAX_POOL_SIZE and server_pid:
        result["memory"] = measure_waiting_memory(client, greenlets, ids, server_pid)
    return result


def measure_waiting_memory(client: Any, greenlets: int, ids: int, server_pid: int) -> dict:
    """Bytes held per greenlet waiting in a find_one, and per greenlet waiting on a bare Event.

    The canned server is paused (SIGSTOP) so no find can finish; ``greenlets`` greenlets each start
    a find_one (maxPoolSize of them send and wait for the reply, the rest wait for a connection);
    once every one has run up to its wait, the memory traced by tracemalloc (and the RSS) above the
    baseline is divided by the greenlets waiting; then the server resumes (SIGCONT). The same
    count of greenlets blocked on one ``gevent.event.Event`` gives the cost of a greenlet itself.
    """
    import gc
    import signal
    import tracemalloc

    import gevent
    import gevent.event

    corpus = client.perftest.corpus

    def sample(target: Callable[[int], None], pause: Callable[[], None],
               release: Callable[[], None]) -> tuple[float, float, int]:
        started = [0]

        def body(index: int) -> None:
            started[0] += 1
            target(index)

        gc.collect()
        rss_before = benchlib.rss_bytes()
        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
        pause()
        try:
            workers = [gevent.spawn(body, index) for index in range(greenlets)]
            while started[0] < greenlets:
                gevent.sleep(0)
            gevent.sleep(0.05)  # the last ones reach their wait
            traced = tracemalloc.get_traced_memory()[0] - traced_before
            rss = benchlib.rss_bytes() - rss_before
            waiting = sum(1 for worker in workers if not worker.dead)
            tracemalloc.stop()
        finally:
            release()
        gevent.joinall(workers, raise_error=True)
        return traced / max(1, waiting), rss / max(1, waiting), waiting

    driver_traced, driver_rss, waiting = sample(
        lambda index: corpus.find_one({"_id": index % ids + 1}),
        lambda: os.kill(server_pid, signal.SIGSTOP), lambda: os.kill(server_pid, signal.SIGCONT))
    event = gevent.event.Event()
    bare_traced, bare_rss, _ = sample(lambda index: event.wait(), lambda: None, event.set)
    return {"waiting": waiting, "traced_bytes_per_waiter": driver_traced, "rss_bytes_per_waiter": driver_rss,
            "bare_traced_bytes_per_waiter": bare_traced, "bare_rss_bytes_per_waiter": bare_rss}


def summarize_concurrency(passes: list[dict]) -> dict:
    """One scenario's figures with the latencies of every round of every pass pooled.

    Fairness is the longest wait over the mean wait (a wait = one find_one from call to result,
    the pool wait included); a FIFO pool drained at a steady rate gives about 2.
    """
    latencies = sorted(latency / 1e6 for raw in passes for latency in raw["latencies_us"])
    elapsed = sum(raw["elapsed"] for raw in passes)
    cpu = sum(raw["cpu"] for raw in passes)
    ops = len(latencies)
    mean = sum(latencies) / ops
    memory = [raw["memory"] for raw in passes if raw.get("memory")]
    return {
        "greenlets": passes[0]["greenlets"], "ops": ops, "ops_per_s": ops / elapsed,
        "p50_ms": nearest_rank(latencies, 50) * 1e3, "p99_ms": nearest_rank(latencies, 99) * 1e3,
        "p999_ms": nearest_rank(latencies, 99.9) * 1e3, "max_ms": latencies[-1] * 1e3,
        "mean_ms": mean * 1e3, "fairness": latencies[-1] / mean if mean else 0.0,
        "cpu_us_per_op": cpu / ops * 1e6,
        "memory": ({key: statistics.median(sample[key] for sample in memory) for key in memory[0]}
                   if memory else None),
    }


def run_client(config: dict) -> dict:
    peer = config["peer"]
    policy = IterationPolicy(**config["policy"])
    env = {"peer": peer, "uri": config["uri"], "scale": config.get("scale", {})}
    if peer == "floor":
        client, label, codec = None, "raw floor", None
    else:
        client, label, codec = make_client(peer, config["uri"])
    profile_dir = config.get("profile_dir")
    results: dict = {"label": label, "tasks": {}, "concurrency": []}
    try:
        for name in config["tasks"]:
            profiler = None
            if profile_dir:
                import cProfile

                profiler = cProfile.Profile(time.process_time)  # CPU, not time spent waiting in the hub
            ops = task_ops(name, config["small_ops"], config["large_ops"])
            if peer == "floor":
                task: Task = FLOOR_CLASSES[name](None, ops, env)
            else:
                task = TASK_CLASSES[name](client, ops, env)
            print(f"      {peer} {name}", file=sys.stderr, flush=True)
            results["tasks"][name] = measure_task(task, policy, config.get("server_pid"), profiler)
            results["tasks"][name]["codec_us_per_op"] = codec_cost_us(task, codec) if codec else None
            if profiler is not None:
                profiler.dump_stats(os.path.join(profile_dir, f"{config['target']}-{name.replace('/', '-')}.prof"))
        if config.get("concurrency") and client is not None:
            client.perftest.corpus.find_one({"_id": 1})
            for greenlets in config["concurrency"]:
                results["concurrency"].append(
                    measure_concurrency(client, greenlets, config["concurrent_ops"], config["small_ops"],
                                        config["concurrent_rounds"], config.get("server_pid")))
    finally:
        if client is not None:
            client.close()
    return results


def run_peer(target: str, peer: str, args: argparse.Namespace, tasks: list[str],
             profile_dir: Optional[str] = None) -> dict:
    """One client process of ``peer`` against a fresh server of ``target``; its raw results."""
    if peer == "floor":
        tasks = [task for task in tasks if task in FLOOR_TASKS]
    if target == "secantus":
        server: Any = SecantusProcess()
    else:
        server = CannedServerProcess(args.small_ops, args.small_ops, sessions=target == "canned")
    with server:
        config = {
            "peer": peer, "uri": server.uri, "target": target, "tasks": tasks, "policy": vars(args.policy),
            "small_ops": args.small_ops, "large_ops": args.large_ops, "server_pid": server.pid,
            "concurrency": list(args.concurrency) if target == "canned" and not profile_dir else [],
            "concurrent_ops": args.concurrent_ops, "concurrent_rounds": args.concurrent_rounds,
            "profile_dir": profile_dir, "scale": getattr(args, "scale", {}),
        }
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--client", json.dumps(config)],
                                   cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=3600)
    if completed.returncode != 0:
        raise SystemExit(f"{peer} against {target} failed with exit code {completed.returncode}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def merge_passes(passes: list[dict]) -> dict:
    """One peer's results against one target, every pass combined."""
    tasks = {name: summarize_task([raw["tasks"][name] for raw in passes]) for name in passes[0]["tasks"]}
    concurrency = [summarize_concurrency([raw["concurrency"][index] for raw in passes])
                   for index in range(len(passes[0]["concurrency"]))]
    return {"label": passes[0]["label"], "tasks": tasks, "concurrency": concurrency}


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "n/a"


def print_task_table(target: str, results: dict, args: argparse.Namespace) -> None:
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    title = {"secantus": "SecantusDB (secantusd-py, one-member replica set)",
             "canned": "canned-reply server (one-member replica set)",
             "canned-nosessions": "canned-reply server without sessions (no lsid/txnNumber from either driver)",
             }[target]
    print(f"\n{title}; best of {args.passes} x {args.iterations} iterations (each after a warm-up); "
          "PyMongo under gevent.monkey.patch_all(); server CPU: median, from /proc (10 ms ticks)")
    label = theirs["label"] if theirs else ""
    header = (f"{'task':<23} {'ops':>5} | {'greenmongo':^21} | {label:^21} | {'ratio gm/pm':^12} | "
              f"{'server CPU µs/op':^15}")
    print(header)
    print(f"{'':<23} {'':>5} | {'MB/s':>9} {'CPU µs/op':>11} | {'MB/s':>9} {'CPU µs/op':>11} | "
          f"{'MB/s':>5} {'CPU':>6} | {'gm':>7} {'pm':>7}")
    print("-" * len(header))
    for task in (ours or theirs)["tasks"]:
        mine = ours["tasks"][task] if ours else None
        other = theirs["tasks"][task] if theirs else None
        row = f"{task:<23} {(mine or other)['ops']:>5} | "
        row += f"{mine['mb_per_s_best']:>9.2f} {mine['cpu_us_per_op_best']:>11.1f} | " if mine else f"{'':>21} | "
        row += f"{other['mb_per_s_best']:>9.2f} {other['cpu_us_per_op_best']:>11.1f} | " if other else f"{'':>21} | "
        if mine and other:
            row += (f"{_ratio(mine['mb_per_s_best'], other['mb_per_s_best']):>5} "
                    f"{_ratio(mine['cpu_us_per_op_best'], other['cpu_us_per_op_best']):>6} | ")
        else:
            row += f"{'':>12} | "
        row += f"{mine['server_cpu_us_per_op_median'] if mine else 0:>7.0f} "
        row += f"{other['server_cpu_us_per_op_median'] if other else 0:>7.0f}"
        print(row)


def print_cpu_split_table(results: dict) -> None:
    """Client CPU per op split into the BSON codec's share and the rest (the driver's own path)."""
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    if not (ours and theirs):
        return
    print("client CPU µs/op split: codec = the peer's own BSON encode/decode of this op's messages "
          "(measured alone); path = the rest")
    print(f"{'task':<23} | {'gm codec':>9} {'gm path':>9} | {'pm codec':>9} {'pm path':>9} | {'path ratio':>10}")
    for task, mine in ours["tasks"].items():
        other = theirs["tasks"][task]
        if mine["codec_us_per_op"] is None or other["codec_us_per_op"] is None:
            continue
        mine_path = mine["cpu_us_per_op_best"] - mine["codec_us_per_op"]
        other_path = other["cpu_us_per_op_best"] - other["codec_us_per_op"]
        print(f"{task:<23} | {mine['codec_us_per_op']:>9.1f} {mine_path:>9.1f} | "
              f"{other['codec_us_per_op']:>9.1f} {other_path:>9.1f} | {_ratio(mine_path, other_path):>10}")


def print_concurrency_table(results: dict, args: argparse.Namespace) -> None:
    ours, theirs = results.get("greenmongo"), results.get("pymongo")
    if not (ours or theirs) or not (ours or theirs)["concurrency"]:
        return
    print(f"\nFindOneById, N greenlets at once, canned-reply server, maxPoolSize {MAX_POOL_SIZE}, "
          f"{args.passes} passes x {args.concurrent_rounds} rounds x {args.concurrent_ops} ops pooled (each pass after "
          "a warm-up round), "
          "PyMongo under patch_all (latency includes the pool wait)")
    cols = f"{'ops/s':>8} {'p50 ms':>7} {'p99 ms':>8} {'max ms':>8} {'CPU µs/op':>9}"
    print(f"{'greenlets':>9} | {'greenmongo':^44} | {(theirs or {}).get('label', ''):^44} | "
          f"{'p99 ratio':>9}")
    print(f"{'':>9} | {cols} | {cols} |")
    print("-" * (9 + 3 + 44 + 3 + 44 + 3 + 9))
    rows = max(len(ours["concurrency"]) if ours else 0, len(theirs["concurrency"]) if theirs else 0)
    for index in range(rows):
        mine = ours["concurrency"][index] if ours else None
        other = theirs["concurrency"][index] if theirs else None

        def cells(result: Optional[dict]) -> str:
            if not result:
                return f"{'':>44}"
            return (f"{result['ops_per_s']:>8.0f} {result['p50_ms']:>7.2f} {result['p99_ms']:>8.2f} "
                    f"{result['max_ms']:>8.1f} {result['cpu_us_per_op']:>9.1f}")

        ratio = _ratio(mine["p99_ms"], other["p99_ms"]) if mine and other else ""
        print(f"{(mine or other)['greenlets']:>9} | {cells(mine)} | {cells(other)} | {ratio:>9}")


def print_profiles(profile_dir: str, targets: list[str], tasks: list[str], top: int) -> None:
    import pstats

    for target in targets:
        for task in tasks:
            path = os.path.join(profile_dir, f"{target}-{task}.prof")
            if not os.path.exists(path):
                continue
            print(f"\n=== greenmongo, {task} against {target}: top {top} by own time ({path}) ===")
            stats = pstats.Stats(path)
            stats.strip_dirs().sort_stats("tottime").print_stats(top)


def _csv(kind: Callable[[str], Any], allowed: Optional[tuple] = None) -> Callable[[str], list]:
    def parse(text: str) -> list:
        values = [kind(part) for part in text.split(",") if part]
        if allowed is not None:
            unknown = [value for value in values if value not in allowed]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown: {', '.join(map(str, unknown))}")
        return values
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=_csv(str, TARGETS), default=list(TARGETS))
    parser.add_argument("--peers", type=_csv(str, PEERS), default=["greenmongo", "pymongo"])
    parser.add_argument("--tasks", type=_csv(str, ALL_TASKS), default=list(TASKS),
                        help="comma-separated; also: " + ", ".join(task for task in ALL_TASKS if task not in TASKS))
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations per task per pass")
    parser.add_argument("--passes", type=int, default=2,
                        help="client processes per peer and target, alternating peers (best of all is shown)")
    parser.add_argument("--small-ops", type=int, default=2000,
                        help="documents for the spec's 10,000-document tasks (also FindOneById's ids)")
    parser.add_argument("--large-ops", type=int, default=5, help="documents for the spec's 10-document tasks")
    parser.add_argument("--concurrency", type=_csv(int), default=list(CONCURRENCY),
                        help="greenlet counts for concurrent FindOneById (empty string: skip)")
    parser.add_argument("--concurrent-ops", type=int, default=10_000, help="finds per concurrency round")
    parser.add_argument("--concurrent-rounds", type=int, default=3,
                        help="rounds per concurrency scenario, latencies pooled")
    parser.add_argument("--json", metavar="FILE", help="write every figure (medians, per-iteration times) here")
    parser.add_argument("--profile", metavar="DIR",
                        help="profile greenmongo's timed phases with cProfile into DIR and print the top functions")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--parallel-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.client:
        print(json.dumps(run_client(json.loads(args.client))))
        return
    if args.parallel_worker:
        run_parallel_worker(json.loads(args.parallel_worker))
        return
    # this script's rule: exactly --iterations timed runs per task per pass (driverbench.py has the spec's)
    args.policy = IterationPolicy(min_time=0.0, max_time=float("inf"), max_iterations=args.iterations,
                                  min_iterations=args.iterations)

    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for target in args.targets:
            run_peer(target, "greenmongo", args, args.tasks, profile_dir=os.path.abspath(args.profile))
        print_profiles(args.profile, args.targets, args.tasks, args.profile_top)
        return

    counts = {task: task_ops(task, args.small_ops, args.large_ops) for task in args.tasks}
    print("op counts used (spec: 10,000 / 10): " + ", ".join(f"{task} {count}" for task, count in counts.items()))
    print(f"data: {DATA_DIR}; one op = one document; client CPU = time.process_time() of the client process")
    print(f"{args.passes} passes, peers alternating, each a fresh client process and server; "
          f"{args.iterations} timed iterations per task per pass")
    everything: dict = {}
    for target in args.targets:
        raw: dict = {peer: [] for peer in args.peers}
        for number in range(args.passes):  # alternate, so a noisy spell on the machine hits both peers
            for peer in args.peers:
                print(f"... pass {number + 1}: {peer} against {target}", file=sys.stderr, flush=True)
                started = time.monotonic()
                raw[peer].append(run_peer(target, peer, args, args.tasks))
                print(f"    done in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
        everything[target] = {peer: merge_passes(passes) for peer, passes in raw.items()}
        print_task_table(target, everything[target], args)
        print_cpu_split_table(everything[target])
        if target == "canned":
            print_concurrency_table(everything[target], args)
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
