"""Event classes and listener base classes (command, connection pool, topology), PyMongo-shaped.

Each family lives in its own module; this package re-exports the public names.
"""
