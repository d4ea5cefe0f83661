"""Stage 4 of refkit noise: the filters a retrieved candidate passes to be kept as a noisy reference.

Each filter is a small class that decides one thing and says why (datatrove's filters are the model):
`measure` records what it needs in the candidate's `measured` dict, and `decide` reads only that record
and the thresholds, returning None to let the candidate through or a Verdict naming the rule, the test,
the value measured and the threshold. They run in `FILTERS` order, cheapest first; the first refusal is
the candidate's record, and a kept candidate records every value measured on the way. `decide` alone
decides a recorded run again at other thresholds (`replay`, over the record of a `permissive` run).

- `collected` protects against noise that is one of the question's own collected references (`--refs`);
- `duplicate` against the same text twice: a near duplicate (MinHash) of a collected reference or of
  noise kept before;
- `off-subject` against an aspect rewrite's candidate that does not name the subject the rewrite keeps
  (what makes aspect noise hard is that it is about the same drug, gene or disease);
- `may-answer` against noise that answers the original question (refkit.noise.answers: the one
  decision, its name tests first, then its similarity tests);
- `unrelated` against easy noise: a text about something else, which teaches a benchmark nothing (it must
  name an entity of the question or the one swapped in).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refkit.noise.answers import AnswerTest, Verdict, decide_lexical, decide_semantic
from refkit.noise.options import NoiseOptions
from refkit.noise.writing import Rewrite
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import NameMatcher, PhraseMatcher, with_variants


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
    asked: dict[int, object] = field(default_factory=dict)  # an entity rewrite's: the aspect the question asks


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
            return Verdict(
                "duplicate",
                found["kind"],
                f"duplicate ({found['kind']}, Jaccard {found['jaccard']:.2f}) of {found['of']}",
                found["jaccard"],
                None,
            )
        return None

    def keep(self, candidate: Candidate) -> None:
        self.deduplicator.add(candidate.hit.id, candidate.hit.content)


class OffSubject:
    """An aspect rewrite keeps the question's subject: its candidates must name it (any of its names)."""

    name = "off-subject"

    def __init__(self, facts: QuestionFacts, language: str):
        english = language == "en"
        self._subject = {
            number: NameMatcher([(f, swap["subject"]) for f in swap["subject"].surface_forms(language)], english)
            for number, swap in facts.swaps.items()
            if swap.get("subject") is not None
        }

    def measure(self, candidate: Candidate) -> None:
        matcher = self._subject.get(candidate.rewrite_number)
        if matcher is not None:
            found = matcher.find(candidate.text)
            candidate.measured["names_subject"] = found[0].text if found else None

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        if "names_subject" in measured and not measured["names_subject"]:
            return Verdict("off-subject", "off-subject", "does not name the subject the aspect rewrite keeps")
        return None


class MayAnswerByName:
    """may-answer's name tests (refkit.noise.answers)."""

    name = "may-answer"

    def __init__(self, answers: AnswerTest, facts: QuestionFacts, original_ranks: dict[str, int] | None = None):
        """`original_ranks`: snippet id -> its rank among the original question's own hits."""
        self.answers, self.facts, self.original_ranks = answers, facts, original_ranks or {}

    def measure(self, candidate: Candidate) -> None:
        swap = self.facts.swaps[candidate.rewrite_number]
        self.answers.measure_lexical(candidate.text, candidate.meta, swap, candidate.measured)
        if swap.get("subject") is not None:
            candidate.measured["original_rank"] = self.original_ranks.get(candidate.hit.id)

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        return decide_lexical(measured, options)


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
    """Kept noise must be about the question's subject or situation: it names an entity of the question that the
    rewrite kept (an aspect rewrite's subject among them), the one the swap put in, or (for an entity swap) the
    aspect the question asks, and reads `entity_floor` close to the rewrite. A text naming none of them (related by
    a shared phrase or by similarity only) is easy noise a reviewer sets aside at once: it is kept only at
    `similarity_floor` (1.0 by default: never)."""

    name = "unrelated"

    def __init__(self, facts: QuestionFacts, language: str):
        english = language == "en"

        def matcher(entities: list[Entity]) -> NameMatcher:
            return NameMatcher([(f, e) for e in entities for f in e.surface_forms(language)], english)

        self._kept = {n: matcher(e) for n, e in facts.kept_entities.items()}
        self._put_in = {n: matcher(e) for n, e in facts.put_in.items()}
        self._phrases = {
            n: PhraseMatcher(with_variants([(p, p) for p in phrases], english=english))
            for n, phrases in facts.phrases.items()
        }
        self._asked = {n: PhraseMatcher([(p, p) for p in a.phrases]) for n, a in facts.asked.items() if a is not None}

    def measure(self, candidate: Candidate) -> None:
        number = candidate.rewrite_number
        candidate.measured["names"] = {
            "kept": sorted({m.payload.name for m in self._kept[number].find(candidate.text)}),
            "put_in": sorted({m.payload.name for m in self._put_in[number].find(candidate.text)}),
            "phrases": sorted({m.payload for m in self._phrases[number].find(candidate.text)}),
        }
        if number in self._asked:  # the swapped-in entity in the question's own aspect: "nivolumab targets PD-1"
            candidate.measured["names"]["aspect"] = sorted(
                {m.payload for m in self._asked[number].find(candidate.text)}
            )

    @staticmethod
    def decide(measured: dict, options: NoiseOptions) -> Verdict | None:
        names = measured["names"]
        # the words of the aspect the question asks count as its situation ("the symptoms of angina": a text on
        # the symptoms of chest pain that never writes "angina pectoris" is still about the rewrite's situation)
        named = names["kept"] + names["put_in"] + names.get("aspect", [])
        score = measured["to_rewrite"]
        if named and score >= options.entity_floor:
            return None
        if score >= options.similarity_floor:
            return None
        if named:
            return Verdict(
                "unrelated",
                "entity-floor",
                f"names {', '.join(named)} but reads only {score:.2f} close to the rewrite",
                score,
                options.entity_floor,
            )
        return Verdict(
            "unrelated",
            "similarity-floor",
            "names no entity of the question or of the swap"
            + (f" (shares only {', '.join(names['phrases'])})" if names.get("phrases") else "")
            + f" and reads {score:.2f} close to the rewrite",
            score,
            options.similarity_floor,
        )


def related_how(measured: dict, options: NoiseOptions) -> str:
    """How a kept candidate is related: by a name it shares with the question or the swap, or by similarity."""
    names = measured["names"]
    if names["kept"] or names["put_in"]:
        named = True
    elif names.get("aspect"):
        return "aspect" if measured["to_rewrite"] >= options.entity_floor else "similarity"
    elif names.get("phrases"):
        return "phrase" if measured["to_rewrite"] >= options.entity_floor else "similarity"
    else:
        named = False
    return "entity" if named and measured["to_rewrite"] >= options.entity_floor else "similarity"


FILTERS = (  # the order they run in
    CollectedReference,
    Duplicate,
    OffSubject,
    MayAnswerByName,
    MayAnswerBySimilarity,
    Unrelated,
)


def first_refusal(measured: dict, options: NoiseOptions) -> Verdict | None:
    """The first filter that refuses a fully measured candidate at `options`' thresholds (None: kept)."""
    for rule in FILTERS:
        verdict = rule.decide(measured, options)
        if verdict is not None:
            return verdict
    return None


def permissive(options: NoiseOptions) -> NoiseOptions:
    """`options` with every threshold off and no cap on kept references: a run that measures every candidate
    a threshold could decide, so that `replay` can decide it again at any thresholds."""
    from dataclasses import replace

    return replace(
        options,
        per_query=1_000_000,
        fill_to=1_000_000,
        weak_floor=-1.0,
        answer_margin=1.0,
        answer_ceiling=1.0,
        entity_floor=-1.0,
        similarity_floor=-1.0,
        original_rank=0,
        reference_ceiling=2.0,
        related=True,
    )


def replay(record: dict, options: NoiseOptions) -> list[dict]:
    """The candidates a question keeps at `options`' thresholds, ranked as a run ranks them
    (refkit.noise.ranking), from the record of a `permissive` run (what it rejected, a rule no threshold
    changes rejected: collected, duplicate of a collected reference, named the replaced entity). Duplicates
    among the kept are judged as the permissive run met them."""
    from refkit.noise.ranking import choose

    passed = [
        {**c, "tier": c.get("tier", 2), "document": c.get("document", c["snippet_id"])}
        for c in record["noise"]
        if first_refusal(c["measured"], options) is None
    ]
    return choose(passed, options.per_query, options.fill_to, options.weak_floor, options.related)[0]
