"""The one "may this text answer the original question?" decision of refkit noise.

`refkit noise` keeps a candidate as noise only if this says no; `refkit audit`, the bench's threshold
curve and the review page read what it measured and decided. A text may answer the original question
when any of these holds, tried cheapest first (`test` names which):

- `names-target`: retrieved for an entity swap, it names the entity the swap replaced (any of its names):
  it is about the original's entity, not the sibling;
- `names-aspect`: retrieved for an aspect swap, it names the entity with the original aspect (any synonym);
- `not-the-new-aspect`: retrieved for an aspect swap, it names the entity but none of the new aspect's
  synonyms: it is about the entity in general, which is what the original asks about too;
- `mesh-pair`: its MeSH headings carry the (entity, qualifier of the aspect) pair;
- `ceiling`: it reads `answer_ceiling` or more close to the original question (MiniLM cosine): answers
  do (BioASQ gold snippets score 0.61 at the median against their question, other texts the rewrites
  retrieve 0.24);
- `closer-to-original`: it reads closer to the original question than to the rewrite that retrieved it,
  by `answer_margin` or more: written about the original situation;
- `gold`: it reads `GOLD_CEILING` or more close to a reference known to answer the question (`--refs`
  lines labelled relevant);
- `judge`: the model given with `--judge` scores it at or above its threshold (refkit.judge);
- `reader`: the user's reader (`--reader`, refkit.readers), asked with the may-answer template, says yes (a
  malformed answer counts as no; in advise mode its verdict is recorded and decides nothing).

`measure_lexical` and `measure_semantic` record what a test needs in the candidate's `measured`;
`decide_lexical` and `decide_semantic` read only that record and the thresholds, so a recorded run can be
decided again at other thresholds (the bench's coverage-versus-precision curve).
"""

from __future__ import annotations

from dataclasses import dataclass

from refkit.lexicon import Entity
from refkit.matcher import Aspect, NameMatcher, PhraseMatcher
from refkit.noise.options import GOLD_CEILING
from refkit.text_similarity import TextSimilarity

RULE = "may-answer"


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
    ):
        """`reader`: a refkit.readers.Reader whose tasks include may-answer, or None."""
        self.question, self.similarity, self.language = question, similarity, language
        self.gold, self.judge = gold or [], judge
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
            self._matchers[key] = PhraseMatcher([(s, aspect) for s in aspect.synonyms])
        return self._matchers[key]

    def measure_lexical(self, text: str, meta: dict, swap: dict, measured: dict) -> None:
        """`swap`: {"replaced": the entity an entity swap replaced or None, "target", "aspect": what the
        original asks, "new_aspect": the aspect an aspect swap put in or None}."""
        if swap["replaced"] is not None:
            named = self._names(swap["replaced"]).find(text)
            measured["names_replaced"] = named[0].text if named else None
        elif swap["aspect"] is not None:
            named = self._names(swap["target"]).find(text)
            about = self._aspect(swap["aspect"]).find(text)
            new = self._aspect(swap["new_aspect"]).find(text) if swap["new_aspect"] is not None else []
            measured["names_target"] = named[0].text if named else None
            measured["names_aspect"] = about[0].text if about else None
            measured["names_new_aspect"] = new[0].text if new else None
        pair = mesh_pair(meta, swap["target"], swap["aspect"])
        if pair:
            measured["mesh_pair"] = pair

    def measure_semantic(self, text: str, rewrite: str, measured: dict) -> None:
        to_original, to_rewrite = self.similarity.cosine(text, [self.question, rewrite])
        measured.update(to_original=to_original, to_rewrite=to_rewrite)
        if self.gold:
            measured["to_gold"] = max(self.similarity.cosine(text, self.gold))
        if self.judge is not None:
            [score] = self.judge.scores(self.question, [text])
            measured["judge"] = self.judge.record(score)
        if self.reader is not None:
            measured["reader"] = self.reader.may_answer(self.question, text)


def decide_lexical(measured: dict) -> Verdict | None:
    if measured.get("names_replaced"):
        return Verdict(RULE, "names-target", f"names {measured['names_replaced']!r}, the entity the swap replaced")
    if measured.get("names_target") and measured.get("names_aspect"):
        return Verdict(
            RULE,
            "names-aspect",
            f"pairs {measured['names_target']!r} with the original aspect ({measured['names_aspect']!r})",
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
