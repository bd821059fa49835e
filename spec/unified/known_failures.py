"""Unified test cases known to fail, each with why: marked ``xfail(strict=True)``.

Two kinds, and nothing else belongs here:

* the server's: SecantusDB behaves differently from mongod. Evidence: the same case fails with
  PyMongo 4.20 against the same server (``GREENMONGO_UNIFIED_DRIVER=pymongo``).
* greenmongo's not-yet-built features, named with the feature. ``strict=True`` turns an
  unexpected pass into a failure, so an entry is removed the day its feature lands.
"""

from __future__ import annotations

import os
from typing import Optional

SERVER = "server"
FEATURE = "feature"

_TRANSACTIONS = "greenmongo has no transactions yet: Transactions spec, a later issue"
_RETRYABLE_WRITES = ("greenmongo has no retryable writes yet (they need sessions' txnNumber): "
                     "Retryable Writes spec, a later issue")
_LONG_HELLO = ("SecantusDB's replica-set hello reply is longer than the default 1000-character log truncation, "
               "so $$matchAsDocument cannot parse the logged reply; PyMongo 4.20 fails these the same way")
_NEVER_COMMITTED = ("SecantusDB accepts the onPrimaryTransactionalWrite failpoint but does not apply "
                    "failBeforeCommitExceptionCode; PyMongo 4.20 fails it the same way")

KNOWN_FAILURES: dict[str, tuple[str, str]] = {
    "unified-test-format/tests/valid-pass/poc-sessions.json::Dirty explicit session is discarded":
        (FEATURE, _RETRYABLE_WRITES),
    "unified-test-format/tests/valid-pass/poc-transactions.json::Client side error in command starting "
    "transaction": (FEATURE, _TRANSACTIONS),
    "unified-test-format/tests/valid-pass/poc-transactions.json::explicitly create collection using create "
    "command": (FEATURE, _TRANSACTIONS),
    "unified-test-format/tests/valid-pass/poc-transactions.json::create index on a non-existing collection":
        (FEATURE, _TRANSACTIONS),
    "run-command/tests/unified/runCommand.json::attaches transaction fields to given command":
        (FEATURE, _TRANSACTIONS),
    "command-logging-and-monitoring/tests/logging/command.json::A successful commitTransaction command":
        (FEATURE, _TRANSACTIONS),
    "command-logging-and-monitoring/tests/logging/command.json::A successful abortTransaction command":
        (FEATURE, _TRANSACTIONS),
    "unified-test-format/tests/valid-pass/poc-retryable-writes.json::InsertMany succeeds after PrimarySteppedDown":
        (FEATURE, _RETRYABLE_WRITES),
    "command-logging-and-monitoring/tests/monitoring/writeConcernError.json::A retryable write with write concern "
    "errors publishes success event": (FEATURE, _RETRYABLE_WRITES),
    "unified-test-format/tests/valid-pass/poc-retryable-writes.json::FindOneAndUpdate is never committed":
        (SERVER, _NEVER_COMMITTED),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::hello without speculative authenticate "
    "command and server reply are not redacted": (SERVER, _LONG_HELLO),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::legacy hello without speculative "
    "authenticate command and server reply are not redacted": (SERVER, _LONG_HELLO),
}


def known_failure(case_id: str) -> Optional[str]:
    """The xfail reason for ``case_id`` under the selected driver, or None.

    Server entries apply to any driver; feature entries only to greenmongo (the peer has them).
    """
    entry = KNOWN_FAILURES.get(case_id)
    if entry is None:
        return None
    kind, reason = entry
    driver = os.environ.get("GREENMONGO_UNIFIED_DRIVER", "greenmongo").lower()
    if kind == FEATURE and driver != "greenmongo":
        return None
    return f"{kind}: {reason}"
