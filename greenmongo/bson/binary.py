"""Binary data with a subtype, UUID representations (BSON Binary UUID spec) and vectors (subtype 9)."""

from __future__ import annotations

import enum
import struct
import sys
import uuid as _uuid
from typing import Any, Sequence, Union

from greenmongo.bson._slots import getstate_slots, setstate_slots

BINARY_SUBTYPE = 0
FUNCTION_SUBTYPE = 1
OLD_BINARY_SUBTYPE = 2
OLD_UUID_SUBTYPE = 3
UUID_SUBTYPE = 4
MD5_SUBTYPE = 5
ENCRYPTED_SUBTYPE = 6
COLUMN_SUBTYPE = 7
SENSITIVE_SUBTYPE = 8
VECTOR_SUBTYPE = 9
USER_DEFINED_SUBTYPE = 128


class UuidRepresentation:
    """How a ``uuid.UUID`` maps to BSON binary. UNSPECIFIED means: refuse to guess."""

    UNSPECIFIED = 0
    STANDARD = UUID_SUBTYPE
    PYTHON_LEGACY = OLD_UUID_SUBTYPE
    JAVA_LEGACY = 5
    CSHARP_LEGACY = 6


STANDARD = UuidRepresentation.STANDARD
PYTHON_LEGACY = UuidRepresentation.PYTHON_LEGACY
JAVA_LEGACY = UuidRepresentation.JAVA_LEGACY
CSHARP_LEGACY = UuidRepresentation.CSHARP_LEGACY
UUID_REPRESENTATION_NAMES = {
    UuidRepresentation.UNSPECIFIED: "UuidRepresentation.UNSPECIFIED",
    UuidRepresentation.STANDARD: "UuidRepresentation.STANDARD",
    UuidRepresentation.PYTHON_LEGACY: "UuidRepresentation.PYTHON_LEGACY",
    UuidRepresentation.JAVA_LEGACY: "UuidRepresentation.JAVA_LEGACY",
    UuidRepresentation.CSHARP_LEGACY: "UuidRepresentation.CSHARP_LEGACY",
}
ALL_UUID_REPRESENTATIONS = tuple(UUID_REPRESENTATION_NAMES)
#: The binary subtypes that can hold a UUID.
ALL_UUID_SUBTYPES = (OLD_UUID_SUBTYPE, UUID_SUBTYPE)


def _numpy_array(value: Any) -> bool:
    """True for a numpy ndarray, without importing numpy (it cannot be one if numpy is not loaded)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _import_numpy(purpose: str) -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise ImportError(f"{purpose} requires numpy to be installed") from exc
    return numpy


class BinaryVectorDtype(enum.Enum):
    """The vector subtype's first byte: element type in the high nibble, element bits in the low."""

    INT8 = b"\x03"
    FLOAT32 = b"\x27"
    PACKED_BIT = b"\x10"


class BinaryVector:
    """A decoded subtype-9 vector: the numbers, their dtype and (for PACKED_BIT) the ignored bit count.

    ``data`` is a list, or the 1-D numpy array it was given (``Binary.as_vector(return_numpy=True)``).
    """

    __slots__ = ("data", "dtype", "padding")
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots

    def __init__(self, data: Any, dtype: BinaryVectorDtype, padding: int = 0) -> None:
        self.data = data if _numpy_array(data) else list(data)
        self.dtype = dtype
        self.padding = padding

    def __repr__(self) -> str:
        return f"BinaryVector(dtype={self.dtype}, padding={self.padding}, data={self.data})"

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, BinaryVector):
            return False
        if self.dtype != other.dtype or self.padding != other.padding:
            return False
        if _numpy_array(self.data) or _numpy_array(other.data):
            return len(self.data) == len(other.data) and all(a == b for a, b in zip(self.data, other.data))
        return self.data == other.data

    __hash__ = None  # type: ignore[assignment]


def _swap_java(data: bytes) -> bytes:
    return data[0:8][::-1] + data[8:16][::-1]


class Binary(bytes):
    """Bytes plus a BSON binary subtype. Subtype 0 decodes to plain ``bytes``."""

    _type_marker = 5
    __subtype: int

    def __new__(cls, data: Union[bytes, bytearray, memoryview], subtype: int = BINARY_SUBTYPE) -> "Binary":
        if not isinstance(subtype, int):
            raise TypeError(f"subtype must be an instance of int, not {type(subtype).__name__}")
        if subtype >= 256 or subtype < 0:
            raise ValueError("subtype must be contained in [0, 256)")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes-like, not {type(data).__name__}")
        self = bytes.__new__(cls, data)
        self.__subtype = subtype
        return self

    @property
    def subtype(self) -> int:
        return self.__subtype

    # -- UUIDs ---------------------------------------------------------------

    @classmethod
    def from_uuid(cls, uuid: _uuid.UUID, uuid_representation: int = UuidRepresentation.STANDARD) -> "Binary":
        value = uuid
        if not isinstance(value, _uuid.UUID):
            raise TypeError(f"uuid must be an instance of uuid.UUID, not {type(value).__name__}")
        if uuid_representation not in ALL_UUID_REPRESENTATIONS:
            raise ValueError(f"uuid_representation must be a value from UuidRepresentation, "
                             f"not {uuid_representation!r}")
        if uuid_representation == UuidRepresentation.UNSPECIFIED:
            raise ValueError(
                "cannot encode a native uuid.UUID with UuidRepresentation.UNSPECIFIED: set "
                "uuid_representation in CodecOptions (or the uuidRepresentation URI option) to one of "
                "STANDARD, PYTHON_LEGACY, JAVA_LEGACY or CSHARP_LEGACY, or wrap it with Binary.from_uuid()")
        if uuid_representation == UuidRepresentation.STANDARD:
            return cls(value.bytes, UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.PYTHON_LEGACY:
            return cls(value.bytes, OLD_UUID_SUBTYPE)
        if uuid_representation == UuidRepresentation.JAVA_LEGACY:
            return cls(_swap_java(value.bytes), OLD_UUID_SUBTYPE)
        return cls(value.bytes_le, OLD_UUID_SUBTYPE)

    def as_uuid(self, uuid_representation: int = UuidRepresentation.STANDARD) -> _uuid.UUID:
        if uuid_representation not in ALL_UUID_REPRESENTATIONS:
            raise ValueError(f"uuid_representation must be a value from UuidRepresentation, "
                             f"not {uuid_representation!r}")
        if uuid_representation == UuidRepresentation.UNSPECIFIED:
            raise ValueError("cannot decode a UUID with UuidRepresentation.UNSPECIFIED")
        expected = UUID_SUBTYPE if uuid_representation == UuidRepresentation.STANDARD else OLD_UUID_SUBTYPE
        if self.__subtype != expected or len(self) != 16:
            name = UUID_REPRESENTATION_NAMES[uuid_representation]
            raise ValueError(f"cannot decode subtype {self.__subtype} as a UUID with {name}")
        data = bytes(self)
        if uuid_representation == UuidRepresentation.JAVA_LEGACY:
            return _uuid.UUID(bytes=_swap_java(data))
        if uuid_representation == UuidRepresentation.CSHARP_LEGACY:
            return _uuid.UUID(bytes_le=data)
        return _uuid.UUID(bytes=data)

    # -- vectors -------------------------------------------------------------

    @classmethod
    def from_vector(cls, vector: Union[BinaryVector, Sequence[Union[int, float]], Any],
                    dtype: BinaryVectorDtype | None = None, padding: int | None = None) -> "Binary":
        """A subtype-9 Binary from a BinaryVector, or from a list or 1-D numpy array plus ``dtype``."""
        if isinstance(vector, BinaryVector):
            if dtype is not None or padding is not None:
                raise ValueError("pass dtype and padding only with a list, not with a BinaryVector")
            dtype, padding, values = vector.dtype, vector.padding, vector.data
        else:
            if dtype is None:
                raise ValueError("dtype is required with a list of numbers")
            values, padding = vector, padding or 0
        if not isinstance(dtype, BinaryVectorDtype):
            raise TypeError(f"dtype must be a BinaryVectorDtype, not {dtype!r}")
        if _numpy_array(values):
            values = _numpy_values(values, dtype)
        else:
            values = list(values)
        if dtype is BinaryVectorDtype.PACKED_BIT:
            if not 0 <= padding <= 7:
                raise ValueError(f"padding must be in [0, 7] for PACKED_BIT, not {padding}")
            if padding and not values:
                raise ValueError("an empty PACKED_BIT vector cannot have padding")
            if padding and values and (values[-1] & ((1 << padding) - 1)):
                raise ValueError("the ignored (padding) bits of a PACKED_BIT vector must be zero")
            body = _pack_ints(values, "B", 0, 255, "PACKED_BIT")
        else:
            if padding:
                raise ValueError(f"padding must be 0 for {dtype.name}, not {padding}")
            if dtype is BinaryVectorDtype.INT8:
                body = _pack_ints(values, "b", -128, 127, "INT8")
            else:
                try:
                    body = struct.pack(f"<{len(values)}f", *values)
                except (struct.error, TypeError) as exc:
                    raise ValueError(f"FLOAT32 vector values must be numbers: {exc}") from None
        return cls(dtype.value + bytes((padding,)) + body, VECTOR_SUBTYPE)

    def as_vector(self, return_numpy: bool = False) -> BinaryVector:
        """The vector this subtype-9 Binary holds; its ``data`` a list, or a numpy array if ``return_numpy``."""
        if self.__subtype != VECTOR_SUBTYPE:
            raise ValueError(f"cannot decode subtype {self.__subtype} as a vector")
        if len(self) < 2:
            raise ValueError("a vector needs at least its 2 header bytes (dtype, padding)")
        try:
            dtype = BinaryVectorDtype(self[0:1])
        except ValueError:
            raise ValueError(f"unknown vector dtype 0x{self[0]:02x}") from None
        padding = self[1]
        body = bytes(self[2:])
        if dtype is BinaryVectorDtype.PACKED_BIT:
            if padding > 7:
                raise ValueError(f"PACKED_BIT padding must be in [0, 7], not {padding}")
            if padding and not body:
                raise ValueError("an empty PACKED_BIT vector cannot have padding")
            if padding and body[-1] & ((1 << padding) - 1):
                raise ValueError("the ignored (padding) bits of a PACKED_BIT vector must be zero")
        elif padding:
            raise ValueError(f"padding must be 0 for {dtype.name}, not {padding}")
        elif dtype is BinaryVectorDtype.FLOAT32 and len(body) % 4:
            raise ValueError(f"FLOAT32 vector data must be a multiple of 4 bytes, not {len(body)}")
        if return_numpy:
            numpy = _import_numpy("Binary.as_vector(return_numpy=True)")
            element = {BinaryVectorDtype.INT8: "i1", BinaryVectorDtype.FLOAT32: "<f4",
                       BinaryVectorDtype.PACKED_BIT: "u1"}[dtype]
            return BinaryVector(numpy.frombuffer(body, dtype=element), dtype, padding)
        if dtype is BinaryVectorDtype.PACKED_BIT:
            return BinaryVector(list(body), dtype, padding)
        if dtype is BinaryVectorDtype.INT8:
            return BinaryVector(list(struct.unpack(f"<{len(body)}b", body)), dtype, 0)
        return BinaryVector(list(struct.unpack(f"<{len(body) // 4}f", body)), dtype, 0)

    # -- value semantics -----------------------------------------------------

    def __getnewargs__(self) -> tuple[bytes, int]:  # type: ignore[override]
        return bytes(self), self.__subtype

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Binary):
            return self.__subtype == other.subtype and bytes(self) == bytes(other)
        return False

    def __hash__(self) -> int:
        return super().__hash__() ^ hash(self.__subtype)

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __repr__(self) -> str:
        if self.__subtype == SENSITIVE_SUBTYPE:
            return f"<Binary(REDACTED, {self.__subtype})>"
        return f"Binary({bytes.__repr__(self)}, {self.__subtype})"


def _numpy_values(array: Any, dtype: BinaryVectorDtype) -> list[Any]:
    """A 1-D numpy array's elements as Python numbers, for the same checks a list gets."""
    if array.ndim != 1:
        raise ValueError(f"a vector is one-dimensional; this numpy array has {array.ndim} dimensions")
    if dtype is not BinaryVectorDtype.FLOAT32 and array.dtype.kind not in "iub":
        raise ValueError(f"{dtype.name} vector values must be integers, not numpy {array.dtype}")
    values: list[Any] = array.tolist()
    return values


def _pack_ints(values: Sequence[Any], code: str, low: int, high: int, name: str) -> bytes:
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} vector values must be integers, not {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} vector value {value} is outside [{low}, {high}]")
    return struct.pack(f"<{len(values)}{code}", *values)
