"""The WSGI app bench/app_bench.py serves under gunicorn's gevent worker (not run by hand).

Plain WSGI, no framework, so the driver's share of a request is what the figures show. The client is
created at import time: under ``--preload`` that is in gunicorn's master, before the workers fork (as
examples/gunicorn_app does); otherwise in each worker, after gunicorn's gevent worker ran
``monkey.patch_all()``, which is how PyMongo runs in these apps.

Environment: ``APPBENCH_CONNECT=0`` creates the client with ``connect=False`` (PyMongo's advice for
forking servers, and the workaround app_bench falls back to when PyMongo's workers fail to boot under
``--preload``), ``APPBENCH_DRIVER`` (``greenmongo`` or ``pymongo``), ``MONGODB_URI``, ``APPBENCH_MAX_POOL``
(maxPoolSize), ``APPBENCH_ITEMS`` (how many ``items`` documents app_bench seeded, ``_id`` 1..N).

Routes: ``GET /find/<id>`` (find_one by _id), ``POST /insert`` (insert_one), ``GET /agg/<id>`` (a $match on 10 ids
and a $group), ``GET /whoami`` (this process, the process that created the client, one find_one), ``GET /ping``
(no database: the control app_bench subtracts to find the driver's share of a request's CPU).
"""

from __future__ import annotations

import datetime
import json
import os

DRIVER = os.environ.get("APPBENCH_DRIVER", "greenmongo")
if DRIVER == "pymongo":
    from pymongo import MongoClient
elif DRIVER == "greenmongo":
    from greenmongo import MongoClient
else:
    raise SystemExit(f"APPBENCH_DRIVER must be greenmongo or pymongo, not {DRIVER!r}")

ITEMS = int(os.environ.get("APPBENCH_ITEMS", "1000"))
CLIENT_PID = os.getpid()
client = MongoClient(os.environ["MONGODB_URI"], maxPoolSize=int(os.environ.get("APPBENCH_MAX_POOL", "100")),
                     connect=os.environ.get("APPBENCH_CONNECT", "1") == "1")
database = client.appbench
items = database.items
events = database[f"events_{DRIVER}"]

_JSON = [("Content-Type", "application/json")]


def _reply(start_response, status: str, payload: object):
    body = json.dumps(payload, default=str).encode()
    start_response(status, _JSON + [("Content-Length", str(len(body)))])
    return [body]


def _number(text: str) -> int:
    value = int(text)
    if not 1 <= value <= ITEMS:
        raise ValueError(text)
    return value


def application(environ, start_response):
    method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
    try:
        if method == "GET" and path.startswith("/find/"):
            found = items.find_one({"_id": _number(path[6:])})
            return _reply(start_response, "200 OK" if found else "404 Not Found", found)
        if method == "POST" and path == "/insert":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length:
                environ["wsgi.input"].read(length)
            result = events.insert_one({"at": datetime.datetime.now(datetime.timezone.utc), "pid": os.getpid()})
            return _reply(start_response, "200 OK", {"id": str(result.inserted_id)})
        if method == "GET" and path.startswith("/agg/"):
            first = _number(path[5:])
            # $in, not a $gte/$lt range: SecantusDB answers a range by scanning (~26 ms of its CPU here).
            pipeline = [{"$match": {"_id": {"$in": list(range(first, first + 10))}}},
                        {"$group": {"_id": None, "n": {"$sum": 1}, "total": {"$sum": "$price"}}}]
            return _reply(start_response, "200 OK", list(items.aggregate(pipeline)))
        if method == "GET" and path == "/ping":  # app_bench's control: a request that touches no database
            return _reply(start_response, "200 OK", {"pid": os.getpid()})
        if method == "GET" and path == "/whoami":
            found = items.find_one({"_id": 1})
            return _reply(start_response, "200 OK", {"pid": os.getpid(), "client_pid": CLIENT_PID,
                                                     "driver": DRIVER, "found": found is not None})
        return _reply(start_response, "404 Not Found", {"error": "no such route"})
    except ValueError as exc:
        return _reply(start_response, "400 Bad Request", {"error": str(exc)})
    except Exception as exc:  # the bench counts these as errors (5xx), with the reason in the body
        return _reply(start_response, "500 Internal Server Error", {"error": repr(exc)})
