"""SASLprep (RFC 4013): the stringprep profile SCRAM-SHA-256 applies to passwords.

Two spellings of one password ("I\\u00adX" and "IX") must derive the same key,
or a user could not log in from a client that normalizes differently. Uses the
Unicode 3.2 tables RFC 3454 is defined against (``stringprep`` and
``unicodedata.ucd_3_2_0``), not the interpreter's current Unicode version.
"""

from __future__ import annotations

import stringprep
import unicodedata

__all__ = ["saslprep"]

_UCD_3_2 = unicodedata.ucd_3_2_0

# RFC 4013 section 2.3: characters that may not appear in the output.
_PROHIBITED = (
    ("non-ASCII space", stringprep.in_table_c12),
    ("ASCII control character", stringprep.in_table_c21),
    ("non-ASCII control character", stringprep.in_table_c22),
    ("private use character", stringprep.in_table_c3),
    ("non-character code point", stringprep.in_table_c4),
    ("surrogate code point", stringprep.in_table_c5),
    ("character inappropriate for plain text", stringprep.in_table_c6),
    ("character inappropriate for canonical representation", stringprep.in_table_c7),
    ("change display property or deprecated character", stringprep.in_table_c8),
    ("tagging character", stringprep.in_table_c9),
)


def saslprep(text: str, prohibit_unassigned: bool = True) -> str:
    """Prepare ``text`` with SASLprep; raise ``ValueError`` naming the offending character.

    ``prohibit_unassigned`` selects RFC 3454's "stored string" rule (unassigned
    code points rejected, the default, as for passwords kept by a server) or the
    "query" rule (allowed).
    """
    if not isinstance(text, str):
        raise TypeError(f"SASLprep needs a str, not {type(text).__name__}")
    if text.isascii() and all(" " <= ch <= "~" for ch in text):
        return text  # printable ASCII is its own SASLprep form

    # 2.1 Mapping: non-ASCII spaces become SPACE, "commonly mapped to nothing" vanish.
    mapped = "".join(" " if stringprep.in_table_c12(ch) else ch
                     for ch in text if not stringprep.in_table_b1(ch))
    # 2.2 Normalization: Unicode 3.2 NFKC.
    prepared = _UCD_3_2.normalize("NFKC", mapped)
    if not prepared:
        return prepared

    for ch in prepared:
        for what, in_table in _PROHIBITED:
            if in_table(ch):
                raise ValueError(f"SASLprep: prohibited {what} U+{ord(ch):04X}")
        if prohibit_unassigned and stringprep.in_table_a1(ch):
            raise ValueError(f"SASLprep: unassigned code point U+{ord(ch):04X}")

    # 2.4 Bidirectional characters (RFC 3454 section 6).
    if any(stringprep.in_table_d1(ch) for ch in prepared):
        if any(stringprep.in_table_d2(ch) for ch in prepared):
            raise ValueError("SASLprep: string mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1])):
            raise ValueError("SASLprep: right-to-left string must start and end with a right-to-left character")
    return prepared
