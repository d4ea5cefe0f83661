"""Dictionary matching of entities and aspects in a query: Aho-Corasick (pyahocorasick) over lower-cased
phrases, kept only on whole-word boundaries, then leftmost-longest without overlaps ("non-small cell
lung carcinoma" wins over "carcinoma"; "dose" inside "dosed" never matches).

Chinese and Japanese are written without spaces, so a phrase edge that is a Han, kana or Hangul
character needs no boundary ("奥司他韦" in "奥司他韦的作用机制是什么？"), and a Latin phrase next to CJK text
is a whole token there ("HbA1c" in "HbA1c升高"); Latin phrases inside Latin words still never match."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import ahocorasick

from medsnip.languages import is_cjk_char


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    text: str  # as written in the query
    payload: Any  # what the phrase stands for (an Entity, an Aspect)


class PhraseMatcher:
    def __init__(self, phrases: list[tuple[str, Any]], case_sensitive: bool = False):
        """`phrases`: (phrase, payload); a phrase given twice keeps its first payload. Matching ignores case
        unless `case_sensitive`."""
        self._automaton = ahocorasick.Automaton()
        self._case_sensitive = case_sensitive
        for phrase, payload in phrases:
            key = " ".join(self._fold(phrase).split())
            if key and key not in self._automaton:
                self._automaton.add_word(key, (len(key), payload))
        self._empty = len(self._automaton) == 0
        if not self._empty:
            self._automaton.make_automaton()

    def _fold(self, text: str) -> str:
        return text if self._case_sensitive else text.lower()

    def find(self, text: str) -> list[Match]:
        if self._empty:
            return []
        lowered = self._fold(text)
        if len(lowered) != len(text):  # a few characters change length when lower-cased: match on an aligned copy
            lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
        # Vocabularies name eponyms without the possessive ("Alzheimer Disease") that texts write
        # ("Alzheimer's disease"): matching runs on a copy without possessive endings, and `position` maps
        # each of its offsets back to the text.
        plain, position = _without_possessives(lowered)
        found = []
        for end_index, (length, payload) in self._automaton.iter(plain):
            start, end = end_index - length + 1, end_index + 1
            if _edge(plain, start, start - 1) and _edge(plain, end - 1, end):
                found.append((start, -(end - start), end, payload))
        chosen: list[Match] = []
        covered_until = -1
        for start, _, end, payload in sorted(found, key=lambda m: (m[0], m[1])):
            if start >= covered_until:
                first, last = position[start], position[end - 1] + 1
                chosen.append(Match(first, last, text[first:last], payload))
                covered_until = end
        return chosen


_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s?(?=\s|[^\w]|$)")


def is_acronym(form: str) -> bool:
    """A name written in capitals ("DMD", "HSP70", "IL-6", "BCL11B"): matched only as written, since in
    lower case it is often a word ("AND", "ALL", "CAT")."""
    word = form.strip()
    if " " in word or word.islower():  # most names: several words, or none in capitals
        return False
    upper = sum(1 for c in word if c.isupper())
    return upper >= 2 and upper >= sum(1 for c in word if c.islower())


class NameMatcher:
    """Entity names in a text, longest first: acronyms case-sensitively (`is_acronym`), every other name
    ignoring case, each with the variants `with_variants` adds (plurals in English, hyphens)."""

    def __init__(self, phrases: list[tuple[str, Any]], english: bool = True):
        acronyms = [(form, payload) for form, payload in phrases if is_acronym(form)]
        words = [(form, payload) for form, payload in phrases if not is_acronym(form)]
        plural = [(form + "s", payload) for form, payload in acronyms if english and form[-1:].isupper()]  # "DMDs"
        self._words = PhraseMatcher(with_variants(words, english=english))
        self._acronyms = PhraseMatcher([*acronyms, *plural], case_sensitive=True)

    def find(self, text: str) -> list[Match]:
        found = sorted(self._words.find(text) + self._acronyms.find(text), key=lambda m: (m.start, -(m.end - m.start)))
        chosen: list[Match] = []
        for match in found:
            if not chosen or match.start >= chosen[-1].end:
                chosen.append(match)
        return chosen


def _without_possessives(text: str) -> tuple[str, list[int]]:
    """`text` without possessive endings ("alzheimer's" -> "alzheimer", "patients'" -> "patients"), and the
    offset in `text` of each of its characters."""
    if "'" not in text and "\u2019" not in text:
        return text, list(range(len(text) + 1))
    kept, position, at = [], [], 0
    for possessive in _POSSESSIVE.finditer(text):
        kept.append(text[at : possessive.start()])
        position.extend(range(at, possessive.start()))
        at = possessive.end()
    kept.append(text[at:])
    position.extend(range(at, len(text) + 1))
    return "".join(kept), position


def with_variants(phrases: list[tuple[str, Any]], english: bool = True) -> list[tuple[str, Any]]:
    """The phrases, then the variants a text may write that a vocabulary does not list: the other number
    of the last word ("Salmonella Infections" / "salmonella infection"; English only: `english`) and
    hyphens as spaces or dropped ("anti-bacterial" / "anti bacterial" / "antibacterial"). Variants come
    after every listed phrase, so a listed name of another entity wins over a variant (PhraseMatcher
    keeps the first)."""
    variants = []
    for phrase, payload in phrases:
        if "-" in phrase:
            forms = {phrase, phrase.replace("-", " "), phrase.replace("-", "")}
            if english:
                forms |= {number for form in forms if (number := other_number(form))}
            variants += [(form, payload) for form in sorted(forms - {phrase})]
        elif english and (number := other_number(phrase)) and number != phrase:  # most names: one variant
            variants.append((number, payload))
    return [*phrases, *variants]


_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")


def other_number(phrase: str) -> str | None:
    """The phrase with its last word in the other grammatical number (regular English forms only), or
    None when the last word is short, not alphabetic, or looks Latin ("-us", "-is", "-ss")."""
    head, _, last = phrase.rpartition(" ")
    if len(last) < 4 or not last.isalpha() or last.isupper():
        return None
    lower = last.lower()
    if lower.endswith(("ss", "us", "is")):
        return None
    if lower.endswith("ies"):
        word = last[:-3] + "y"
    elif lower.endswith("es") and _plural_adds_es(lower):
        word = last[:-2]
    elif lower.endswith("s"):
        word = last[:-1]
    elif lower.endswith("y") and lower[-2] not in "aeiou":
        word = last[:-1] + "ies"
    elif lower.endswith(_SIBILANT_ENDINGS):
        word = last + "es"
    else:
        word = last + "s"
    return f"{head} {word}" if head else word


def _plural_adds_es(plural: str) -> bool:
    """Was "-es" added to make this plural ("abscesses", "viruses", "boxes", "approaches"), rather than
    "-s" to a word ending in e ("diseases", "doses", "headaches")?"""
    if plural.endswith(("sses", "xes", "zzes", "shes", "iruses", "inuses", "tuses")):
        return True
    return plural.endswith("ches") and (not plural.endswith("aches") or plural.endswith("oaches"))


# Words ending in -s that are singular (diseases, fields of study); -ics words (genetics) are too.
_SINGULAR_WITH_S = frozenset(
    {
        "diabetes",
        "herpes",
        "rabies",
        "measles",
        "mumps",
        "scabies",
        "rickets",
        "species",
        "series",
        "lens",
        "news",
        "mellitus",
        "syphilis",
        "ascites",
        "caries",
        "feces",
        "facies",
        "pubes",
        "tabes",
        "mores",
        "psoriasis",
    }
)


def is_plural(phrase: str) -> bool:
    """Is the phrase's last word a regular English plural ("endoscopes", "antibodies"; not "diabetes",
    "genetics", "analysis")?"""
    last = phrase.rpartition(" ")[2].lower()
    if last in _SINGULAR_WITH_S or last.endswith("ics") or not last.endswith("s"):
        return False
    singular = other_number(last)
    return singular is not None and not singular.endswith("s")


def agree_number(replaced: str, replacement: str) -> str:
    """`replacement` in the grammatical number of the text it replaces, where English makes that regular:
    MeSH names many concepts in the plural ("Endoscopes", "Breast Neoplasms"), so "Is anorectal
    endosonography valuable?" becomes "Is anorectal endoscope valuable?", not "endoscopes". Only plurals
    are made singular: a singular replacement for a plural ("androgens" -> "insulin") is usually a mass
    noun, which has no plural."""
    if is_plural(replacement) and not is_plural(replaced):
        return other_number(replacement) or replacement
    return replacement


def _boundary(text: str, index: int) -> bool:
    return index < 0 or index >= len(text) or not text[index].isalnum() or is_cjk_char(text[index])


def _edge(text: str, inside: int, outside: int) -> bool:
    """May a match whose edge character is text[inside] end there, next to text[outside]?"""
    return is_cjk_char(text[inside]) or _boundary(text, outside)


# entity types that have aspects; `method` (algorithms, assays, tools, scores) is a kind of subject refkit noise
# tells by its name (refkit.noise.subjects), not a lexicon type
ASPECT_TYPES = ("drug", "disease", "gene", "organism", "procedure", "method", "anatomy", "process")


@dataclass(frozen=True)
class Aspect:
    type: str  # one of ASPECT_TYPES
    name: str
    synonyms: tuple[str, ...]
    qualifiers: tuple[str, ...]
    question: str = ""  # the question asking it of a subject, "{X}" standing for the subject; "": never written
    asked_by: re.Pattern | None = None  # what in a question says it asks this aspect where no synonym is written
    cues: tuple[str, ...] = ()  # words a text uses when it says something of this aspect without naming it
    close: tuple[str, ...] = ()  # aspects of the same type whose texts answer a question about this one
    situated: str = ""  # the question in a situation, "{S}" standing for the disease the subject is given for

    @property
    def phrases(self) -> tuple[str, ...]:
        """Every phrase that tells a text speaks of this aspect: its synonyms, then its cues."""
        return tuple(dict.fromkeys((*self.synonyms, *self.cues)))


ASPECT_LANGUAGES = ("en", "fr", "de", "zh")  # the aspect tables refkit ships


def aspects_table(language: str) -> str:
    return "aspects.tsv" if language == "en" else f"aspects-{language}.tsv"


def read_aspects(path: Path | None = None, language: str = "en") -> list[Aspect]:
    """The aspect lexicon (refkit/aspects.tsv for English, aspects-<language>.tsv for French, German and
    Chinese, unless a path is given): type, aspect, synonyms, qualifiers."""
    if path is None:
        if language not in ASPECT_LANGUAGES:
            raise ValueError(
                f"refkit has aspect tables for {', '.join(ASPECT_LANGUAGES)}, not {language!r}: "
                "give your own with --aspects"
            )
        name = aspects_table(language)
        text = resources.files("refkit").joinpath(name).read_text(encoding="utf-8")
        where = f"refkit/{name}"
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    aspects = []
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    for number, row in ((n, next(csv.reader([line], delimiter="\t"))) for n, line in lines[1:]):
        if len(row) not in (4, 8, 9) or row[0] not in ASPECT_TYPES or not row[1].strip():
            raise ValueError(
                f"{where}:{number}: expected '{'|'.join(ASPECT_TYPES)}<TAB>aspect<TAB>synonyms<TAB>qualifiers', then "
                "optionally <TAB>question<TAB>asked by<TAB>cues<TAB>close[<TAB>in a situation]"
            )
        synonyms = tuple(s.strip() for s in row[2].split("|") if s.strip())
        qualifiers = tuple(q.strip().casefold() for q in row[3].split("|") if q.strip())
        question, asked_by, cues, close, situated = (row + ["", "", "", "", ""])[4:9]
        if question.strip() and "{X}" not in question:
            raise ValueError(f"{where}:{number}: column 'question' must hold {{X}} where the subject goes")
        if situated.strip() and not ("{X}" in situated and "{S}" in situated):
            raise ValueError(
                f"{where}:{number}: column 'in a situation' must hold {{X}} (the subject) and {{S}} (the situation)"
            )
        try:
            pattern = re.compile(asked_by.strip(), re.IGNORECASE) if asked_by.strip() else None
        except re.error as error:
            raise ValueError(f"{where}:{number}: column 'asked by' is not a regular expression ({error})") from None
        aspects.append(
            Aspect(
                row[0],
                row[1].strip(),
                synonyms or (row[1].strip(),),
                qualifiers,
                question.strip(),
                pattern,
                tuple(c.strip() for c in cues.split("|") if c.strip()),
                tuple(c.strip() for c in close.split("|") if c.strip()),
                situated.strip(),
            )
        )
    return aspects
