"""What an entity swap carries over from the question about the entity it replaced, and whether the corpus
says it of the new one.

A question may state a count or a defining feature of its entity: "the triad of Kearns-Sayre syndrome", "the 4
types of holoprosencephaly", "adult diffuse glioma". An entity swap keeps those words, and the rewrite then
presumes them of the sibling, which rarely has them ("the triad of Leigh syndrome", "the 4 types of
microcephaly"): a question whose premise fails. `carried_premises` finds such words outside the replaced
mention; `premise_problem` keeps the swap only if a text retrieved for the rewrite states them of the new
entity (names it and writes the same words: the count with its noun, the feature word before its name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import NameMatcher

COUNT_WORDS = "two|three|four|five|six|seven|eight|nine|ten|twelve|\\d+"
COUNTED_NOUNS = (
    "types|forms|subtypes|stages|phases|classes|kinds|categories|criteria|features|signs|symptoms|genes|mutations|"
    "variants|components|domains|subunits|isoforms|trials|drugs|groups|patterns|grades|steps|mechanisms|pathways"
)
_COUNT = re.compile(
    rf"\b(?P<count>{COUNT_WORDS})\s+(?:(?:main|major|different|distinct|known|clinical|common|principal|phase\s+\d)\s+)?"
    rf"(?P<noun>{COUNTED_NOUNS})\b",
    re.IGNORECASE,
)
_SET_NOUN = re.compile(r"\b(?:triad|tetrad|pentad|dyad|quartet)\b", re.IGNORECASE)
# a word before a disease's name that picks out one form of it, which its sibling need not have
FEATURE_WORDS = (
    "adult|adult-onset|juvenile|infantile|childhood|neonatal|congenital|familial|hereditary|acquired|diffuse|"
    "early-onset|late-onset|sporadic|classic|classical|atypical|refractory|recurrent|metastatic|localized|"
    "advanced|relapsed"
)
_FEATURE_BEFORE = re.compile(rf"\b(?P<words>(?:(?:{FEATURE_WORDS})[\s,]+)+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Premise:
    kind: str  # "count" | "set" | "feature"
    words: str  # as the question writes them: "4 types", "triad", "adult diffuse"
    pattern: re.Pattern  # what a text must write for the premise to hold of the new entity


def carried_premises(query: str, span: tuple[int, int]) -> list[Premise]:
    """The counts, sets and feature words the question states outside the replaced mention at `span`, which an
    entity swap writes of the new entity too."""
    premises = []
    outside = query[: span[0]] + " " * (span[1] - span[0]) + query[span[1] :]
    for found in _COUNT.finditer(outside):
        count, noun = found.group("count"), found.group("noun")
        written = re.compile(rf"\b{re.escape(count)}\s+(?:\w+\s+)?{noun}\b", re.IGNORECASE)
        premises.append(Premise("count", found.group(0), written))
    for found in _SET_NOUN.finditer(outside):
        premises.append(Premise("set", found.group(0), re.compile(rf"\b{re.escape(found.group(0))}\b", re.I)))
    before = _FEATURE_BEFORE.search(query[: span[0]])
    if before is not None:
        words = " ".join(before.group("words").replace(",", " ").split())
        written = re.compile(r"\b" + r"[\s,-]+".join(map(re.escape, words.split())), re.IGNORECASE)
        premises.append(Premise("feature", words, written))
    return premises


def premise_problem(premises: list[Premise], entity: Entity, texts: list[str], english: bool = True) -> str | None:
    """Why a swap to `entity` presumes what no text retrieved for it states ("premise: ..."), or None: each
    premise must be written in a text that names the entity (a feature word right before one of its names)."""
    if not premises:
        return None
    names = NameMatcher([(form, entity) for form in entity.surface_forms()], english)
    naming = [(text, names.find(text)) for text in texts]
    naming = [(text, found) for text, found in naming if found]
    for premise in premises:
        if premise.kind == "feature":  # the feature words right before a name of the entity
            ending = re.compile(premise.pattern.pattern + r"[\s,-]*$", re.IGNORECASE)
            held = any(
                ending.search(text[max(0, match.start - 60) : match.start]) for text, found in naming for match in found
            )
        else:
            held = any(premise.pattern.search(text) for text, _ in naming)
        if not held:
            return (
                f"premise: the question states {premise.words!r} of what it asks about; no text retrieved for the "
                f"rewrite states it of {entity.name}"
            )
    return None
