"""Unified test cases known to fail, each with why: marked ``xfail(strict=True)``.

Four kinds, and nothing else belongs here:

* the server's: SecantusDB behaves differently from mongod. Evidence: the same case fails with
  PyMongo 4.20 against the same server (``GREENMONGO_UNIFIED_DRIVER=pymongo``), recorded per case in
  pymongo_evidence.json by ``python -m spec evidence``; tests/test_known_failures_evidence.py
  fails for an entry without such a record.
* the deployment's: the case needs more replica-set members than SecantusDB runs (one). Evidence
  as above; these are not run by default, because each waits 10-30 s for events that cannot come
  (``GREENMONGO_UNIFIED_RUN_ALL=1`` runs them as strict xfails too).
* greenmongo's not-yet-built features, named with the feature. ``strict=True`` turns an
  unexpected pass into a failure, so an entry is removed the day its feature lands.
* the test file's: the case is invalid test data, or its expectation contradicts the rule it
  tests, so a correct driver fails it (any driver: the reason names the fault in the file). A
  case whose wrong expectation is about timing can only pass by accident, when the machine stalls
  long enough: it is listed in ``TIMING_DEPENDENT`` too and, like the deployment entries, runs only
  with ``GREENMONGO_UNIFIED_RUN_ALL=1`` (an accidental pass would fail a strict xfail).
"""

from __future__ import annotations

import os
from typing import Optional

#: The deployments the unified cases run against.
REPLICA_SET = "replicaset"
LOAD_BALANCED = "load-balanced"

SERVER = "server"
DEPLOYMENT = "deployment"
FEATURE = "feature"
TEST_FILE = "test file"

_LONG_HELLO = ("SecantusDB's replica-set hello reply is longer than the default 1000-character log truncation, "
               "so $$matchAsDocument cannot parse the logged reply; PyMongo 4.20 fails these the same way")
_NEVER_COMMITTED = ("SecantusDB accepts the onPrimaryTransactionalWrite failpoint but does not apply "
                    "failBeforeCommitExceptionCode; PyMongo 4.20 fails it the same way")

_PRIMARY_TXN_WRITE = ("SecantusDB accepts the onPrimaryTransactionalWrite failpoint but never acts on it (no closed "
                      "connection, no failBeforeCommitExceptionCode); PyMongo 4.20 fails these the same way")
_NO_RETRY_DEDUP = ("SecantusDB does not recognise a retried write by its txnNumber: after a retryable "
                   "writeConcernError the retry fails with a duplicate key; PyMongo 4.20 fails it the same way")
_WCE_TIMES = ("SecantusDB's failCommand applies writeConcernError only once whatever mode.times says, so the "
              "retry succeeds; PyMongo 4.20 fails it the same way")
_CLOSE_TIMES = ("SecantusDB's failCommand closeConnection with times: 2 fails only the first command, so the "
                "callback is not retried as the test expects; PyMongo 4.20 fails it the same way")
_SNAPSHOT = ("SecantusDB ignores readConcern atClusterTime: snapshot reads see later writes; PyMongo 4.20 fails "
             "these the same way")
_BULK_READ_CONCERN = ("SecantusDB rejects readConcern on the bulkWrite command (IDLUnknownField); PyMongo 4.20 "
                      "fails it the same way")

_ONE_MEMBER = ("needs a three-member replica set (waits for the other members' topologyDescriptionChanged "
               "events or for a secondary); SecantusDB runs one member; PyMongo 4.20 fails it the same way")
_NO_WHERE = ("blocks a find with $where: SecantusDB has no JavaScript engine ('no globalScriptEngine in $where "
             "parsing'); PyMongo 4.20 fails it the same way")

_CSOT = "client-side-operations-timeout/tests"
_REFRESHED_NOT_EXCEEDED = (
    "wrong test data: it expects a timeout from a getMore blocked 60 ms under timeoutMS 100 with a timeout that "
    "is refreshed for each iteration (timeoutMode iteration / a tailable cursor), which the CSOT spec says must "
    "succeed. greenmongo's blocked getMore returns its documents after ~61 ms; so does PyMongo 4.20's on "
    "SecantusDB with one pymongo.timeout(0.1) per next() (61-73 ms, 10 of 10 for each case), and PyMongo's own "
    "runner skips both cases. The upstream file has contradicted its own comments (block vs timeout) since its "
    "first version")
_NO_COMMAND_NAME = (
    "invalid test file: its createCommandCursor lacks the required commandName argument (the unified test "
    "format, createCommandCursor), and it sets no timeoutMS anywhere yet expects maxTimeMS on the find and a "
    "timeout error; PyMongo's runner skips it")

_CSE = "client-side-encryption/tests/unified"
_ENCRYPT_SCHEMA = ("SecantusDB rejects the JSON schema 'encrypt' keyword in the collection validator the initial data "
                   "creates (FailedToParse: Unknown $jsonSchema keyword: encrypt); PyMongo 4.20 fails it the same way")
_QE_COLLECTIONS = ("Queryable Encryption's create/drop collection helpers (encryptedFields: the enxcol_ state "
                   "collections and the __safeContent__ index) are not built, and SecantusDB rejects "
                   "create.encryptedFields (IDLUnknownField) anyway")

#: Client-side encryption's, the same in both deployments.
_CSE_FAILURES: dict[str, tuple[str, str]] = {
    f"{_CSE}/bypassAutoEncryption.json::Insert with bypassAutoEncryption": (SERVER, _ENCRYPT_SCHEMA),
    f"{_CSE}/bypassAutoEncryption.json::Insert with bypassAutoEncryption for local schema": (SERVER, _ENCRYPT_SCHEMA),
    f"{_CSE}/fle2v2-BypassQueryAnalysis.json::BypassQueryAnalysis decrypts": (FEATURE, _QE_COLLECTIONS),
}

KNOWN_FAILURES: dict[str, tuple[str, str]] = {
    **_CSE_FAILURES,
    f"{_CSOT}/runCursorCommand.json::Non-tailable cursor iteration timeoutMS is refreshed for getMore if "
    "timeoutMode is iteration - failure": (TEST_FILE, _REFRESHED_NOT_EXCEEDED),
    f"{_CSOT}/runCursorCommand.json::Tailable cursor iteration timeoutMS is refreshed for getMore - failure":
        (TEST_FILE, _REFRESHED_NOT_EXCEEDED),
    f"{_CSOT}/runCursorCommand.json::Tailable cursor awaitData iteration timeoutMS is refreshed for getMore - "
    "failure": (TEST_FILE, _NO_COMMAND_NAME),
    "server-discovery-and-monitoring/tests/unified/interruptInUse-pool-clear.json::Connection pool clear uses interruptInUseConnections=true after monitor timeout":
        (SERVER, _NO_WHERE),
    "server-discovery-and-monitoring/tests/unified/interruptInUse-pool-clear.json::Error returned from connection pool clear with interruptInUseConnections=true is retryable":
        (SERVER, _NO_WHERE),
    "server-discovery-and-monitoring/tests/unified/interruptInUse-pool-clear.json::Error returned from connection pool clear with interruptInUseConnections=true is retryable for write":
        (SERVER, _NO_WHERE),
    "server-discovery-and-monitoring/tests/unified/logging-replicaset.json::Topology lifecycle":
        (DEPLOYMENT, _ONE_MEMBER),
    "server-discovery-and-monitoring/tests/unified/logging-replicaset.json::Successful heartbeat":
        (DEPLOYMENT, _ONE_MEMBER),
    "server-discovery-and-monitoring/tests/unified/rediscover-quickly-after-step-down.json::Rediscover quickly after replSetStepDown":
        (DEPLOYMENT, _ONE_MEMBER),
    "server-discovery-and-monitoring/tests/unified/replicaset-emit-topology-changed-before-close.json::Topology lifecycle":
        (DEPLOYMENT, _ONE_MEMBER),
    "server-selection/tests/logging/replica-set.json::A successful operation":
        (DEPLOYMENT, _ONE_MEMBER),
    "server-selection/tests/logging/replica-set.json::Server selection fails due to unsatisfiable read preference":
        (DEPLOYMENT, _ONE_MEMBER),
    "retryable-writes/tests/unified/bulkWrite.json::First command is retried":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/bulkWrite.json::BulkWrite with unordered execution":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/bulkWrite.json::First insertOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/bulkWrite.json::Second updateOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/bulkWrite.json::Third updateOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertMany.json::InsertMany succeeds after one network error":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertMany.json::InsertMany with unordered execution":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertMany.json::InsertMany fails after multiple network errors":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/deleteOne.json::DeleteOne is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/deleteOne.json::DeleteOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndDelete.json::FindOneAndDelete is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndDelete.json::FindOneAndDelete is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndReplace.json::FindOneAndReplace is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndReplace.json::FindOneAndReplace is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndUpdate.json::FindOneAndUpdate is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/findOneAndUpdate.json::FindOneAndUpdate is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertOne.json::InsertOne is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertOne.json::InsertOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/replaceOne.json::ReplaceOne is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/replaceOne.json::ReplaceOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/updateOne.json::UpdateOne is committed on first attempt":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/updateOne.json::UpdateOne is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/updateOne.json::UpdateOne with upsert is never committed":
        (SERVER, _PRIMARY_TXN_WRITE),
    "retryable-writes/tests/unified/insertOne-errorLabels.json::InsertOne fails after multiple retryable writeConcernErrors":
        (SERVER, _WCE_TIMES),
    "unified-test-format/tests/valid-pass/poc-retryable-writes.json::InsertOne fails after multiple retryable writeConcernErrors":
        (SERVER, _WCE_TIMES),
    "retryable-writes/tests/unified/client-bulkWrite-serverErrors.json::client bulkWrite with no multi: true operations succeeds after retryable writeConcernError":
        (SERVER, _NO_RETRY_DEDUP),
    "transactions-convenient-api/tests/unified/callback-retry.json::callback succeeds after multiple connection errors":
        (SERVER, _CLOSE_TIMES),
    "sessions/tests/snapshot-sessions.json::Find operation with snapshot":
        (SERVER, _SNAPSHOT),
    "sessions/tests/snapshot-sessions.json::Distinct operation with snapshot":
        (SERVER, _SNAPSHOT),
    "sessions/tests/snapshot-sessions.json::Aggregate operation with snapshot":
        (SERVER, _SNAPSHOT),
    "sessions/tests/snapshot-sessions.json::Mixed operation with snapshot":
        (SERVER, _SNAPSHOT),
    "sessions/tests/snapshot-sessions.json::Write commands with snapshot session do not affect snapshot reads":
        (SERVER, _SNAPSHOT),
    "causal-consistency/tests/causal-consistency-clientBulkWrite.json::clientBulkWrite includes afterClusterTime in causally consistent session":
        (SERVER, _BULK_READ_CONCERN),
    "unified-test-format/tests/valid-pass/poc-retryable-writes.json::FindOneAndUpdate is never committed":
        (SERVER, _NEVER_COMMITTED),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::hello without speculative authenticate "
    "command and server reply are not redacted": (SERVER, _LONG_HELLO),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::legacy hello without speculative "
    "authenticate command and server reply are not redacted": (SERVER, _LONG_HELLO),
}


#: The same for the cases run against the loopback load balancers in front of SecantusDB
#: (spec/test_unified_load_balanced.py); PyMongo's evidence is recorded under "load-balanced:<case id>".
KNOWN_FAILURES_LOAD_BALANCED: dict[str, tuple[str, str]] = {
    **_CSE_FAILURES,
    "retryable-writes/tests/unified/insertOne-errorLabels.json::InsertOne fails after multiple retryable "
    "writeConcernErrors": (SERVER, _WCE_TIMES),
    "retryable-writes/tests/unified/client-bulkWrite-serverErrors.json::client bulkWrite with no multi: true "
    "operations succeeds after retryable writeConcernError": (SERVER, _NO_RETRY_DEDUP),
    "transactions-convenient-api/tests/unified/callback-retry.json::callback succeeds after multiple connection errors":
        (SERVER, _CLOSE_TIMES),
    "causal-consistency/tests/causal-consistency-clientBulkWrite.json::clientBulkWrite includes afterClusterTime in "
    "causally consistent session": (SERVER, _BULK_READ_CONCERN),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::hello without speculative authenticate "
    "command and server reply are not redacted": (SERVER, _LONG_HELLO),
    "command-logging-and-monitoring/tests/logging/redacted-commands.json::legacy hello without speculative "
    "authenticate command and server reply are not redacted": (SERVER, _LONG_HELLO),
    f"{_CSOT}/runCursorCommand.json::Non-tailable cursor iteration timeoutMS is refreshed for getMore if "
    "timeoutMode is iteration - failure": (TEST_FILE, _REFRESHED_NOT_EXCEEDED),
    f"{_CSOT}/runCursorCommand.json::Tailable cursor iteration timeoutMS is refreshed for getMore - failure":
        (TEST_FILE, _REFRESHED_NOT_EXCEEDED),
    f"{_CSOT}/runCursorCommand.json::Tailable cursor awaitData iteration timeoutMS is refreshed for getMore - "
    "failure": (TEST_FILE, _NO_COMMAND_NAME),
    f"{_CSOT}/close-cursors.json::timeoutMS is refreshed for close": (TEST_FILE, (
        "contradicts the Load Balancer spec: the getMore's timeout closes the cursor's pinned connection, and after "
        "a network error on it the spec forbids a killCursors (no other connection reaches that service), yet this "
        "file, written for every topology, expects one on close. PyMongo 4.20 behind the same load balancer "
        "fails it the same way (no killCursors)")),
    "transactions/tests/unified/mongos-recovery-token.json::commitTransaction explicit retries include recoveryToken":
        (SERVER, "the load balancers front SecantusDB, a replica-set member, which sends no recoveryToken (a mongos "
                 "does), so the retried commitTransaction has none to include; PyMongo 4.20 fails it the same way"),
}


#: Test-file entries whose wrong expectation is about timing: a correct driver fails them unless the machine
#: stalls for 40 ms in the middle of the blocked getMore; measured on a 2-core machine at load 4, one in 50
#: such getMores took 99 ms. Run only on request, so that an accidental pass cannot fail a run.
TIMING_DEPENDENT = frozenset({
    f"{_CSOT}/runCursorCommand.json::Non-tailable cursor iteration timeoutMS is refreshed for getMore if "
    "timeoutMode is iteration - failure",
    f"{_CSOT}/runCursorCommand.json::Tailable cursor iteration timeoutMS is refreshed for getMore - failure",
})


def runs_known_failure(case_id: str, deployment: str = REPLICA_SET) -> bool:
    """Whether the known failure ``case_id`` is run (deployment and timing-dependent entries only on request)."""
    entry = _table(deployment).get(case_id)
    if entry is None or os.environ.get("GREENMONGO_UNIFIED_RUN_ALL") == "1":
        return True
    return entry[0] != DEPLOYMENT and case_id not in TIMING_DEPENDENT


def _table(deployment: str) -> dict[str, tuple[str, str]]:
    return KNOWN_FAILURES_LOAD_BALANCED if deployment == LOAD_BALANCED else KNOWN_FAILURES


def known_failure(case_id: str, deployment: str = REPLICA_SET) -> Optional[str]:
    """The xfail reason for ``case_id`` (run against ``deployment``) under the selected driver, or None.

    Server and test-file entries apply to any driver; feature entries only to greenmongo (the peer has them).
    """
    entry = _table(deployment).get(case_id)
    if entry is None:
        return None
    kind, reason = entry
    driver = os.environ.get("GREENMONGO_UNIFIED_DRIVER", "greenmongo").lower()
    if kind == FEATURE and driver != "greenmongo":
        return None
    return f"{kind}: {reason}"
