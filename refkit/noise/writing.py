"""Writing a rewrite: the question with one span replaced, and the English around it made to agree.

A swap replaces an entity's mention or an aspect's phrase. The replacement takes the case of what it
replaces and, in English, the grammatical number of the replaced words (MeSH names many concepts in the
plural); the article before it ("a etiology" -> "an etiology", none before a plural) and a verb
governing a replaced aspect ("What are the side effects" -> "What is the mechanism of action") are
made to agree. refkit.noise.grammar checks the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from refkit.vocabulary.matcher import Match, agree_number, is_plural, other_number


@dataclass
class Rewrite:
    kind: str  # "entity" | "attribute"
    query: str
    replaced: list[dict] = field(default_factory=list)  # one edit: what, type, from, to, rule, text, written, span
    target: int = 0  # which of the question's targets it rewrites (0: the first)
    subject: object = None  # an aspect rewrite's refkit.noise.subjects.Subject: what it keeps and asks anew

    def as_dict(self, number: int) -> dict:
        return {
            "number": number,
            "kind": self.kind,
            "query": self.query,
            "replaced": self.replaced,
            "target": self.target,
            **({"subject": self.subject.text} if self.subject is not None else {}),
        }


def write_swap(text: str, match: Match, written: str, record: dict, language: str) -> Rewrite:
    """`text` with `match` replaced by `written` (already in the query's case and number); `record`
    describes the edit and gains the words written."""
    english = language == "en"
    prefix = text[: match.start]
    if english:
        prefix = agree_article(prefix, written)
        if record["what"] == "aspect":
            prefix = agree_verb(prefix, match.text, written)
    record = {**record, "text": match.text, "written": written, "span": [match.start, match.end]}
    kind = "entity" if record["what"] == "entity" else "attribute"
    return Rewrite(kind, prefix + written + text[match.end :], [record])


def entity_words(match: Match, name: str, language: str) -> str:
    """How a swapped-in entity name is written where `match` stood: its case, and in English its number (of
    the name itself where the mention goes on to its abbreviation: "hepatocellular carcinoma (HCC)")."""
    written = match.text.split(" (")[0]
    return match_case(written, agree_number(written, name) if language == "en" else name)


ARTICLE_BEFORE = re.compile(r"\b(an|a)(\s+)$", re.IGNORECASE)
_AN_LETTERS = "aeiou"
_AN_INITIALS = "AEFHILMNORSX"  # letters whose name starts with a vowel sound: "an MRI", "an HIV test"


def agree_article(prefix: str, word: str) -> str:
    """`prefix` with an "a"/"an" that ends it made to agree with the words that now follow: "are they a
    etiology" -> "are they an etiology" ("an MRI" for initialisms; the article's case is kept), and no
    article before a plural ("are they a indications" -> "are they indications")."""
    match = ARTICLE_BEFORE.search(prefix)
    if match is None or not word:
        return prefix
    last = word.split()[-1]
    if last[-1:] == "s" and (singular := other_number(last)) is not None and not singular.endswith("s"):
        return prefix[: match.start(1)]  # "are they a risk factor" -> "are they indications": no article
    initialism = len(word) > 1 and word.split()[0].isupper()
    vowel = word[0] in _AN_INITIALS if initialism else word[0].lower() in _AN_LETTERS
    article = "an" if vowel else "a"
    written = match.group(1)
    article = article.upper() if written.isupper() and len(written) > 1 else article
    article = article[0].upper() + article[1:] if written[0].isupper() else article
    return prefix[: match.start(1)] + article + match.group(2)


VERB_BEFORE = re.compile(r"\b(is|are)(\s+(?:the\s+)?(?:\w+\s+){0,2})$", re.IGNORECASE)


def _head_is_plural(phrase: str) -> bool:
    """The number of an aspect phrase's head noun: "mechanism of action" (mechanism), "adverse effects"."""
    return is_plural(phrase.lower().split(" of ")[0])


def agree_verb(prefix: str, replaced: str, written: str) -> str:
    """`prefix` with an "is"/"are" just before the replaced aspect made to agree with the new one: "What
    are the side effects of X" -> "What is the mechanism of action of X"."""
    match = VERB_BEFORE.search(prefix)
    if match is None or _head_is_plural(replaced) == _head_is_plural(written):
        return prefix
    verb = "are" if _head_is_plural(written) else "is"
    verb = verb.capitalize() if match.group(1)[0].isupper() else verb
    return prefix[: match.start(1)] + verb + match.group(2)


def match_case(original: str, replacement: str) -> str:
    """The replacement in the case of the words it replaces: lower case for lower case, a capital first
    letter for a capitalised word, as it is otherwise (a symbol, an acronym)."""
    if original.islower() and not _has_capitals_inside(replacement):
        return replacement.lower()
    if original[:1].isupper() and not original.isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _has_capitals_inside(name: str) -> bool:
    """Does a name keep capitals whatever the case around it: a symbol or an acronym ("BCL11A", "HER2",
    "IL-6", two capitals in a row)? "Crohn Disease" and "X-Linked Genetic Disease" keep none: MeSH
    capitalises every word."""
    return any(re.search(r"[A-Z]{2}|[A-Z]\d|\d[A-Z]", word) for word in name.split())
