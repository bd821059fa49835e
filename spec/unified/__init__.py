"""A runner for the unified test format (spec 51), driven through a pluggable driver adapter.

The runner speaks PyMongo's public API shapes (MongoClient, Database, Collection,
ClientSession, monitoring listeners, error classes), so the same code runs the
spec suites against greenmongo and, as the reference, against PyMongo. Which
driver is used comes from ``GREENMONGO_UNIFIED_DRIVER`` (see ``drivers``).

Modules, outside in: ``fixtures`` (pytest fixture and parametrization),
``runner`` (one test from requirements to clean-up), ``context`` (the server,
the internal client, option documents -> driver objects), ``requirements``
(runOnRequirements), ``entities`` (the entity map, cursors, threads),
``operations`` (entity operations -> driver calls), ``special`` (testRunner
operations), ``events`` (event and log capture, expectEvents,
expectLogMessages), ``expected_errors`` (expectError), ``results`` (result
objects -> documents), ``matching`` (the matching rules), ``schema`` (JSON
schema validation), ``outcomes`` (test-file error / not supported / mismatch).
"""
