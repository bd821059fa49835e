"""Int64: an int that always encodes as BSON int64, even when it would fit in int32."""

from __future__ import annotations


class Int64(int):
    __slots__ = ()
    _type_marker = 18

    def __repr__(self) -> str:
        return f"Int64({int(self)})"

    def __getstate__(self) -> int:
        return int(self)

    def __setstate__(self, state: int) -> None:
        pass
