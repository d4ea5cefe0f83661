"""Stage 1 of refkit noise: the mentions of a question and the targets a swap may replace.

Mentions are found longest-first (refkit.vocabulary.matcher) over every name of every entity of a rewritten type:
MeSH names and entry terms, supplementary concepts, and the names the served records give
(refkit.vocabulary.corpus_names: abbreviations, drug names by INN stem, gene symbols, keywords). Aspects ("mechanism
of action", "treatment") are found with the aspect table. A mention becomes a *target* unless one of the
target rules below refuses it; each refusal is recorded with the rule's name, so a question with no target
says truthfully why.

Targets are ranked: first the entity an aspect is asked of (aspects tried from the last back, each with
the nearest mention of its type: questions end with what they ask), then the others by type
(`TARGET_PRIORITY`) and from the end of the question back. Up to `MAX_TARGETS` are kept: when the first
has no swap the corpus supports, the next one is tried.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from refkit.noise.sense import (
    FUNCTION_WORDS,
    aspect_position_problem,
    everyday_word,
    inside_a_name,
    modifier_problem,
    next_to_generic,
    possessive_before,
    question_part,
)
from refkit.vocabulary.abbreviations import definitions
from refkit.vocabulary.gene_symbols import is_symbol
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import Match
from refkit.vocabulary.word_frequency import english_zipf

MAX_TARGETS = 3
TARGET_PRIORITY = ("drug", "disease", "gene", "organism", "procedure", "anatomy", "process")
# In a case vignette the tests, organs, signs and the patient's pathogens are the case's findings ("a
# blood culture", "the anterior chamber", "HIV"): only its drugs, diseases and genes are what it asks about.
VIGNETTE_TARGET_TYPES = ("drug", "disease", "gene")
SIGNS_AND_SYMPTOMS_TREE = "C23.888"  # "Signs and Symptoms": findings, never a vignette's target
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Target:
    mention: Match  # of an Entity
    aspect: Match | None = None  # of an Aspect asked of it

    @property
    def entity(self) -> Entity:
        return self.mention.payload


@dataclass
class Analysis:
    entities: list[Match]
    aspects: list[Match]
    targets: list[Target] = field(default_factory=list)
    generic: frozenset[str] = frozenset()  # keys of the generic entities found (never targets)
    refused_targets: list[dict] = field(default_factory=list)  # mentions a target rule refused, and why
    out_of_position: list[dict] = field(default_factory=list)  # aspect words that are not what is asked
    refused_swaps: list[dict] = field(default_factory=list)  # swap candidates a rule refused
    subjects: list = field(default_factory=list)  # refkit.noise.subjects.Subject: what aspect rewrites keep

    @property
    def entity(self) -> Match | None:
        """The first target's mention."""
        return self.targets[0].mention if self.targets else None

    @property
    def aspect(self) -> Match | None:
        return self.targets[0].aspect if self.targets else None

    def as_dict(self) -> dict:
        return {
            "entities": [
                {
                    "name": m.payload.name,
                    "ui": m.payload.ui,
                    "type": m.payload.type,
                    "text": m.text,
                    "span": [m.start, m.end],
                    "origin": m.payload.origin,
                    **({"generic": True} if m.payload.key in self.generic else {}),
                }
                for m in self.entities
            ],
            "aspects": [
                {"aspect": m.payload.name, "type": m.payload.type, "text": m.text, "span": [m.start, m.end]}
                for m in self.aspects
            ],
            "target": None
            if not self.targets
            else {
                "entity": self.targets[0].entity.name,
                "aspect": None if self.targets[0].aspect is None else self.targets[0].aspect.payload.name,
            },
            "targets": [
                {
                    "entity": t.entity.name,
                    "type": t.entity.type,
                    "text": t.mention.text,
                    "span": [t.mention.start, t.mention.end],
                    "aspect": None if t.aspect is None else t.aspect.payload.name,
                }
                for t in self.targets
            ],
            "refused_targets": self.refused_targets,
            "aspects_out_of_position": self.out_of_position,
            "refused_swaps": self.refused_swaps,
        }


@dataclass
class TargetContext:
    """What the target rules read besides the mention: the question and its other mentions."""

    query: str
    entities: list[Match]
    generic: frozenset[str]
    asked_from: int  # where the part of the question that asks begins (refkit.noise.sense.question_part)
    english: bool
    counted: bool  # the lexicon counted its entities in the served corpus
    phrase_cut: Callable[[str, Match], bool]


def _type(mention: Match, context: TargetContext) -> str | None:
    """A case vignette asks about its drugs, diseases and genes, not its findings (tests, organs, signs)."""
    entity: Entity = mention.payload
    if context.asked_from > 0:
        signs = any(t.startswith(SIGNS_AND_SYMPTOMS_TREE) for t in entity.trees)
        if entity.type not in VIGNETTE_TARGET_TYPES or signs:
            return f"type: {entity.name} is a {entity.type} of the case's findings, not what a vignette asks about"
    return None


# A question's answer type: "Which gene ...", "What animal ...", "Which two drugs ...": the word right after the
# question word, up to two words later, that says what kind of thing answers it.
ANSWER_TYPE = re.compile(
    r"\b(which|what)\s+(?:(?!(?:is|are|was|were|does|do|did|has|have|had|can|could|will|would|should)\b)"
    r"(?![a-z]+ed\b)\w+\s+){0,2}$",
    re.IGNORECASE,
)


def _answer_type(mention: Match, context: TargetContext) -> str | None:
    """The kind of thing a question asks for ("Which *gene* is mutated in cystic fibrosis?") is what its answer
    is, not what it is about: swapping it asks for another kind of answer about nothing the question names."""
    if context.english and ANSWER_TYPE.search(context.query[context.asked_from : mention.start]):
        return f"answer-type: the question asks for a {mention.text!r}; what it asks for is not what it is about"
    return None


def _generic(mention: Match, context: TargetContext) -> str | None:
    if mention.payload.key in context.generic:
        return f"generic: {mention.payload.name} names a category, not a concept"
    return None


def _not_in_corpus(mention: Match, context: TargetContext) -> str | None:
    if context.counted and not mention.payload.corpus_frequency:
        return f"not-in-corpus: no served record names {mention.payload.name}"
    return None


def _finding(mention: Match, context: TargetContext) -> str | None:
    if mention.start < context.asked_from:
        return f"finding: {mention.text!r} is said in the case before the sentence that asks"
    return None


def _possessive(mention: Match, context: TargetContext) -> str | None:
    if possessive_before(context.query, mention.start):
        return f"possessive: {mention.text!r} follows a possessive, inside a longer concept"
    return None


def _compound(mention: Match, context: TargetContext) -> str | None:
    span = (mention.start, mention.end)
    generic_spans = [(m.start, m.end) for m in context.entities if m.payload.key in context.generic]
    if next_to_generic(span, generic_spans, context.query):
        return f"compound: {mention.text!r} stands next to a generic word, inside a longer concept"
    if inside_a_name(context.query, span):
        return f"compound: {mention.text!r} is part of a longer name"
    if context.english and not is_symbol(mention.text):  # "BCL11B haploinsufficiency": a symbol is a name itself
        problem = modifier_problem(context.query, span, [(m.start, m.end) for m in context.entities])
        if problem:
            return problem
        if context.phrase_cut(context.query, mention):
            return f"compound: {mention.text!r} stops inside a longer name the vocabulary knows"
    return None


def _written_twice(mention: Match, context: TargetContext) -> str | None:
    """Replacing one of two mentions would make the question compare the concept with another."""
    pattern = re.compile(rf"(?<!\w){re.escape(mention.text)}(?!\w)", re.I)
    if any(found.start() != mention.start for found in pattern.finditer(context.query)):
        return f"written-twice: {mention.text!r} is written twice in the question"
    return None


def _everyday_word(mention: Match, context: TargetContext) -> str | None:
    if context.english and " " not in mention.text and everyday_word(mention.text.lower()):
        return f"everyday-word: {mention.text!r} is an everyday word here, not a concept"
    return None


# (name, rule): each returns why the mention cannot be a target, or None. Applied in this order.
TARGET_RULES: tuple[tuple[str, Callable[[Match, TargetContext], str | None]], ...] = (
    ("type", _type),
    ("generic", _generic),
    ("answer-type", _answer_type),
    ("not-in-corpus", _not_in_corpus),
    ("finding", _finding),
    ("possessive", _possessive),
    ("compound", _compound),
    ("written-twice", _written_twice),
    ("everyday-word", _everyday_word),
)


def choose_targets(analysis: Analysis, context: TargetContext) -> None:
    """Fill `analysis.targets` (ranked) and `analysis.refused_targets`."""
    allowed = []
    for mention in analysis.entities:
        for name, rule in TARGET_RULES:
            why = rule(mention, context)
            if why is not None:
                analysis.refused_targets.append(
                    {"text": mention.text, "entity": mention.payload.name, "rule": name, "why": why}
                )
                break
        else:
            allowed.append(mention)
    ranked: list[Target] = []
    for aspect in reversed(analysis.aspects):
        compatible = [m for m in allowed if m.payload.type == aspect.payload.type]
        if compatible:
            nearest = min(compatible, key=lambda m: (_distance(m, aspect), -m.start))
            ranked.append(Target(nearest, aspect))
            break
    rest = sorted(allowed, key=lambda m: (TARGET_PRIORITY.index(m.payload.type), -m.start))
    for mention in rest:
        if all(t.entity.key != mention.payload.key for t in ranked):
            ranked.append(Target(mention))
    analysis.targets = ranked[:MAX_TARGETS]


def place_aspects(analysis: Analysis, found: list[Match], context: TargetContext, english: bool) -> None:
    """The aspect mentions that are what the question asks of an entity (refkit.noise.sense's aspect-position
    rule); the others are recorded as out of position."""
    entity_spans = [(m.start, m.end) for m in analysis.entities]
    for mention in found:
        if mention.start < context.asked_from or any(s < mention.end and mention.start < e for s, e in entity_spans):
            continue
        for aspect in mention.payload:
            spans = [(m.start, m.end) for m in analysis.entities if m.payload.type == aspect.type]
            problem = (
                aspect_position_problem(context.query, (mention.start, mention.end), spans)
                if spans and english
                else None
            )
            if problem:
                analysis.out_of_position.append({"aspect": aspect.name, "text": mention.text, "why": problem})
            else:
                analysis.aspects.append(Match(mention.start, mention.end, mention.text, aspect))


def phrase_cut_test(name_bigrams: set[tuple[str, str]]) -> Callable[[str, Match], bool]:
    """Does a mention stop inside a longer name ("gestational diabetes" before "mellitus")? Its first or
    last word and the word right beside it are two adjacent words of one of the vocabulary's names."""

    def cut(query: str, match: Match) -> bool:
        inside = _WORDS.findall(match.text.lower())
        left = re.search(r"(\w+)[ -]$", query[: match.start])
        right = re.match(r"[ -](\w+)", query[match.end :])
        pairs = ([(left.group(1).lower(), inside[0])] if left and inside else []) + (
            [(inside[-1], right.group(1).lower())] if right and inside else []
        )
        return any(a not in FUNCTION_WORDS and b not in FUNCTION_WORDS and (a, b) in name_bigrams for a, b in pairs)

    return cut


def asked_from(query: str) -> int:
    return question_part(query)


_TOKEN = re.compile(r"[A-Za-z][\w'-]*|[^\w\s]")
RARE_WORD_ZIPF = 3.0  # a single word this rare in English says what a question is about ("sinusitis")
MIN_RARE_WORD = 5


def question_phrases(query: str, skip: list[tuple[int, int]]) -> list[str]:
    """The question's own content phrases outside `skip` (the replaced mention): runs of two or more
    words between function words and punctuation ("bladder cancer", "gut microbiome"), and single words
    rare in English ("sinusitis"). A text that writes one of them is about the question's topic even
    where the vocabulary has no name for it (MeSH's "Urinary Bladder Neoplasms" is "bladder cancer")."""
    phrases, run = [], []

    def close():
        if len(run) >= 2:
            phrases.append(" ".join(run))
        elif len(run) == 1 and len(run[0]) >= MIN_RARE_WORD and not everyday_word(run[0].lower()):
            if english_zipf(run[0].lower()) < RARE_WORD_ZIPF:
                phrases.append(run[0])
        run.clear()

    start = question_part(query)
    for token in _TOKEN.finditer(query, start):
        inside = any(s <= token.start() < e for s, e in skip)
        if inside or not token.group(0)[0].isalpha() or token.group(0).lower() in FUNCTION_WORDS:
            close()
        else:
            run.append(token.group(0))
    close()
    return list(dict.fromkeys(phrases))


_PARENTHESIS_AFTER = re.compile(r"\s*\(([^()]{1,15})\)")


def with_defined_abbreviations(query: str, mentions: list[Match]) -> list[Match]:
    """Mentions followed by their own abbreviation, "hepatocellular carcinoma (HCC)", extended over it (a
    swap replaces both, rather than leave the original's abbreviation behind), and mentions inside such
    a parenthesis dropped."""
    extended: list[Match] = []
    for mention in mentions:
        if extended and mention.start < extended[-1].end:
            continue
        after = _PARENTHESIS_AFTER.match(query, mention.end)
        if after is not None:
            inner = after.group(1).strip()
            forms = {f.casefold() for f in mention.payload.surface_forms()}
            if inner.casefold() in forms or any(s == inner for s, _ in definitions(f"{mention.text} ({inner})")):
                mention = Match(mention.start, after.end(), query[mention.start : after.end()], mention.payload)
        extended.append(mention)
    return extended


def _distance(a: Match, b: Match) -> int:
    return max(a.start - b.end, b.start - a.end, 0)
