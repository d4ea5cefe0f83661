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

A stem is a class only where it says what a drug acts on: "-mab" (and "-nib") says only "an antibody" ("a kinase
inhibitor"), so an anti-IL-6 antibody and a PD-1 antibody share it and nothing else. An antibody's class is its
target syllable (`antibody_class`: toci-*li*-zumab, immunomodulating; ri-*tu*-ximab, tumour), read from
`inn_mab_stems.tsv`, also for the 2021+ suffixes that replace "-mab" (-tug, -bart, -mig, -ment).
"""

from __future__ import annotations

import collections
import functools
import re
from dataclasses import dataclass
from importlib import resources

from refkit.vocabulary.word_frequency import english_words, english_zipf

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


# stems that name a kind of molecule, not a class of drugs: never a reason to swap one drug for another
KIND_ONLY_STEMS = frozenset({"mab", "nib", "vetmab"})
# the suffixes that end an antibody's name: "-mab" until 2021, then by format (unmodified immunoglobulin,
# artificial, multi-specific, fragment)
ANTIBODY_SUFFIXES = ("mab", "tug", "bart", "mig", "ment")


@functools.cache
def _antibody_syllables() -> tuple[dict[str, str], tuple[str, ...]]:
    """(target syllable -> the class it names, source syllables longest first) from inn_mab_stems.tsv: a row
    whose stem ends in "mab" names a source ("-zumab": humanized), any other a target ("-li-": immunomodulating).
    A target's dates and "misc." are dropped, so that "-tu-" (to 2009), "-t-" (2009-2017) and "-ta-" (since
    2017) are one class, tumour."""
    targets: dict[str, str] = {}
    sources = set()
    for stem, meaning in _rows("inn_mab_stems.tsv"):
        letters = stem.strip("-").lower()
        if stem.endswith("mab"):
            if letters != "vimab":  # "-vimab" is antiviral: a target written as a source
                sources.add(letters[: -len("mab")])
            else:
                targets["vi"] = "viral"
            continue
        label = re.sub(r"\s*\([^)]*\)", "", meaning).replace("misc.", "").replace("misc ", "").strip()
        label = {"tumor": "tumour"}.get(label, label)
        targets.setdefault(letters, label)
    return targets, tuple(sorted(sources, key=len, reverse=True))


def antibody_class(name: str) -> str | None:
    """The class an antibody's INN names by its target syllable ("tocilizumab" -> "immunomodulating",
    "rituximab" and "glofitamab" -> "tumour", "erenumab" -> "neural"), or None for a name that is no antibody
    INN or whose target syllable is not in the table."""
    words = _WORD.findall(name)
    if not words:
        return None
    word = words[-1].lower()
    suffix = next((s for s in ANTIBODY_SUFFIXES if word.endswith(s) and len(word) > len(s) + 3), None)
    if suffix is None or english_zipf(word) >= DRUG_WORD_ZIPF:
        return None
    rest = word[: -len(suffix)]
    targets, sources = _antibody_syllables()
    if suffix == "mab":  # before 2022 a source syllable came between target and suffix; since then none
        with_source = [rest[: -len(s)] for s in sources if s and rest.endswith(s) and len(rest) > len(s) + 1]
        candidates = [*with_source, rest]
    else:
        candidates = [rest]
    for stemless in candidates:
        for length in range(min(4, len(stemless) - 1), 0, -1):
            label = targets.get(stemless[-length:])
            if label is not None:
                return label
    return None


def drug_class(name: str) -> str | None:
    """The class a drug's INN names, or None: an antibody's target class ("antibody target: immunomodulating"), or
    the longest class stem ("INN stem -sartan: angiotensin II receptor antagonists ..."); a stem that only
    names a kind of molecule (`KIND_ONLY_STEMS`) is no class."""
    target = antibody_class(name)
    if target is not None:
        return f"antibody target: {target}"
    stem = stem_of(name)
    if stem is None or stem.stem in KIND_ONLY_STEMS:
        return None
    return f"INN stem -{stem.stem}: {stem.meaning}"


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
