"""The three ways a unified test can go wrong, kept apart because each ends differently.

``TestFileError``: the test file asks for something impossible or malformed
(an undefined entity, an unknown operation or argument): the test fails, and
valid-fail files rely on it. ``NotSupported``: the driver or runner deliberately
lacks a feature the test needs: the test is skipped with that reason.
``MatchError``: an assertion about results, errors or events failed.
"""

from __future__ import annotations


class TestFileError(Exception):
    """The test file is malformed or refers to something undefined."""

    __test__ = False  # not a pytest test class


class NotSupported(Exception):
    """A deliberately unimplemented feature: the test is skipped with this reason."""


class MatchError(AssertionError):
    """Expected and actual values differ; the message names the path where."""
