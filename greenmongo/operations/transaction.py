"""``commitTransaction`` and ``abortTransaction`` (Transactions spec): admin commands the session sends.

They are retryable writes even on a client with ``retryWrites=false``; the executor gives them the
session's ``lsid``/``txnNumber``/``autocommit: false`` (``ends_transaction``). A retried commit
upgrades its write concern to ``w: majority`` (``Transaction.commit_write_concern``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.operations.base import Command, Operation, WireInfo
from greenmongo.operations.replies import raise_write_concern_error, write_concern_error_document


class EndTransactionOperation(Operation[Mapping[str, Any]]):
    is_write = True
    retryable = True
    ends_transaction = True

    def __init__(self, write_concern: Optional[Mapping[str, Any]] = None,
                 recovery_token: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__("admin")
        self.write_concern = write_concern
        self.recovery_token = recovery_token

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {self.name: 1}
        if self.write_concern:
            body["writeConcern"] = dict(self.write_concern)
        if self.recovery_token is not None:
            body["recoveryToken"] = self.recovery_token
        return body

    def build(self, wire: WireInfo) -> Command:
        return Command(self.dbname, self._body())

    def for_retry(self) -> None:
        """Called before the driver's own retry of this command."""

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> Mapping[str, Any]:
        assert reply is not None  # always acknowledged
        self.check_reply(reply, wire)
        if reply.get("writeConcernError"):
            raise_write_concern_error(write_concern_error_document(reply) or {})
        return reply


class CommitTransactionOperation(EndTransactionOperation):
    name = "commitTransaction"

    def __init__(self, write_concern: Optional[Mapping[str, Any]] = None,
                 recovery_token: Optional[Mapping[str, Any]] = None, max_commit_time_ms: Optional[int] = None,
                 majority_on_retry: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(write_concern, recovery_token)
        self.max_commit_time_ms = max_commit_time_ms
        #: The write concern a retry of this commit sends (w: majority), set by the session.
        self.majority_on_retry = majority_on_retry

    def _body(self) -> dict[str, Any]:
        body = super()._body()
        if self.max_commit_time_ms is not None:
            body["maxTimeMS"] = self.max_commit_time_ms
        return body

    def for_retry(self) -> None:
        """The driver's own retry of this commit: w: majority from now on."""
        if self.majority_on_retry is not None:
            self.write_concern = self.majority_on_retry



class AbortTransactionOperation(EndTransactionOperation):
    name = "abortTransaction"
