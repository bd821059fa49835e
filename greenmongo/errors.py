"""One exception hierarchy for the whole driver, with PyMongo's names.

Applications that catch ``pymongo.errors.X`` should be able to catch
``greenmongo.errors.X`` after changing the import; where a class exists only
to satisfy a spec (``PoolClearedError``) it sits where PyMongo puts it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence


class GreenMongoError(Exception):
    """Base of every error greenmongo raises on purpose.

    Carries the spec's error labels (``RetryableWriteError``,
    ``TransientTransactionError``, ...): retry and transaction logic decide by
    label, never by class.
    """

    def __init__(self, message: str = "", error_labels: Optional[Iterable[str]] = None) -> None:
        super().__init__(message)
        self._message = message
        self._error_labels = set(error_labels or ())

    def has_error_label(self, label: str) -> bool:
        return label in self._error_labels

    def _add_error_label(self, label: str) -> None:
        self._error_labels.add(label)

    def _remove_error_label(self, label: str) -> None:
        self._error_labels.discard(label)

    @property
    def error_labels(self) -> frozenset:
        return frozenset(self._error_labels)

    @property
    def timeout(self) -> bool:
        """True when this error means an operation ran out of time."""
        return False


#: PyMongo's name for the base class, so ``except PyMongoError`` keeps working.
PyMongoError = GreenMongoError


# -- BSON --------------------------------------------------------------------

class BSONError(GreenMongoError):
    """Base of the BSON layer's errors."""


class InvalidBSON(BSONError):
    """Bytes that are not valid BSON: the message says what and where."""


class InvalidDocument(BSONError):
    """A Python value that cannot be encoded as BSON; ``document`` is the offending document, if known."""

    def __init__(self, message: str = "", document: Any = None) -> None:
        super().__init__(message)
        self._document = document

    @property
    def document(self) -> Any:
        """The document that could not be encoded (None when the raiser did not say)."""
        return self._document


class InvalidStringData(BSONError):
    """A string that cannot be encoded as BSON UTF-8."""


class InvalidId(BSONError):
    """Not a valid ObjectId."""


class DocumentTooLarge(InvalidDocument):
    """A document over the server's maxBsonObjectSize."""


# -- configuration and usage -------------------------------------------------

class ConfigurationError(GreenMongoError):
    """Bad options, URI or credentials, found before any I/O."""


class _OptionTypeError(ConfigurationError, TypeError):
    """A keyword option of the wrong type: PyMongo raises TypeError there, so code that catches it keeps
    working (and ConfigurationError, greenmongo's own, still catches it too)."""


class _OptionValueError(ConfigurationError, ValueError):
    """A keyword option's value out of bounds or not one it takes: PyMongo's ValueError (see above)."""


class InvalidURI(ConfigurationError):
    """A connection string that does not parse."""


class InvalidOperation(GreenMongoError):
    """An operation that cannot be done in the current state."""


class InvalidName(GreenMongoError):
    """A database or collection name the server would reject."""


class CollectionInvalid(GreenMongoError):
    """A collection that fails validation or already exists."""


class ProtocolError(GreenMongoError):
    """The server sent something the wire protocol does not allow."""


# -- network -----------------------------------------------------------------

class ConnectionFailure(GreenMongoError):
    """The driver could not reach or keep talking to a server."""


class AutoReconnect(ConnectionFailure):
    """A network error after which the operation may be retried."""

    def __init__(self, message: str = "", errors: Any = None) -> None:
        labels = None
        if isinstance(errors, Mapping):
            labels = errors.get("errorLabels")
        super().__init__(message, labels)
        self.errors = self.details = errors or []


class NetworkTimeout(AutoReconnect):
    """A socket read, write or connect timed out."""

    @property
    def timeout(self) -> bool:
        return True


class NotPrimaryError(AutoReconnect):
    """The server is not (or no longer) primary: an SDAM state change."""

    def __init__(self, message: str = "", errors: Any = None) -> None:
        super().__init__(_format_detailed_error(message, errors), errors=errors)

    @property
    def code(self) -> Optional[int]:
        """The server's error code (it is a server reply, unlike other AutoReconnect errors)."""
        code = self.details.get("code") if isinstance(self.details, Mapping) else None
        return code if isinstance(code, int) else None


class ServerSelectionTimeoutError(AutoReconnect):
    """No suitable server within serverSelectionTimeoutMS."""

    @property
    def timeout(self) -> bool:
        return True


class WaitQueueTimeoutError(ConnectionFailure):
    """No pooled connection became free within waitQueueTimeoutMS."""

    @property
    def timeout(self) -> bool:
        return True


class PoolClearedError(AutoReconnect):
    """The pool was cleared while this checkout waited: always retryable."""

    def __init__(self, message: str = "", errors: Any = None) -> None:
        super().__init__(message, errors)
        self._add_error_label("RetryableWriteError")


class PoolClosedError(GreenMongoError):
    """Checkout from a closed pool: not retryable, the client is shutting down."""


# -- server replies ----------------------------------------------------------

def _format_detailed_error(message: str, details: Any) -> str:
    if details is not None:
        return f"{message}, full error: {details}"
    return message


class OperationFailure(GreenMongoError):
    """The server answered ``ok: 0``: code, codeName and the full reply."""

    def __init__(
        self,
        error: str,
        code: Optional[int] = None,
        details: Optional[Mapping[str, Any]] = None,
        max_wire_version: Optional[int] = None,
    ) -> None:
        labels = None
        if details is not None:
            labels = details.get("errorLabels")
        super().__init__(_format_detailed_error(error, details), labels)
        self.__code = code
        self.__details = details
        self.__max_wire_version = max_wire_version

    @property
    def code(self) -> Optional[int]:
        return self.__code

    @property
    def details(self) -> Optional[Mapping[str, Any]]:
        return self.__details

    @property
    def code_name(self) -> Optional[str]:
        return (self.__details or {}).get("codeName")

    @property
    def _max_wire_version(self) -> Optional[int]:
        return self.__max_wire_version

    @property
    def timeout(self) -> bool:
        return self.__code in (50, 262)  # MaxTimeMSExpired, ExceededTimeLimit


class CursorNotFound(OperationFailure):
    """getMore on a cursor the server no longer has."""


class ExecutionTimeout(OperationFailure):
    """The server stopped the operation at maxTimeMS."""

    @property
    def timeout(self) -> bool:
        return True


class WriteConcernError(OperationFailure):
    """The write happened but its write concern was not satisfied."""


class WTimeoutError(WriteConcernError):
    """Write concern not satisfied within wtimeout."""

    @property
    def timeout(self) -> bool:
        return True


class WriteError(OperationFailure):
    """One write of a write command failed."""


class DuplicateKeyError(WriteError):
    """A write violated a unique index (code 11000)."""


class BulkWriteError(OperationFailure):
    """A bulk write had write or write-concern errors; ``details`` has the partial result."""

    def __init__(self, results: Mapping[str, Any]) -> None:
        super().__init__("batch op errors occurred", 65, results)

    def __reduce__(self) -> tuple:
        return self.__class__, (self.details,)

    @property
    def timeout(self) -> bool:
        wces = (self.details or {}).get("writeConcernErrors") or []
        return bool(wces) and wces[-1].get("code") == 50


class ClientBulkWriteException(OperationFailure):
    """``client.bulk_write`` failed: the top-level error, the write errors and the partial result."""

    def __init__(
        self,
        error: Optional[BaseException],
        write_errors: Optional[Mapping[int, Any]] = None,
        write_concern_errors: Optional[Sequence[Mapping[str, Any]]] = None,
        partial_result: Any = None,
    ) -> None:
        super().__init__("client bulk write errors occurred", details={"error": error})
        self.error = error
        self.write_errors = dict(write_errors or {})
        self.write_concern_errors = list(write_concern_errors or [])
        self.partial_result = partial_result


class EncryptionError(GreenMongoError):
    """Client-side field level encryption failed."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self._cause = cause

    @property
    def cause(self) -> BaseException:
        """The exception the encryption or decryption failed with."""
        return self._cause

    @property
    def timeout(self) -> bool:
        """True when the cause is a timeout (a key vault read or write that ran out of timeoutMS)."""
        return bool(getattr(self._cause, "timeout", False))


class EncryptedCollectionError(EncryptionError):
    """``ClientEncryption.create_encrypted_collection`` failed: creating a data key or the collection."""

    def __init__(self, cause: BaseException, encrypted_fields: Mapping[str, Any]) -> None:
        super().__init__(cause)
        self._encrypted_fields = encrypted_fields

    @property
    def encrypted_fields(self) -> Mapping[str, Any]:
        """The encrypted_fields document the collection was to be created with."""
        return self._encrypted_fields


# -- GridFS (greenmongo.gridfs re-exports these, as PyMongo's gridfs.errors does) --------------

class GridFSError(GreenMongoError):
    """Base of the errors GridFS raises on its own (server errors stay OperationFailure)."""


class CorruptGridFile(GridFSError):
    """A stored file whose chunks do not match its files document (missing, out of order, wrong size)."""


class NoFile(GridFSError):
    """No stored file has that id, name or revision."""


class FileExists(GridFSError):
    """An upload's file id is already used by another stored file."""


def has_error_label(error: BaseException, label: str) -> bool:
    """``error.has_error_label(label)`` for any exception (others than ours have no labels)."""
    return isinstance(error, GreenMongoError) and error.has_error_label(label)


__all__ = [name for name, value in list(globals().items())
           if isinstance(value, type) and issubclass(value, BaseException)] + ["PyMongoError"]

