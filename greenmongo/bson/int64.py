"""Int64: an int that always encodes as BSON int64, even when it would fit in int32."""

from __future__ import annotations


class Int64(int):
    __slots__ = ()
    _type_marker = 18

    def __repr__(self) -> str:
        return f"Int64({int(self)})"

    # str() and format() give the number, as for an int (and PyMongo's Int64): only repr names the type.
    __str__ = int.__repr__
    __format__ = int.__format__

    def __getstate__(self) -> int:
        return int(self)

    def __setstate__(self, state: int) -> None:
        pass
