"""Split a write's documents into batches the server will accept.

A batch is bounded three ways, all from the server's hello: the message size
(maxMessageSizeBytes), the number of statements (maxWriteBatchSize) and, for
unacknowledged writes that cannot report an error, each document's own size
(maxBsonObjectSize). Pure arithmetic on sizes, so bulk code can plan batches
before it encodes anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Sequence

from greenmongo.errors import DocumentTooLarge
from greenmongo.wire.header import DEFAULT_MAX_MESSAGE_SIZE, HEADER_SIZE

DEFAULT_MAX_BSON_SIZE = 16 * 1024 * 1024
DEFAULT_MAX_WRITE_BATCH_SIZE = 100_000

#: What a write command may add on top of maxBsonObjectSize (Write Commands spec).
COMMAND_OVERHEAD = 16 * 1024


@dataclass(frozen=True)
class WireLimits:
    """The three size limits a server announces in its hello reply."""

    max_bson_size: int = DEFAULT_MAX_BSON_SIZE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_write_batch_size: int = DEFAULT_MAX_WRITE_BATCH_SIZE

    @classmethod
    def from_hello(cls, hello: Mapping[str, Any]) -> "WireLimits":
        return cls(
            max_bson_size=int(hello.get("maxBsonObjectSize", DEFAULT_MAX_BSON_SIZE)),
            max_message_size=int(hello.get("maxMessageSizeBytes", DEFAULT_MAX_MESSAGE_SIZE)),
            max_write_batch_size=int(hello.get("maxWriteBatchSize", DEFAULT_MAX_WRITE_BATCH_SIZE)),
        )


def op_msg_overhead(body_size: int, identifier: str, *, checksum: bool = False) -> int:
    """Bytes of an OP_MSG other than the documents of its one document sequence."""
    return (HEADER_SIZE + 4            # header, flagBits
            + 1 + body_size            # kind-0 section
            + 1 + 4 + len(identifier.encode("utf-8")) + 1  # kind-1 section header
            + (4 if checksum else 0))


def iter_batches(
    document_sizes: Sequence[int],
    *,
    overhead: int,
    limits: WireLimits = WireLimits(),
    acknowledged: bool = True,
    operation: str = "insert",
    max_batch_bytes: Optional[int] = None,
) -> Iterator[tuple[int, int]]:
    """Yield ``(start, end)`` index ranges covering ``document_sizes`` in order.

    Raises DocumentTooLarge when one document cannot fit in a message even
    alone, or, for an unacknowledged write, is over maxBsonObjectSize (an
    acknowledged write lets the server report that document's error).
    ``max_batch_bytes`` caps the documents' total bytes per batch, but a
    first document over it still goes alone (automatic encryption's 2 MiB).
    """
    room = limits.max_message_size - overhead
    start = 0
    total = len(document_sizes)
    while start < total:
        used = 0
        end = start
        while end < total and end - start < limits.max_write_batch_size:
            size = document_sizes[end]
            if not acknowledged and size > limits.max_bson_size:
                raise DocumentTooLarge(
                    f"{operation} command document too large: {size} bytes, the maximum is "
                    f"{limits.max_bson_size}")
            if max_batch_bytes is not None and end > start and used + size > max_batch_bytes:
                break
            if used + size > room:
                if end == start:
                    raise DocumentTooLarge(
                        f"{operation} command document too large: {size} bytes does not fit in a "
                        f"{limits.max_message_size}-byte message")
                break
            used += size
            end += 1
        yield start, end
        start = end


def split_batches(
    documents: Sequence[bytes],
    *,
    overhead: int,
    limits: WireLimits = WireLimits(),
    acknowledged: bool = True,
    operation: str = "insert",
) -> list[Sequence[bytes]]:
    """Encoded documents grouped into batches; see ``iter_batches`` for the rules."""
    sizes = [len(document) for document in documents]
    return [documents[start:end] for start, end in
            iter_batches(sizes, overhead=overhead, limits=limits, acknowledged=acknowledged,
                         operation=operation)]
