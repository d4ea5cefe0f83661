"""Text cleaning shared by every source: ftfy, Unicode NFC, whitespace collapsed to single spaces.

`ftfy.fix_text` is the cleaning users expect, but at ~0.6 ms per abstract it would cost more than
parsing. Most text needs none of its fixes, so `clean_text` first asks, with the same tables and
mojibake heuristic ftfy uses, whether any fix could change the text, and calls `fix_text` only then.
The shortcut is exact: a string for which every fixer is a no-op and that is already NFC is returned
unchanged by `fix_text` (its loop stops after one pass). tests/test_cleaning.py proves it on real data.
"""

from __future__ import annotations

import re
import unicodedata

import ftfy
from ftfy.badness import BADNESS_RE
from ftfy.chardata import CONTROL_CHARS, DOUBLE_QUOTE_RE, HTML_ENTITY_RE, LIGATURES, SINGLE_QUOTE_RE, WIDTH_MAP

_ASCII_WHITESPACE_RE = re.compile(r"[ \t\n\r\f\v]+")


def _trigger_class() -> re.Pattern[str]:
    """One character class of everything some ftfy fixer (other than fix_encoding and unescape_html) acts on.

    unescape_html is checked apart (`_has_html_entity`): it changes only text matching ftfy's own
    HTML_ENTITY_RE, and a bare "&" ("R&D", "A & B") is common in abstracts."""
    codepoints: set[int] = set(CONTROL_CHARS) | set(LIGATURES) | set(WIDTH_MAP)
    codepoints |= set(range(0x80, 0xA0))  # C1 controls (fix_c1_controls, NEXT LINE)
    codepoints |= {0x1B, ord("\r"), 0x2028, 0x2029}  # ANSI escapes, line breaks
    quote_chars = [chr(c) for c in range(0x2000, 0x2100) if SINGLE_QUOTE_RE.match(chr(c))]
    quote_chars += [chr(c) for c in range(0x2000, 0x2100) if DOUBLE_QUOTE_RE.match(chr(c))]
    codepoints |= {ord(c) for c in quote_chars} | {0x02BC}
    ranges = "".join(re.escape(chr(c)) for c in sorted(codepoints))
    return re.compile(f"[{ranges}\ud800-\udfff]")


_FTFY_TRIGGER_RE = _trigger_class()
# Anything that sends a text down the full path: an ftfy trigger or ASCII whitespace other than " ".
_SLOW_PATH_RE = re.compile(_FTFY_TRIGGER_RE.pattern[:-1] + "\t\n\r\f\v]")
_OTHER_WHITESPACE_RE = re.compile(r"[^\S ]")
# On ASCII text the slow path's triggers are exactly the characters str.isprintable() refuses (C0
# controls and DEL, which include \t\n\r\f\v): the same test at C speed, for the ~90% of PubMed text
# that is ASCII. Checked here rather than assumed, so a new ftfy with other triggers stays exact.
_ASCII_SLOW_PATH_IS_UNPRINTABLE = all(
    bool(_SLOW_PATH_RE.match(chr(code))) is not chr(code).isprintable() for code in range(128)
)


def _mojibake_anchor_class() -> re.Pattern[str]:
    """Every non-ASCII character ftfy's BADNESS_RE names (literally or inside a range).

    Each alternative of BADNESS_RE has at least one position that only such a character can fill,
    and no alternative is longer than 7 characters, so any match lies within 7 characters of one.
    """
    pattern = BADNESS_RE.pattern
    chars = {c for c in pattern if ord(c) >= 128}
    for match in re.finditer(r"([^\x00-\x7f])-([^\x00-\x7f])", pattern):
        chars |= {chr(c) for c in range(ord(match.group(1)), ord(match.group(2)) + 1)}
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")


_MOJIBAKE_ANCHOR_RE = _mojibake_anchor_class()
_MOJIBAKE_REACH = 7


def looks_like_mojibake(text: str) -> bool:
    """Same answer as `ftfy.badness.is_bad(text)`, searching only near characters that can start
    or end mojibake instead of the whole string (is_bad costs ~0.2 ms per abstract; this ~µs)."""
    for anchor in _MOJIBAKE_ANCHOR_RE.finditer(text):
        position = anchor.start()
        start = max(0, position - _MOJIBAKE_REACH)
        if BADNESS_RE.search(text, start, position + _MOJIBAKE_REACH + 1):
            # pos/endpos slicing keeps "^" meaning the start of the text, so this is exact.
            return True
    return False


def _has_html_entity(text: str) -> bool:
    """Whether ftfy's unescape_html could change the text (it only rewrites HTML_ENTITY_RE matches)."""
    return "&" in text and HTML_ENTITY_RE.search(text) is not None


def ftfy_would_change(text: str) -> bool:
    """True when `ftfy.fix_text(text)` might differ from `text`; False only when it provably won't."""
    if _FTFY_TRIGGER_RE.search(text) or _has_html_entity(text):
        return True
    if text.isascii():
        return False
    return looks_like_mojibake(text) or not unicodedata.is_normalized("NFC", text)


def collapse_whitespace(text: str) -> str:
    """Runs of any whitespace become one space; ends stripped. str.split() splits on exactly the
    characters regex `\\s` matches (str.isspace; tests/test_cleaning.py checks every code point), and
    is ~3x faster than re.sub on the short strings (keywords, names) this mostly sees."""
    return " ".join(text.split())


def clean_text(text: str, keep_width: bool = False) -> str:
    """Whitespace collapsed, ftfy-fixed where needed, NFC (see `_clean_fully`).

    Most text from XML is already clean: one scan proves that and returns it stripped. `keep_width`
    (Chinese, Japanese, Korean text): ftfy keeps full-width forms and curly quotes, which it would
    otherwise make ASCII ("是什么？（一）“好”" -> "是什么?(一)\"好\""): they are the text's own
    punctuation, and where CJK chunks end (corpusbuild.chunking)."""
    if _ASCII_SLOW_PATH_IS_UNPRINTABLE and text.isascii():
        if "  " not in text and text.isprintable() and not _has_html_entity(text):
            return text.strip()
        return _clean_fully(text)
    if "  " not in text and not _SLOW_PATH_RE.search(text) and not _has_html_entity(text):
        if text.isascii():
            return text.strip()
        if (
            not looks_like_mojibake(text)
            and unicodedata.is_normalized("NFC", text)
            and not _OTHER_WHITESPACE_RE.search(text)
        ):
            return text.strip()
    return _clean_fully(text, keep_width)


_KEEP_WIDTH = ftfy.TextFixerConfig(fix_character_width=False, uncurl_quotes=False)


def _clean_fully(text: str, keep_width: bool = False) -> str:
    """ASCII whitespace collapsed, ftfy.fix_text (only where it can matter) + NFC, then all Unicode
    whitespace collapsed.

    Collapsing ASCII whitespace first makes the text one line, so ftfy sees the same segment whatever
    line breaks the XML had, while a no-break space (part of some mojibake) still reaches ftfy.
    """
    text = _ASCII_WHITESPACE_RE.sub(" ", text).strip()
    if ftfy_would_change(text):
        text = unicodedata.normalize("NFC", ftfy.fix_text(text, _KEEP_WIDTH) if keep_width else ftfy.fix_text(text))
    elif text.isascii():
        return text  # ASCII whitespace is already collapsed
    return collapse_whitespace(text)


def visible_or_empty(text: str) -> str:
    """The text, or "" when it holds nothing visible (only spaces, zero-width or control characters)."""
    return text if any(unicodedata.category(c)[0] not in "CZ" for c in text) else ""
