"""Abbreviations a text defines, "long form (SF)", found as Schwartz & Hearst (2003) describe it.

Biomedical questions write "DMD", "ALS", "OTCD" where the vocabulary knows "Duchenne muscular
dystrophy" or not at all. The texts of the served corpus define them: "ornithine transcarbamylase
deficiency (OTCD)". A short form is the text in parentheses (at most two words, 2 to 10 characters, a
letter among them, starting with a letter or digit); its long form is found among the words right
before the parenthesis (at most min(|SF| + 5, 2|SF|) words) by matching the short form's letters and
digits from its end to its start, in order, each at or before the last, the first one at the start of
a word. The long form is the text from that word on. Where that fails and the parenthesis holds more
than one word, the pattern "short form (long form)" is tried: the word before the parenthesis against
all of its text.
"""

from __future__ import annotations

import re

MAX_SHORT_CHARS = 10
_PARENTHESIS = re.compile(r"\(([^()]{1,120})\)")
_SENTENCE_END = re.compile(r"[.;:!?]\s")


def valid_short_form(text: str) -> bool:
    return (
        2 <= len(text) <= MAX_SHORT_CHARS
        and len(text.split()) <= 2
        and any(c.isalpha() for c in text)
        and text[0].isalnum()
    )


def best_long_form(short: str, candidate: str) -> str | None:
    """The shortest tail of `candidate` whose words hold the short form's characters in order, the
    first at a word's start (None: no such tail)."""
    s, at = len(short) - 1, len(candidate) - 1
    while s >= 0:
        wanted = short[s].lower()
        if not wanted.isalnum():
            s -= 1
            continue
        while at >= 0 and (candidate[at].lower() != wanted or (s == 0 and at > 0 and candidate[at - 1].isalnum())):
            at -= 1
        if at < 0:
            return None
        at -= 1
        s -= 1
    long_form = candidate[at + 1 :].strip()
    return long_form or None


def _pair(short: str, before: str) -> tuple[str, str] | None:
    short = short.strip()
    if not valid_short_form(short):
        return None
    words = before.split()
    limit = min(len(short) + 5, 2 * len(short))
    candidate = " ".join(words[-limit:])
    long_form = best_long_form(short, candidate)
    if long_form is None:
        return None
    long_words = long_form.split()
    if len(long_form) <= len(short) or len(long_words) > limit or short.lower() in (w.lower() for w in long_words):
        return None
    return short, long_form.strip(" ,-")


def definitions(text: str) -> list[tuple[str, str]]:
    """(short form, long form) for every abbreviation the text defines, in text order."""
    found = []
    for match in _PARENTHESIS.finditer(text):
        inside = match.group(1).split(";")[0].split(",")[0].strip()
        before = text[: match.start()]
        ends = list(_SENTENCE_END.finditer(before))
        before = before[ends[-1].end() :] if ends else before
        pair = _pair(inside, before)
        if pair is None and len(inside.split()) > 1 and before.split():  # "SF (long form)"
            reverse = _pair(before.split()[-1], inside)
            pair = reverse if reverse is not None and reverse[1] == inside.strip(" ,-") else None
        if pair is not None:
            found.append(pair)
    return found
