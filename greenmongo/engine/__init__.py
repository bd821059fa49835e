"""The engine: what runs an operation once the API has built it.

``executor`` (select, check out, send, parse, retry), ``retry`` (the pure retry rules and decision),
``transaction`` (the per-session transaction state machine) and ``server_session`` (server sessions
and their pool). Nothing here is a PyMongo import path; the API modules (mongo_client, database,
collection, cursor, client_session, ...) sit on top.
"""
