"""Runners for the MongoDB specifications' own test suites (one module per suite)."""
