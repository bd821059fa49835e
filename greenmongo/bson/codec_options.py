"""CodecOptions: how BSON maps to Python (document class, time zones, UUIDs, custom types)."""

from __future__ import annotations

import abc
import datetime
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, NamedTuple, TypeVar

from greenmongo.bson.binary import (
    ALL_UUID_REPRESENTATIONS,
    UUID_REPRESENTATION_NAMES,
    UuidRepresentation,
)
from greenmongo.bson.datetime_ms import DatetimeConversion


class TypeEncoder(abc.ABC):
    """Encodes a custom Python type as something BSON knows."""

    @property
    @abc.abstractmethod
    def python_type(self) -> Any: ...

    @abc.abstractmethod
    def transform_python(self, value: Any) -> Any: ...


class TypeDecoder(abc.ABC):
    """Decodes a BSON type into a custom Python value."""

    @property
    @abc.abstractmethod
    def bson_type(self) -> Any: ...

    @abc.abstractmethod
    def transform_bson(self, value: Any) -> Any: ...


class TypeCodec(TypeEncoder, TypeDecoder):
    """Both directions for one custom type."""


class TypeRegistry:
    """Custom codecs plus a fallback encoder, looked up by exact type."""

    def __init__(self, type_codecs: Iterable[TypeEncoder | TypeDecoder] | None = None,
                 fallback_encoder: Callable[[Any], Any] | None = None) -> None:
        self.__type_codecs = list(type_codecs or [])
        self._fallback_encoder = fallback_encoder
        self._encoder_map: dict[Any, Callable[[Any], Any]] = {}
        self._decoder_map: dict[Any, Callable[[Any], Any]] = {}
        if fallback_encoder is not None and not callable(fallback_encoder):
            raise TypeError("fallback_encoder must be callable")
        for codec in self.__type_codecs:
            is_valid = False
            if isinstance(codec, TypeEncoder):
                self._validate(codec.python_type, "encode")
                self._encoder_map[codec.python_type] = codec.transform_python
                is_valid = True
            if isinstance(codec, TypeDecoder):  # decoding may retarget any BSON type (e.g. Decimal128)
                self._decoder_map[codec.bson_type] = codec.transform_bson
                is_valid = True
            if not is_valid:
                raise TypeError(f"expected a TypeEncoder, TypeDecoder or TypeCodec, not {codec!r}")

    @staticmethod
    def _validate(python_type: Any, direction: str) -> None:
        from greenmongo.bson.encoder import BUILTIN_ENCODED_TYPES  # the encoder imports us: defer

        if python_type in BUILTIN_ENCODED_TYPES or (isinstance(python_type, type) and any(
                issubclass(python_type, t) for t in BUILTIN_ENCODED_TYPES)):
            raise TypeError(f"cannot register a custom {direction}r for {python_type}: "
                            "BSON already handles that type natively")

    @property
    def fallback_encoder(self) -> Callable[[Any], Any] | None:
        """The callable that encodes values no codec or BSON type covers (None: such values fail)."""
        return self._fallback_encoder

    @property
    def codecs(self) -> list[TypeEncoder | TypeDecoder]:
        return list(self.__type_codecs)

    @property
    def is_empty(self) -> bool:
        return not (self._encoder_map or self._decoder_map or self._fallback_encoder)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TypeRegistry):
            return NotImplemented
        return (self._decoder_map == other._decoder_map and self._encoder_map == other._encoder_map
                and self._fallback_encoder == other._fallback_encoder)

    def __repr__(self) -> str:
        return f"TypeRegistry(type_codecs={self.__type_codecs!r}, fallback_encoder={self._fallback_encoder!r})"


class _CodecOptionsBase(NamedTuple):
    document_class: type[Mapping[str, Any]]
    tz_aware: bool
    uuid_representation: int
    unicode_decode_error_handler: str
    tzinfo: datetime.tzinfo | None
    type_registry: TypeRegistry
    datetime_conversion: DatetimeConversion


_CodecOptionsT = TypeVar("_CodecOptionsT", bound="CodecOptions")


class CodecOptions(_CodecOptionsBase):
    """Immutable; build variants with ``with_options``."""

    def __new__(
        cls: type[_CodecOptionsT],
        document_class: type[Mapping[str, Any]] | None = None,
        tz_aware: bool = False,
        uuid_representation: int | None = UuidRepresentation.UNSPECIFIED,
        unicode_decode_error_handler: str = "strict",
        tzinfo: datetime.tzinfo | None = None,
        type_registry: TypeRegistry | None = None,
        datetime_conversion: DatetimeConversion | None = DatetimeConversion.DATETIME,
    ) -> _CodecOptionsT:
        doc_class = document_class or dict
        # A generic alias (SON[str, Any], dict[str, Any]) is checked by its origin class.
        check_class = getattr(doc_class, "__origin__", doc_class)
        if not (isinstance(check_class, type) and (issubclass(check_class, MutableMapping)
                                                   or getattr(check_class, "_type_marker", None) == 101)):
            # The decoder fills document_class() item by item, so it must be mutable (or raw).
            raise TypeError("document_class must be dict, bson.son.SON, bson.raw_bson.RawBSONDocument, "
                            "or a subclass of collections.abc.MutableMapping")
        if not isinstance(tz_aware, bool):
            raise TypeError(f"tz_aware must be True or False, not {tz_aware!r}")
        if uuid_representation is None:
            uuid_representation = UuidRepresentation.UNSPECIFIED
        if uuid_representation not in ALL_UUID_REPRESENTATIONS:
            raise ValueError("uuid_representation must be a value from UuidRepresentation")
        if not isinstance(unicode_decode_error_handler, str):
            raise TypeError("unicode_decode_error_handler must be a string, "
                            f"not {type(unicode_decode_error_handler).__name__}")
        if tzinfo is not None:
            if not isinstance(tzinfo, datetime.tzinfo):
                raise TypeError("tzinfo must be an instance of datetime.tzinfo")
            if not tz_aware:
                raise ValueError("cannot specify tzinfo without also setting tz_aware=True")
        type_registry = type_registry or TypeRegistry()
        if not isinstance(type_registry, TypeRegistry):
            raise TypeError("type_registry must be an instance of TypeRegistry")
        if datetime_conversion is None:
            datetime_conversion = DatetimeConversion.DATETIME
        datetime_conversion = DatetimeConversion(datetime_conversion)
        return super().__new__(cls, doc_class, tz_aware, uuid_representation, unicode_decode_error_handler,
                               tzinfo, type_registry, datetime_conversion)

    def with_options(self, **kwargs: Any) -> CodecOptions:
        opts = self._asdict()
        opts.update(kwargs)
        return CodecOptions(**opts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._arguments_repr()})"

    def _arguments_repr(self) -> str:
        """The fields as ``name=value`` text, in PyMongo's format (``document_class=dict``)."""
        document_class = "dict" if self.document_class is dict else repr(self.document_class)
        return (f"document_class={document_class}, tz_aware={self.tz_aware!r}, "
                f"uuid_representation={UUID_REPRESENTATION_NAMES[self.uuid_representation]}, "
                f"unicode_decode_error_handler={self.unicode_decode_error_handler!r}, "
                f"tzinfo={self.tzinfo!r}, type_registry={self.type_registry!r}, "
                f"datetime_conversion={self.datetime_conversion!s}")


DEFAULT_CODEC_OPTIONS = CodecOptions()
