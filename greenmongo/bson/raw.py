"""RawBSONDocument: BSON bytes that decode only when a field is read (for proxies and pass-through)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from typing import Any

from greenmongo.bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from greenmongo.errors import InvalidBSON


class RawBSONDocument(Mapping[str, Any]):
    """Immutable view of one BSON document; ``raw`` is the bytes, fields decode on first access.

    Nested documents read from it are RawBSONDocuments too (same codec options).
    """

    __slots__ = ("__codec_options", "__inflated", "__raw")
    _type_marker = 101

    def __init__(self, bson_bytes: bytes, codec_options: CodecOptions | None = None) -> None:
        if codec_options is None:
            codec_options = DEFAULT_RAW_BSON_OPTIONS
        elif not isinstance(codec_options, CodecOptions):
            raise TypeError("codec_options must be a CodecOptions")
        elif not (isinstance(codec_options.document_class, type)
                  and issubclass(codec_options.document_class, RawBSONDocument)):
            # Nested documents decode as document_class: anything but a RawBSONDocument would
            # silently stop being raw one level down (PyMongo refuses this too).
            raise TypeError(f"RawBSONDocument cannot use CodecOptions with document class "
                            f"{codec_options.document_class}")
        self.__raw = bytes(bson_bytes)
        self.__inflated: dict[str, Any] | None = None
        self.__codec_options = codec_options
        # Check the envelope now so a bad buffer fails at construction, not at first access.
        if len(self.__raw) < 5 or int.from_bytes(self.__raw[:4], "little", signed=True) != len(self.__raw) \
                or self.__raw[-1] != 0:
            raise InvalidBSON("RawBSONDocument needs exactly one well-framed BSON document")

    @property
    def raw(self) -> bytes:
        return self.__raw

    def items(self) -> ItemsView[str, Any]:
        return self.__inflate().items()

    def __inflate(self) -> dict[str, Any]:
        if self.__inflated is None:
            from greenmongo.bson.decoder import _Malformed, decode_document

            try:
                self.__inflated = decode_document(self.__raw, 0, len(self.__raw), self.__codec_options, -1)
            except _Malformed as exc:
                raise InvalidBSON(str(exc)) from None
        return self.__inflated

    def __getitem__(self, item: str) -> Any:
        return self.__inflate()[item]

    def __iter__(self) -> Iterator[str]:
        return iter(self.__inflate())

    def __len__(self) -> int:
        return len(self.__inflate())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawBSONDocument):
            return self.__raw == other.raw
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        """Pickles as its bytes and options; the inflated cache is rebuilt on demand."""
        return type(self), (self.__raw, self.__codec_options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__raw!r}, codec_options={self.__codec_options!r})"


#: The CodecOptions a RawBSONDocument uses when given none: the defaults, with RawBSONDocument
#: as the document class (so nested documents stay raw).
DEFAULT_RAW_BSON_OPTIONS: CodecOptions = DEFAULT_CODEC_OPTIONS.with_options(document_class=RawBSONDocument)
