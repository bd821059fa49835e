"""Regex: a BSON regular expression kept as pattern + flag letters, since not every one compiles in Python."""

from __future__ import annotations

import re
from typing import Any, Pattern, Union

from greenmongo.bson._slots import getstate_slots, setstate_slots

# BSON flag letter -> Python re flag (only the ones Python has), as plain ints: RegexFlag's
# enum operators are slow on the encode path.
_FLAG_BITS = {"i": int(re.IGNORECASE), "l": int(re.LOCALE), "m": int(re.MULTILINE), "s": int(re.DOTALL),
              "u": int(re.UNICODE), "x": int(re.VERBOSE)}
_ALPHABETICAL = tuple(sorted(_FLAG_BITS.items()))


#: The type of a compiled regular expression (``re.Pattern``), PyMongo's name for it.
RE_TYPE = type(re.compile(""))


def str_flags_to_int(str_flags: str) -> int:
    """Python ``re`` flag bits for BSON option letters (letters Python lacks are ignored)."""
    value = 0
    for letter in str_flags:
        value |= _FLAG_BITS.get(letter, 0)
    return value


def int_flags_to_str(flags: int) -> str:
    """The BSON options string: known letters in alphabetical order, as BSON requires."""
    flags = int(flags)
    return "".join(letter for letter, bit in _ALPHABETICAL if flags & bit)


class Regex:
    __slots__ = ("pattern", "flags")
    __getstate__ = getstate_slots
    __setstate__ = setstate_slots
    _type_marker = 11

    def __init__(self, pattern: Union[str, bytes], flags: Union[str, int] = 0) -> None:
        if isinstance(pattern, bytes):
            pattern = pattern.decode("utf-8")
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be str or bytes, not {type(pattern).__name__}")
        if isinstance(flags, str):
            flags = str_flags_to_int(flags)
        elif isinstance(flags, int):
            flags = int(flags)
        else:
            raise TypeError(f"flags must be str or int, not {type(flags).__name__}")
        self.pattern = pattern
        self.flags = flags

    @classmethod
    def from_native(cls, regex: Pattern[Any]) -> "Regex":
        return cls(regex.pattern, regex.flags)

    def try_compile(self) -> Pattern[Any]:
        return re.compile(self.pattern, self.flags)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Regex):
            return self.pattern == other.pattern and self.flags == other.flags
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like PyMongo's

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r}, {self.flags!r})"
