"""SASLprep against RFC 4013 section 3's examples and its prohibition/bidi rules."""

from __future__ import annotations

import pytest

from greenmongo.auth.saslprep import saslprep


@pytest.mark.parametrize("given, prepared", [
    ("I\u00adX", "IX"),        # 1. SOFT HYPHEN mapped to nothing
    ("user", "user"),          # 2. no transformation
    ("USER", "USER"),          # 3. case preserved
    ("\u00aa", "a"),           # 4. output is NFKC
    ("\u2168", "IX"),          # 5. ROMAN NUMERAL NINE, NFKC
    ("\u2163", "IV"),          # the auth spec's SASLprep test password
    ("a\u00a0b", "a b"),       # non-ASCII space (C.1.2) mapped to SPACE
    ("a\u200bb", "ab"),        # ZERO WIDTH SPACE is "commonly mapped to nothing" (B.1)
    ("", ""),
    ("p@ss w0rd~", "p@ss w0rd~"),
])
def test_rfc4013_examples_and_mappings(given: str, prepared: str) -> None:
    assert saslprep(given) == prepared


@pytest.mark.parametrize("given, reason", [
    ("\u0007", "ASCII control"),                 # RFC 4013 example 6
    ("a\u0000b", "ASCII control"),
    ("a\u0085b", "non-ASCII control"),
    ("\ue000", "private use"),
    ("\ufdd0", "non-character"),
    ("a\ufffdb", "inappropriate for plain text"),
    ("\u2ff0", "canonical representation"),
    ("\u200e", "display property"),
    ("\U000e0001", "tagging"),
])
def test_prohibited_characters_are_rejected(given: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        saslprep(given)


def test_bidi_rules() -> None:
    with pytest.raises(ValueError, match="right-to-left"):
        saslprep("\u0627\u0031")  # RFC 4013 example 7: RandAL first but not last
    with pytest.raises(ValueError, match="mixes"):
        saslprep("\u0627a\u0627")  # RandALCat with LCat
    assert saslprep("\u0627\u0031\u0628") == "\u0627\u0031\u0628"  # starts and ends RTL: allowed


def test_unassigned_code_points_depend_on_stored_or_query() -> None:
    unassigned = "\u0221"  # unassigned in Unicode 3.2 (table A.1)
    with pytest.raises(ValueError, match="unassigned"):
        saslprep(unassigned)
    assert saslprep(unassigned, prohibit_unassigned=False) == unassigned


def test_requires_str() -> None:
    with pytest.raises(TypeError):
        saslprep(b"bytes")  # type: ignore[arg-type]
