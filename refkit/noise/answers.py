"""The one "may this text answer the original question?" decision of refkit noise.

`refkit noise` keeps a candidate as noise only if this says no; `refkit audit`, the bench's threshold
curve and the review page read what it measured and decided. A text may answer the original question
when any of these holds, tried cheapest first (`test` names which):

- `names-target`: retrieved for an entity swap, it names the entity the swap replaced (any of its names):
  it is about the original's entity, not the sibling;
- `names-aspect`: retrieved for an aspect swap, it names the entity with the original aspect (any synonym,
  or a cue that says something of it: "a HER2 inhibitor" states a mechanism of action);
- `retrieved-for-original`: retrieved for an aspect rewrite, the original question itself retrieves it within
  `original_rank` (a text about the same subject that the original question finds is written about the
  original situation: BioASQ's gold snippets beyond the references collected are found so);
- `names-answer-type`: retrieved for an aspect rewrite of a question that asks for a kind of thing ("Which
  disease can be treated using tezepelumab?", "What class of drugs ...", "Which enzyme metabolizes ..."), it
  names the subject and a thing of that kind the question does not name ("... tezepelumab ... severe asthma";
  "Rhabdomyolysis from the combination of a statin and gemfibrozil" for the class of drugs that causes
  rhabdomyolysis): it may be stating the answer, whatever else of the question it names;
- a text retrieved for an aspect rewrite that does not name every entity of the original question (the drug
  *and* the disease of "Is lasmiditan effective for migraine?") is about another situation: the name tests
  below do not take it for an answer (the similarity tests still may), unless the rewrite asks an aspect
  `NEAR_ASPECTS` puts beside the original's (the dose, approval or indications of a drug whose indications are
  asked), or the original asks what a text states in any situation (`ANY_SITUATION`: a drug's efficacy): a text
  that reports it answers the original wherever it is set;
- `defines-subject`: retrieved for an aspect rewrite of a question asking what its subject is ("What is
  X?"), it says what the subject is ("X is a ...", "X, a ...");
- `not-the-new-aspect`: retrieved for an aspect swap, it names the entity but none of the new aspect's
  synonyms or cues: it is about the entity in general, which is what the original asks about too;
- `mesh-pair`: its MeSH headings carry the (entity, qualifier of the aspect) pair;
- `ceiling`: it reads `answer_ceiling` or more close to the original question (MiniLM cosine): answers
  do (BioASQ gold snippets score 0.61 at the median against their question, other texts the rewrites
  retrieve 0.24);
- `closer-to-original`: it reads closer to the original question than to the rewrite that retrieved it,
  by `answer_margin` or more: written about the original situation;
- `gold`: it reads `GOLD_CEILING` or more close to a reference known to answer the question (`--refs`
  lines labelled relevant);
- `like-references`: it reads `reference_ceiling` or more close to one of the question's own references
  (those collected for it, `--refs`, or else the original question's own best hits): retrieved for the
  original question, they are about its situation, and a text like one of them is too (two BioASQ gold
  snippets of one question are this alike far more often than texts of two questions);
- `judge`: the model given with `--judge` scores it at or above its threshold (refkit.noise.judge);
- `reader`: the user's reader (`--reader`, refkit.readers), asked with the may-answer template, says yes (a
  malformed answer counts as no; in advise mode its verdict is recorded and decides nothing).

`measure_lexical` and `measure_semantic` record what a test needs in the candidate's `measured`;
`decide_lexical` and `decide_semantic` read only that record and the thresholds, so a recorded run can be
decided again at other thresholds (the bench's coverage-versus-precision curve).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from refkit.noise.options import GOLD_CEILING, ORIGINAL_RANK
from refkit.text_similarity import TextSimilarity
from refkit.vocabulary.entity_names import EntityFinder
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import Aspect, NameMatcher, PhraseMatcher

RULE = "may-answer"

# What a question asks for when it asks for a kind of thing ("which disease", "what class of drugs"): the lexicon
# type of the things that would answer it. Up to three words between the question word and the kind ("Which is
# the primary enzyme ...").
_ASKED_KIND = r"\b(?:which|what)\s+(?:[\w-]+\s+){{0,3}}?(?:{})\b"
ANSWER_TYPES = tuple(
    (kind, re.compile(_ASKED_KIND.format(words), re.IGNORECASE))
    for kind, words in (
        ("disease", r"diseases?|disorders?|conditions?|syndromes?|cancers?|tumou?rs?|infections?|illness(?:es)?"),
        (
            "drug",
            r"drugs?|medications?|medicines?|agents?|inhibitors?|antibiotics?|compounds?|therap(?:y|ies)|treatments?",
        ),
        ("gene", r"genes?|proteins?|enzymes?|receptors?|kinases?|molecules?|molecular|targets?"),
        ("organism", r"animals?|organisms?|bacteri(?:a|um)|virus(?:es)?|species|hosts?|pathogens?|vectors?"),
    )
)


# (type, asked aspect) -> aspects whose texts report the asked one on the way: a dosing or approval study of a drug
# states its efficacy, so a text an aspect rewrite to them retrieves is tested against the asked aspect by name
# even where it does not name the question's situation.
NEAR_ASPECTS = {
    ("drug", "efficacy"): frozenset({"dosage", "approval", "indications"}),
    ("drug", "indications"): frozenset({"dosage", "approval"}),
    ("procedure", "outcomes"): frozenset({"indications", "complications"}),
    ("disease", "treatment"): frozenset({"prognosis"}),
}


# (type, asked aspect) a text reports of its subject without naming the situation the question sets: "positive
# phase III data for cabozantinib as second-line therapy" answers "Is cabozantinib effective for hepatocellular
# carcinoma?" though its abstract named the cancer in another sentence.
ANY_SITUATION = frozenset({("drug", "efficacy")})


def answer_types(question: str) -> frozenset[str]:
    """The lexicon types of the things that would answer the question, when it asks for a kind of thing."""
    return frozenset(kind for kind, pattern in ANSWER_TYPES if pattern.search(question))


@dataclass(frozen=True)
class Verdict:
    """A rule's refusal: which rule (and test), why, and the value it was judged on."""

    rule: str
    test: str
    why: str
    value: float | None = None
    threshold: float | None = None

    def as_dict(self) -> dict:
        record = {"rule": self.rule, "test": self.test, "reason": self.why}
        if self.value is not None:
            record.update(value=self.value, threshold=self.threshold)
        return record


class AnswerTest:
    """One question's measurements for the may-answer decision."""

    def __init__(
        self,
        question: str,
        similarity: TextSimilarity,
        language: str = "en",
        gold: list[str] | None = None,
        judge=None,
        reader=None,
        references: list[str] | None = None,
        entities: EntityFinder | None = None,
        question_keys: frozenset[str] = frozenset(),
    ):
        """`reader`: a refkit.readers.Reader whose tasks include may-answer, or None; `references`: the texts of
        the question's own references (collected, or its best hits); `entities`: the lexicon's names
        (refkit.vocabulary.entity_names; any matcher whose payloads are entities), which the `names-answer-type`
        test reads texts with, and `question_keys` the keys of the entities the question names (None `entities`: no such
        test)."""
        self.question, self.similarity, self.language = question, similarity, language
        self.entities, self.question_keys = entities, question_keys
        self.asked_types = answer_types(question) if entities is not None and language == "en" else frozenset()
        self.gold, self.judge, self.references = gold or [], judge, references or []
        self.reader = reader if reader is not None and "may-answer" in reader.tasks else None
        self._matchers: dict[tuple, NameMatcher | PhraseMatcher] = {}

    def _names(self, entity: Entity) -> NameMatcher:
        key = ("entity", entity.key)
        if key not in self._matchers:
            forms = [(form, entity) for form in entity.surface_forms(self.language)]
            self._matchers[key] = NameMatcher(forms, english=self.language == "en")
        return self._matchers[key]

    def _aspect(self, aspect: Aspect) -> PhraseMatcher:
        key = ("aspect", aspect.type, aspect.name)
        if key not in self._matchers:
            self._matchers[key] = PhraseMatcher([(s, aspect) for s in aspect.phrases])
        return self._matchers[key]

    def measure_lexical(self, text: str, meta: dict, swap: dict, measured: dict) -> None:
        """`swap`: {"replaced": the entity an entity swap replaced or None, "target", "aspect": what the
        original asks, "new_aspect": the aspect an aspect swap put in or None}."""
        if swap["replaced"] is not None:
            named = self._names(swap["replaced"]).find(text)
            measured["names_replaced"] = named[0].text if named else None
        elif swap["aspect"] is not None or swap.get("definitional") or swap.get("subject") is not None:
            named = self._names(swap["target"]).find(text)
            about = self._aspect(swap["aspect"]).find(text) if swap["aspect"] is not None else []
            new = self._aspect(swap["new_aspect"]).find(text) if swap["new_aspect"] is not None else []
            measured["names_target"] = named[0].text if named else None
            measured["names_aspect"] = about[0].text if about else None
            measured["names_new_aspect"] = new[0].text if new else None
            if swap.get("definitional") and named:
                measured["defines_subject"] = defines(text, named[0])
            if self.asked_types and named:
                measured["names_answer_type"] = self._answer_kind_named(text, swap["target"])
            if swap.get("situation"):  # the question's other entities: a text without one is about another situation
                measured["situation_missing"] = [e.name for e in swap["situation"] if not self._names(e).find(text)]
            if near_aspect(swap["aspect"], swap["new_aspect"]):
                measured["near_aspect"] = swap["new_aspect"].name
        pair = mesh_pair(meta, swap["target"], swap["aspect"])
        if pair:
            measured["mesh_pair"] = pair

    def _answer_kind_named(self, text: str, subject: Entity) -> str | None:
        """The first thing of a kind the question asks for that the text names and the question does not."""
        for match in self.entities.find(text):
            entity = match.payload
            if entity.type in self.asked_types and entity.key not in self.question_keys and entity.key != subject.key:
                return match.text
        return None

    def measure_semantic(self, text: str, rewrite: str, measured: dict) -> None:
        to_original, to_rewrite = self.similarity.cosine(text, [self.question, rewrite])
        measured.update(to_original=to_original, to_rewrite=to_rewrite)
        if self.gold:
            measured["to_gold"] = max(self.similarity.cosine(text, self.gold))
        if self.references:
            measured["to_references"] = max(self.similarity.cosine(text, self.references))
        if self.judge is not None:
            [score] = self.judge.scores(self.question, [text])
            measured["judge"] = self.judge.record(score)
        if self.reader is not None:
            measured["reader"] = self.reader.may_answer(self.question, text)


def near_aspect(asked: Aspect | None, new: Aspect | None) -> bool:
    """Does a rewrite to `new` ask what a text answering `asked` reports on the way (`NEAR_ASPECTS`), or does the
    question ask an aspect a text states of its subject in any situation (`ANY_SITUATION`)?"""
    if asked is None or new is None:
        return False
    return (asked.type, asked.name) in ANY_SITUATION or new.name in NEAR_ASPECTS.get((asked.type, asked.name), ())


def decide_lexical(measured: dict, options=None) -> Verdict | None:
    """`options` (refkit.noise.options.NoiseOptions): the `original_rank` threshold; None: the default's."""
    if measured.get("names_replaced"):
        return Verdict(RULE, "names-target", f"names {measured['names_replaced']!r}, the entity the swap replaced")
    limit = options.original_rank if options is not None else ORIGINAL_RANK
    if measured.get("original_rank") is not None and measured["original_rank"] <= limit:
        return Verdict(
            RULE,
            "retrieved-for-original",
            f"the original question retrieves it at rank {measured['original_rank']}: written about its situation",
            measured["original_rank"],
            limit,
        )
    # what the question asks for, named beside its subject, may be the answer in any situation
    if measured.get("names_target") and measured.get("names_answer_type"):
        return Verdict(
            RULE,
            "names-answer-type",
            f"names {measured['names_target']!r} and {measured['names_answer_type']!r}, a thing of the kind the "
            "question asks for",
        )
    if measured.get("situation_missing") and not measured.get("near_aspect"):
        return None  # another situation than the question's: it cannot answer it by name
    if measured.get("names_target") and measured.get("names_aspect"):
        return Verdict(
            RULE,
            "names-aspect",
            f"pairs {measured['names_target']!r} with the original aspect ({measured['names_aspect']!r})",
        )
    if measured.get("defines_subject"):
        return Verdict(
            RULE, "defines-subject", f"says what {measured['names_target']!r} is: {measured['defines_subject']!r}"
        )
    if measured.get("names_target") and "names_new_aspect" in measured and not measured["names_new_aspect"]:
        return Verdict(
            RULE, "not-the-new-aspect", f"names {measured['names_target']!r} but not the aspect the rewrite asks about"
        )
    if measured.get("mesh_pair"):
        return Verdict(RULE, "mesh-pair", measured["mesh_pair"])
    return None


def decide_semantic(measured: dict, options) -> Verdict | None:
    """`options`: refkit.noise.options.NoiseOptions (the thresholds)."""
    to_original, to_rewrite = measured["to_original"], measured["to_rewrite"]
    if to_original >= options.answer_ceiling:
        return Verdict(
            RULE,
            "ceiling",
            f"reads {to_original:.2f} close to the original question",
            to_original,
            options.answer_ceiling,
        )
    closer = round(to_original - to_rewrite, 4)
    if closer >= options.answer_margin:
        return Verdict(
            RULE,
            "closer-to-original",
            f"reads closer to the original question ({to_original:.2f}) than to the rewrite ({to_rewrite:.2f})",
            closer,
            options.answer_margin,
        )
    if measured.get("to_gold") is not None and measured["to_gold"] >= GOLD_CEILING:
        return Verdict(
            RULE,
            "gold",
            f"reads {measured['to_gold']:.2f} close to a relevant reference of the question",
            measured["to_gold"],
            GOLD_CEILING,
        )
    if measured.get("to_references") is not None and measured["to_references"] >= options.reference_ceiling:
        return Verdict(
            RULE,
            "like-references",
            f"reads {measured['to_references']:.2f} close to one of the question's own references",
            measured["to_references"],
            options.reference_ceiling,
        )
    judged = measured.get("judge")
    if judged is not None and judged["score"] >= judged["threshold"]:
        return Verdict(
            RULE,
            "judge",
            f"the judge ({judged['model']}) scores it {judged['score']:.4f}",
            judged["score"],
            judged["threshold"],
        )
    read = measured.get("reader")
    if read is not None and read["decides"] and read["answer"] == "yes":
        return Verdict(RULE, "reader", f"the reader ({read['reader']}) says it answers the original question")
    return None


_DEFINED_AS = re.compile(
    r"^\s*(?:\([^()]{1,30}\)\s*)?(?:,\s*(?:a|an|the)\b|(?:is|are|was|were)\s+(?:a|an|the|one\s+of)\b|"
    r"(?:refers?|referring)\s+to\b|(?:is|are)\s+(?:defined|known|described)\s+as\b)",
    re.IGNORECASE,
)


def defines(text: str, mention) -> str | None:
    """The words after a mention of the subject that say what it is ("X is a ...", "X, a ...", "X (Y) is an ..."),
    or None."""
    found = _DEFINED_AS.match(text, mention.end)
    return text[mention.start : found.end()].strip() if found else None


def mesh_pair(meta: dict, entity: Entity, aspect: Aspect | None) -> str | None:
    """A reason if the record's MeSH carries (entity, a qualifier of the aspect)."""
    if aspect is None or not aspect.qualifiers:
        return None
    for heading in meta.get("mesh") or []:
        if (heading.get("name") or "").casefold() != entity.key:
            continue
        for qualifier in heading.get("qualifiers") or []:
            if (qualifier.get("name") or "").casefold() in aspect.qualifiers:
                return f"MeSH carries {heading['name']}/{qualifier['name']}"
    return None
