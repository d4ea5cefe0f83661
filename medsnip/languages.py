"""Language codes shared by every stage: one spelling per language, and which ones use CJK rules.

Dumps, users and model cards spell languages differently (`zh-Hans`, `zh_CN`, `de-DE`, `FR`); medsnip
records the ISO 639-1 code. CJK languages are written without spaces between words: their text keeps
full-width punctuation, is chunked at 。！？； (corpusbuild.chunking) and is matched without word
boundaries (refkit.vocabulary.matcher).
"""

from __future__ import annotations

import re

CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})
# Languages Anserini analyzes with a language-specific Lucene analyzer (its AnalyzerMap, plus English,
# its default): `indexer bm25 --language` takes these.
ANSERINI_LANGUAGES = (
    "en",
    "ar",
    "bn",
    "da",
    "de",
    "es",
    "fa",
    "fi",
    "fr",
    "hi",
    "hu",
    "id",
    "it",
    "ja",
    "ko",
    "nl",
    "no",
    "pl",
    "pt",
    "ru",
    "sv",
    "te",
    "th",
    "tr",
    "uk",
    "zh",
)
# Scripts written without spaces between words: kana, CJK ideographs (extension A, unified, compatibility,
# extensions B-G), Hangul syllables. A regex character-class body.
CJK_CHARACTERS = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
_CJK_CHARACTER_RE = re.compile(f"[{CJK_CHARACTERS}]")
_CODE_RE = re.compile(r"^([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]+)*$")


class UnknownLanguage(ValueError):
    """A language code medsnip cannot read."""


def canonical_language(code: str) -> str:
    """`zh-Hans` -> `zh`, `de_DE` -> `de`, `FR` -> `fr`; a code that is not a language tag is an error."""
    match = _CODE_RE.match((code or "").strip())
    if match is None:
        raise UnknownLanguage(f"not a language code: {code!r} (expected e.g. en, fr, de, zh)")
    return match.group(1).lower()


def is_cjk_char(char: str) -> bool:
    return _CJK_CHARACTER_RE.match(char) is not None


def is_cjk(code: str | None) -> bool:
    return code is not None and canonical_language(code) in CJK_LANGUAGES


def language_callback(_context, _parameter, value: str | None) -> str | None:
    """A click option callback: the canonical code of a --language value, or a usage error."""
    import click

    if value is None:
        return None
    try:
        return canonical_language(value)
    except UnknownLanguage as error:
        raise click.BadParameter(str(error)) from error
