"""Stage 4 of refkit noise: the filters a retrieved candidate passes to be kept as a noisy reference.

Each filter is a small class that decides one thing and says why (datatrove's filters are the model):
`measure` records what it needs in the candidate's `measured` dict, and `decide` reads only that record
and the thresholds, returning None to let the candidate through or a Verdict naming the rule, the test,
the value measured and the threshold. They run in `FILTERS` order, cheapest first; the first refusal is
the candidate's record, and a kept candidate records every value measured on the way. `decide` alone
replays a recorded run at other thresholds (`replay`).

| rule | protects against |
|---|---|
| `collected` | noise that is one of the question's own collected references (`--refs`) |
| `duplicate` | the same text twice: a near duplicate (MinHash) of a collected reference or of noise kept before |
| `may-answer` | noise that answers the original question (refkit.noise.answers: the one decision, its name tests first, then its similarity tests) |
| `unrelated` | easy noise: a text about something else, which teaches a benchmark nothing |
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refkit.lexicon import Entity
from refkit.matcher import NameMatcher, PhraseMatcher, with_variants
from refkit.noise.answers import AnswerTest, Verdict, decide_lexical, decide_semantic
from refkit.noise.options import NoiseOptions
from refkit.noise.writing import Rewrite


@dataclass
class Candidate:
    """A hit retrieved for one rewrite, and what the filters measured of it."""

    hit: object  # a searchd hit (id, rank, title, content)
    rewrite_number: int
    rewrite: Rewrite
    meta: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return f"{self.hit.title} {self.hit.content}".strip()


@dataclass
class QuestionFacts:
    """What the filters know of one question, per rewrite number."""

    collected_ids: set[str]
    swaps: dict[int, dict]  # refkit.noise.answers.AnswerTest.measure_lexical's `swap`
    kept_entities: dict[int, list[Entity]]  # the question's key entities the rewrite kept
    put_in: dict[int, list[Entity]]  # the entity its swap put in
    phrases: dict[int, list[str]]  # the question's own content phrases the rewrite kept (targets.question_phrases)


class CollectedReference:
    name = "collected"

    def __init__(self, facts: QuestionFacts):
        self.facts = facts

    def measure(self, candidate: Candidate) -> None:
        candidate.measured["collected"] = candidate.hit.id in self.facts.collected_ids

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        if measured.get("collected"):
            return Verdict("collected", "collected", "one of the question's collected references (--refs)")
        return None


class Duplicate:
    name = "duplicate"

    def __init__(self, deduplicator):
        self.deduplicator = deduplicator

    def measure(self, candidate: Candidate) -> None:
        found = self.deduplicator.match(candidate.hit.content)
        if found is not None:
            candidate.measured["duplicate"] = {"kind": found.kind, "jaccard": round(found.jaccard, 4), "of": found.of}

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        found = measured.get("duplicate")
        if found:
            return Verdict("duplicate", found["kind"], f"duplicate ({found['kind']}, Jaccard {found['jaccard']:.2f}) of "
                           f"{found['of']}", found["jaccard"], None)  # fmt: skip
        return None

    def keep(self, candidate: Candidate) -> None:
        self.deduplicator.add(candidate.hit.id, candidate.hit.content)


class MayAnswerByName:
    """may-answer's name tests (refkit.noise.answers)."""

    name = "may-answer"

    def __init__(self, answers: AnswerTest, facts: QuestionFacts):
        self.answers, self.facts = answers, facts

    def measure(self, candidate: Candidate) -> None:
        swap = self.facts.swaps[candidate.rewrite_number]
        self.answers.measure_lexical(candidate.text, candidate.meta, swap, candidate.measured)

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        return decide_lexical(measured)


class MayAnswerBySimilarity:
    """may-answer's similarity tests (refkit.noise.answers)."""

    name = "may-answer"

    def __init__(self, answers: AnswerTest):
        self.answers = answers

    def measure(self, candidate: Candidate) -> None:
        self.answers.measure_semantic(candidate.text, candidate.rewrite.query, candidate.measured)

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        return decide_semantic(measured, options)


class Unrelated:
    """Kept noise must be about the question's topic: it names an entity of the question that the rewrite
    kept, the one the swap put in, or writes one of the question's own content phrases the rewrite kept,
    and reads `entity_floor` close to the rewrite; or, naming none, `similarity_floor` close."""

    name = "unrelated"

    def __init__(self, facts: QuestionFacts, language: str):
        english = language == "en"

        def matcher(entities: list[Entity]) -> NameMatcher:
            return NameMatcher([(f, e) for e in entities for f in e.surface_forms(language)], english)

        self._kept = {n: matcher(e) for n, e in facts.kept_entities.items()}
        self._put_in = {n: matcher(e) for n, e in facts.put_in.items()}
        self._phrases = {n: PhraseMatcher(with_variants([(p, p) for p in phrases], english=english))
                         for n, phrases in facts.phrases.items()}  # fmt: skip

    def measure(self, candidate: Candidate) -> None:
        number = candidate.rewrite_number
        candidate.measured["names"] = {
            "kept": sorted({m.payload.name for m in self._kept[number].find(candidate.text)}),
            "put_in": sorted({m.payload.name for m in self._put_in[number].find(candidate.text)}),
            "phrases": sorted({m.payload for m in self._phrases[number].find(candidate.text)}),
        }

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        names = measured["names"]
        named = names["kept"] + names["put_in"] + names.get("phrases", [])
        score = measured["to_rewrite"]
        if named and score >= options.entity_floor:
            return None
        if score >= options.similarity_floor:
            return None
        if named:
            return Verdict("unrelated", "entity-floor", f"names {', '.join(named)} but reads only {score:.2f} close to "
                           "the rewrite", score, options.entity_floor)  # fmt: skip
        return Verdict("unrelated", "similarity-floor", "names no entity of the question or of the swap and reads only "
                       f"{score:.2f} close to the rewrite", score, options.similarity_floor)  # fmt: skip


def related_how(measured: dict, options: NoiseOptions) -> str:
    """How a kept candidate is related: by a name it shares with the question or the swap, or by similarity."""
    names = measured["names"]
    if names["kept"] or names["put_in"]:
        named = True
    elif names.get("phrases"):
        return "phrase" if measured["to_rewrite"] >= options.entity_floor else "similarity"
    else:
        named = False
    return "entity" if named and measured["to_rewrite"] >= options.entity_floor else "similarity"


FILTERS = (CollectedReference, Duplicate, MayAnswerByName, MayAnswerBySimilarity, Unrelated)  # the order they run in


def replay(measured: dict, options: NoiseOptions) -> Verdict | None:
    """The first refusal of a recorded candidate at `options`' thresholds (None: it is kept). A candidate
    whose record stops early (a test refused it at run time) is decided on what was measured."""
    for rule in FILTERS:
        try:
            verdict = rule.decide(measured, options)
        except KeyError:  # not measured at run time: an earlier filter refused it there
            return None if not measured else Verdict("unmeasured", "unmeasured", "not measured at run time")
        if verdict is not None:
            return verdict
    return None
