"""INN/USAN drug stems: an unknown drug name is still a drug of a class ("tucatinib": a tyrosine kinase
inhibitor, "-tinib"), and drugs of one stem are siblings a clinician would swap.

The table is WHO's stem list as collected by edridgedsouza/drug-etymology (`inn_stems.tsv`, and the
monoclonal antibodies' source and target syllables in `inn_mab_stems.tsv`; provenance in
samples/SOURCES.md). Only suffix stems are used ("-sartan", not "cef-" or "-vin-"), and only those that
name a class: a stem must have at least `MIN_STEM_LETTERS` letters (or be "-mab", which only antibody
INNs end with), and at most `MAX_ENGLISH_WORDS` common English words (Zipf frequency 3 or more in the
`wordfreq` data) may end with it, so "-ine", "-one", "-ol" or "-ast" (alkaloids, ketones, alcohols:
chemistry, not pharmacology) never make "medicine" or "fast" a drug.

A word of a served text is taken for a new drug name (one the vocabulary lacks, approved after its
snapshot) when it ends with such a stem, is at least `MIN_DRUG_LETTERS` long, and is itself rare in
general English (Zipf below `DRUG_WORD_ZIPF`: "cholesterol", "dopamine" and "penicillin" are words,
"lenvatinib" is not).
"""

from __future__ import annotations

import collections
import functools
import re
from dataclasses import dataclass
from importlib import resources

from refkit.word_frequency import english_words, english_zipf

MIN_STEM_LETTERS = 4
MAX_ENGLISH_WORDS = 1
ENGLISH_ZIPF = 3.0
MIN_DRUG_LETTERS = 7
DRUG_WORD_ZIPF = 2.5
SHORT_STEMS = frozenset({"mab"})  # three letters, yet no English word ends with it: every -mab is an antibody
# The English words ending in "-rsen" are surnames (Andersen, Larsen, Petersen) and "worsen": the stem of
# the antisense oligonucleotides (eteplirsen, nusinersen) is specific all the same.
SPECIFIC_DESPITE_ENGLISH = frozenset({"rsen"})
_WORD = re.compile(r"[A-Za-z][a-z]+")


@dataclass(frozen=True)
class Stem:
    stem: str  # without dashes: "sartan"
    meaning: str  # the class it names: "angiotensin II receptor antagonists, antihypertensive (non-peptidic)"


def _rows(name: str) -> list[tuple[str, str]]:
    rows = []
    for line in resources.files("refkit").joinpath(name).read_text(encoding="utf-8").splitlines():
        stem, _, meaning = line.partition("\t")
        if stem.strip():
            rows.append((stem.strip(), meaning.strip().strip('"')))
    return rows


@functools.cache
def stems() -> tuple[Stem, ...]:
    """The suffix stems that name a class, longest first (the most specific one wins)."""
    english = english_words(ENGLISH_ZIPF)
    ending: collections.Counter[str] = collections.Counter()  # English words ending with each proper suffix
    for word in english:
        ending.update(word[-length:] for length in range(1, len(word)))
    found: dict[str, str] = {}
    for stem, meaning in _rows("inn_stems.tsv"):
        if not stem.startswith("-") or stem.endswith("-") or "deleted" in meaning:
            continue
        letters = stem.strip("-").lower()
        if not letters.isalpha() or (len(letters) < MIN_STEM_LETTERS and letters not in SHORT_STEMS):
            continue
        if ending[letters] > MAX_ENGLISH_WORDS and letters not in SPECIFIC_DESPITE_ENGLISH:
            continue
        found.setdefault(letters, meaning)
    return tuple(sorted((Stem(s, m) for s, m in found.items()), key=lambda s: (-len(s.stem), s.stem)))


@functools.cache
def _stems_by_ending() -> tuple[dict[str, Stem], list[int]]:
    """The stems by their letters, and their lengths longest first: a word's endings are looked up, not
    every stem tried against it."""
    table = {stem.stem: stem for stem in stems()}
    return table, sorted({len(letters) for letters in table}, reverse=True)


def stem_of(name: str) -> Stem | None:
    """The longest class stem a word of the name ends with, the last word first ("Losartan Potassium"
    -> -sartan; "lenvatinib" -> -tinib)."""
    for word in reversed(_WORD.findall(name)):
        stem = _stem_of_word(word.lower())
        if stem is not None:
            return stem
    return None


@functools.lru_cache(maxsize=1 << 16)
def _stem_of_word(word: str) -> Stem | None:
    """The longest class stem one lower-case word ends with (a lexicon build asks about the same words of
    the served texts many times)."""
    table, lengths = _stems_by_ending()
    for length in lengths:  # longest first; a stem needs two more letters before it
        if length < len(word) - 1 and word[-length:] in table:
            return table[word[-length:]]
    return None


def drug_words(text: str) -> list[str]:
    """Words of a text that read as drug names by their stem (module docstring), as written."""
    return [
        word
        for word in _WORD.findall(text)
        if len(word) >= MIN_DRUG_LETTERS and stem_of(word) is not None and english_zipf(word.lower()) < DRUG_WORD_ZIPF
    ]
