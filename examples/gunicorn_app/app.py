"""A Flask app served by gunicorn's gevent workers, using greenmongo.

    MONGODB_URI=mongodb://127.0.0.1:27017/ gunicorn -k gevent -w 2 --preload examples.gunicorn_app.app:app

The client is created at import time, so with ``--preload`` it is created once in gunicorn's
master and inherited by every forked worker: greenmongo drops the inherited sockets and monitors
in each child and reconnects there on first use.
"""

from __future__ import annotations

import os

from flask import Flask, jsonify

from greenmongo import MongoClient

client = MongoClient(os.environ.get("MONGODB_URI", "mongodb://127.0.0.1:27017/"))
requests_log = client[os.environ.get("APP_DB", "gunicorn_app")]["requests"]

app = Flask(__name__)


@app.get("/health")
def health():
    client.admin.command("ping")
    return jsonify(ok=True, pid=os.getpid())


@app.post("/write/<key>")
def write(key: str):
    requests_log.insert_one({"key": key, "pid": os.getpid()})
    return jsonify(ok=True)


@app.get("/read/<key>")
def read(key: str):
    found = requests_log.find_one({"key": key}, {"_id": 0})
    return jsonify(found=found)
