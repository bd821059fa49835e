"""The pure half of change streams: the ``$changeStream`` stage, the resume point, resumable errors.

A change stream is an aggregate whose first stage is ``$changeStream``, iterated like a tailable
awaitData cursor and re-opened once after a resumable error (Change Streams spec). Everything that
decides *what* to send or *whether* to resume lives here, free of I/O, so that it can be tested
without a server; greenmongo/change_stream.py does the round trips.

``ResumePoint`` follows the spec's "Updating the Cached Resume Token" and "Resume Process" rules:
the first aggregate sends the user's ``resumeAfter``/``startAfter``/``startAtOperationTime`` as
given (conflicts are the server's to report); every later aggregate resumes from the cached resume
token (``startAfter`` until a document has been returned, ``resumeAfter`` after), else from the
operation time saved from the first aggregate, else from nothing. The choice is made in
``ChangeStreamAggregateOperation.build``, once the connection, and so its wire version, is known.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from greenmongo.errors import ConnectionFailure, InvalidOperation, NotPrimaryError, OperationFailure, PyMongoError
from greenmongo.operations.aggregate import AggregateOperation
from greenmongo.operations.base import WireInfo
from greenmongo.operations.cursor_state import CursorState
from greenmongo.wire.versions import WIRE_4_0, WIRE_4_4

#: Servers from 4.0 report ``operationTime`` and accept ``startAtOperationTime``.

#: Error label with which 4.4+ servers mark change stream errors worth resuming after.
RESUMABLE_LABEL = "ResumableChangeStreamError"

#: CursorNotFound: resumable on every server (the server cannot label it: it no longer knows the cursor).
CURSOR_NOT_FOUND = 43

#: Server error codes that are resumable on servers older than 4.4 (the spec's allow list).
RESUMABLE_CODES_BEFORE_4_4 = frozenset({
    6,      # HostUnreachable
    7,      # HostNotFound
    89,     # NetworkTimeout
    91,     # ShutdownInProgress
    189,    # PrimarySteppedDown
    262,    # ExceededTimeLimit
    9001,   # SocketException
    10107,  # NotWritablePrimary
    11600,  # InterruptedAtShutdown
    11602,  # InterruptedDueToReplStateChange
    13435,  # NotPrimaryNoSecondaryOk
    13436,  # NotPrimaryOrSecondary
    63,     # StaleShardVersion
    150,    # StaleEpoch
    13388,  # StaleConfig
    234,    # RetryChangeStream
    133,    # FailedToSatisfyReadPreference
})

MISSING_RESUME_TOKEN_MESSAGE = "Cannot provide resume functionality when the resume token is missing."


def _server_error_code(error: BaseException) -> tuple[bool, Optional[int]]:
    """(whether ``error`` is a server's ``ok: 0`` reply, its code)."""
    if isinstance(error, OperationFailure):
        return True, error.code
    # "not primary" replies are raised as NotPrimaryError (a ConnectionFailure) with the reply as details.
    details = getattr(error, "details", None)
    if isinstance(error, NotPrimaryError) and isinstance(details, Mapping):
        code = details.get("code")
        return True, int(code) if isinstance(code, int) else None
    return False, None


def is_resumable_error(error: BaseException, max_wire_version: Optional[int]) -> bool:
    """Whether a change stream may resume after ``error`` from a getMore (spec: "Resumable Error").

    ``max_wire_version`` is that of the connection the failed command used; an OperationFailure
    carries its own, which wins. A network error or timeout is resumable; a server error is resumable
    when it is CursorNotFound, or carries the ResumableChangeStreamError label (4.4+), or has one of
    the allow-listed codes (before 4.4).
    """
    is_server_error, code = _server_error_code(error)
    if not is_server_error:
        return isinstance(error, ConnectionFailure)
    if code == CURSOR_NOT_FOUND:
        return True
    own_wire_version = getattr(error, "_max_wire_version", None)
    wire_version = own_wire_version if own_wire_version is not None else max_wire_version
    if wire_version is None or wire_version >= WIRE_4_4:
        return isinstance(error, PyMongoError) and error.has_error_label(RESUMABLE_LABEL)
    return code in RESUMABLE_CODES_BEFORE_4_4


def stage_options(full_document: Optional[str] = None, full_document_before_change: Optional[str] = None,
                  show_expanded_events: Optional[bool] = None,
                  all_changes_for_cluster: bool = False) -> dict[str, Any]:
    """The ``$changeStream`` options other than the starting point; only what the caller set is sent."""
    options: dict[str, Any] = {}
    if full_document is not None:
        options["fullDocument"] = full_document
    if full_document_before_change is not None:
        options["fullDocumentBeforeChange"] = full_document_before_change
    if show_expanded_events is not None:
        options["showExpandedEvents"] = show_expanded_events
    if all_changes_for_cluster:
        options["allChangesForCluster"] = True
    return options


class ResumePoint:
    """Where the change stream starts and would resume from: the cached token or operation time."""

    __slots__ = ("options", "initial", "resume_token", "uses_start_after", "operation_time", "started",
                 "max_wire_version")

    def __init__(self, options: Mapping[str, Any], *, resume_after: Any = None, start_after: Any = None,
                 start_at_operation_time: Any = None) -> None:
        #: The stage options besides the starting point (stage_options()).
        self.options = dict(options)
        #: The starting point exactly as the user gave it, for the first aggregate.
        self.initial: dict[str, Any] = {}
        if resume_after is not None:
            self.initial["resumeAfter"] = resume_after
        if start_after is not None:
            self.initial["startAfter"] = start_after
        if start_at_operation_time is not None:
            self.initial["startAtOperationTime"] = start_at_operation_time
        token = start_after if start_after is not None else resume_after
        self.resume_token: Any = copy.deepcopy(token)
        #: True until a document is returned: resume with startAfter (the spec's rule).
        self.uses_start_after = start_after is not None
        self.operation_time: Any = start_at_operation_time
        #: Whether the first aggregate succeeded (later aggregates are resumes).
        self.started = False
        self.max_wire_version: Optional[int] = None

    def stage(self, max_wire_version: int) -> dict[str, Any]:
        """The ``$changeStream`` document for an aggregate sent on a connection of this wire version."""
        stage: dict[str, Any] = {}
        for name in ("fullDocument", "fullDocumentBeforeChange"):
            if name in self.options:
                stage[name] = self.options[name]
        if not self.started:
            stage.update(self.initial)
        elif self.resume_token is not None:
            stage["startAfter" if self.uses_start_after else "resumeAfter"] = self.resume_token
        elif self.operation_time is not None and max_wire_version >= WIRE_4_0:
            stage["startAtOperationTime"] = self.operation_time
        for name, value in self.options.items():
            stage.setdefault(name, value)
        return stage

    # -- what the server said ----------------------------------------------------------------------

    def aggregate_succeeded(self, reply: Mapping[str, Any], first_batch_empty: bool,
                            post_batch_resume_token: Any, max_wire_version: int) -> None:
        """Cache the postBatchResumeToken of an empty first batch, else (first aggregate only, no
        starting point given, 4.0+) save the reply's operationTime to resume from."""
        first = not self.started
        self.started = True
        self.max_wire_version = max_wire_version
        if not first_batch_empty:
            return
        if post_batch_resume_token is not None:
            self.resume_token = post_batch_resume_token
        elif (first and not self.initial and max_wire_version >= WIRE_4_0
              and reply.get("operationTime") is not None):
            self.operation_time = reply["operationTime"]

    def batch_drained(self, post_batch_resume_token: Any) -> None:
        """Every returned document has been handed out (or the batch was empty): cache the PBRT."""
        if post_batch_resume_token is not None:
            self.resume_token = post_batch_resume_token

    def document_returned(self, document: Any, last_in_batch: bool, post_batch_resume_token: Any) -> None:
        """Cache the resume token of a document handed to the user; InvalidOperation if it has none."""
        try:
            token = document["_id"]
        except (KeyError, TypeError):
            raise InvalidOperation(MISSING_RESUME_TOKEN_MESSAGE) from None
        if last_in_batch and post_batch_resume_token is not None:
            token = post_batch_resume_token
        self.resume_token = token
        self.uses_start_after = False


class ChangeStreamAggregateOperation(AggregateOperation):
    """The aggregate that opens (or re-opens) a change stream; records what the reply says in ``point``."""

    def __init__(self, point: ResumePoint, dbname: str, collection: Optional[str], pipeline: list[Mapping[str, Any]],
                 **options: Any) -> None:
        self.point = point
        self.user_pipeline = list(pipeline)
        super().__init__(dbname, collection, self._pipeline(WIRE_4_4), **options)

    def _pipeline(self, max_wire_version: int) -> list[Mapping[str, Any]]:
        return [{"$changeStream": self.point.stage(max_wire_version)}, *self.user_pipeline]

    def build(self, wire: WireInfo) -> Any:
        self.pipeline = self._pipeline(wire.max_wire_version)
        return super().build(wire)

    def _state(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        state = super()._state(reply, wire)
        state.tailable = True
        state.await_data = True
        return state

    def parse(self, reply: Optional[Mapping[str, Any]], wire: WireInfo) -> CursorState:
        state = super().parse(reply, wire)
        self.point.aggregate_succeeded(reply or {}, not state.first_batch, state.post_batch_resume_token,
                                       wire.max_wire_version)
        return state


__all__ = [
    "ChangeStreamAggregateOperation", "MISSING_RESUME_TOKEN_MESSAGE", "RESUMABLE_CODES_BEFORE_4_4",
    "RESUMABLE_LABEL", "ResumePoint", "is_resumable_error", "stage_options",
]
