"""clean_text equals ftfy.fix_text + NFC + whitespace collapse; its shortcuts never change a result."""

from __future__ import annotations

import random
import re
import sys
import unicodedata

import ftfy
import pytest
from ftfy.badness import is_bad

from corpusbuild.cleaning import (
    _ASCII_SLOW_PATH_IS_UNPRINTABLE,
    _MOJIBAKE_ANCHOR_RE,
    clean_text,
    collapse_whitespace,
    looks_like_mojibake,
)
from realtext import pubmed_texts, pubmedqa_abstracts, textbook_books


def reference_clean(text: str) -> str:
    """The cleaning a careful user would write: collapse line breaks, ftfy, NFC, collapse whitespace."""
    one_line = " ".join(text.replace("\r", " ").split(" "))
    return collapse_whitespace(unicodedata.normalize("NFC", ftfy.fix_text(collapse_ascii(one_line))))


def collapse_ascii(text: str) -> str:
    import re

    return re.sub(r"[ \t\n\r\f\v]+", " ", text).strip()


def real_texts() -> list[str]:
    return [*pubmed_texts(), *pubmedqa_abstracts(), *textbook_books().values()]


def test_clean_text_matches_ftfy_on_every_real_text():
    texts = real_texts()
    assert len(texts) > 900
    mismatches = [t[:80] for t in texts if clean_text(t) != reference_clean(t)]
    assert mismatches == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The Mona Lisa doesnÃ¢â‚¬â„¢t have eyebrows.", "The Mona Lisa doesn't have eyebrows."),  # mojibake
        ("Patients (n\u00a0=\u00a012) â€“ controls", "Patients (n = 12) – controls"),  # NBSP + mojibake dash
        ("ﬁbrosis and ﬂow", "fibrosis and flow"),  # ligatures
        ("“quoted” and ‘single’", "\"quoted\" and 'single'"),  # curly quotes, as ftfy uncurls them
        ("Cafe\u0301  au\tlait\n\n", "Café au lait"),  # NFC and whitespace
        ("TNF-&alpha; &amp; IL-6", "TNF-α & IL-6"),  # HTML entities left in the text
        ("ＡＢＣ１２３", "ABC123"),  # full-width characters
    ],
)
def test_clean_text_fixes_what_ftfy_fixes(raw, expected):
    assert clean_text(raw) == expected
    assert clean_text(raw) == reference_clean(raw)


def test_clean_text_fast_path_returns_clean_text_unchanged():
    text = "Telomere length (95% CI 1.07 to 2.78; p = 0.048) in α-cells ≥ 3 µm ± 0.2."
    assert clean_text(text) is text or clean_text(text) == text


def test_mojibake_check_agrees_with_ftfy_is_bad():
    """The windowed search gives ftfy's answer: on real text and on 50,000 seeded random strings
    dense in the characters mojibake is made of."""
    for text in real_texts():
        assert looks_like_mojibake(text) == is_bad(text)
    anchors = sorted({chr(c) for c in range(0x80, 0x3000) if _MOJIBAKE_ANCHOR_RE.match(chr(c))})
    alphabet = anchors + list("abcXYZ .,!?-\n\t0129") + ["α", "≥", "é", "\u2009", "ü", "°", "µ", "±"]
    rng = random.Random(20261122)
    disagreements = 0
    found_bad = 0
    for _ in range(50_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        bad = is_bad(text)
        found_bad += bad
        disagreements += bad != looks_like_mojibake(text)
    assert disagreements == 0
    assert 1_000 < found_bad < 49_000  # the sample exercises both answers


def texts_cleaned_unlike_ftfy(pieces: list[str], seed: int, most_pieces: int) -> list[str]:
    """10,000 seeded random strings of up to `most_pieces` pieces on which clean_text and ftfy differ."""
    rng = random.Random(seed)
    texts = ("".join(rng.choice(pieces) for _ in range(rng.randint(1, most_pieces))) for _ in range(10_000))
    return [text for text in texts if clean_text(text) != reference_clean(text)]


def test_clean_text_matches_ftfy_on_seeded_random_strings():
    """The fast path's triggers (HTML entities, quotes, mojibake, whitespace, NFC) never skip a text
    ftfy would change: 10,000 seeded random strings dense in entity fragments and trigger characters."""
    pieces = list("abcXYZ &;#.,-\n\t01") + ["&amp;", "&#39;", "&alpha;", "&x", "R&D", "&#x3b1;", "&;", "AT&T;"]
    pieces += ["’", "“", "\u00a0", "Ã", "â€", "©", "ﬁ", "e\u0301", "\r", "\u2028", "α", "Ａ"]
    assert texts_cleaned_unlike_ftfy(pieces, 20261123, 12) == []


def test_ascii_text_takes_the_printable_shortcut_and_matches_ftfy():
    """On ASCII text the slow path's triggers are exactly the unprintable characters (checked at
    import, and the shortcut is used); 10,000 seeded random ASCII strings over all 128 characters
    clean exactly as ftfy does."""
    assert _ASCII_SLOW_PATH_IS_UNPRINTABLE
    pieces = [chr(code) for code in range(128)] + ["  ", "&amp;", "&#39;", "AT&T;", "R&D"]
    assert texts_cleaned_unlike_ftfy(pieces, 20261124, 16) == []


def test_collapse_whitespace_splits_on_exactly_what_regex_whitespace_matches():
    """collapse_whitespace uses str.split(); it must treat every code point as `\\s` does."""
    whitespace = re.compile(r"\s")
    differ = [hex(c) for c in range(sys.maxunicode + 1) if bool(whitespace.match(chr(c))) != chr(c).isspace()]
    assert differ == []
    assert collapse_whitespace("\u2003 a\u00a0\u00a0b\n\t c\u3000") == "a b c"
