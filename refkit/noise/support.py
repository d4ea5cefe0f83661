"""Does the corpus speak of a rewrite's situation? A rule of `refkit noise` that needs the served corpus.

A swap puts in a sibling concept (MeSH says it is distinct and of the same kind), but names and trees
cannot say whether the rest of the question still fits it: "Are BTK inhibitors effective for tumor lysis
syndrome?", "KCNT2 mutations in encephalitis", "neutralizing antibodies for myeloma". A reader would ask
whether anyone writes about that; the served corpus can answer. A rewrite is *supported* when one of the
texts retrieved for it (any rank, within the candidates searched):

- names what the swap put in (the sibling entity, any of its names; for an aspect swap, the new aspect,
  any of its synonyms) and
- names what the question keeps: one of its context entities (its key entities of the types a question
  is about, `CONTEXT_TYPES`, other than the one replaced); for an aspect swap, the entity the aspect is
  asked of; a question with nothing else to keep needs the put-in name alone, and
- reads close to the rewrite: MiniLM similarity of text and rewrite at least `SUPPORT_FLOOR` (a list of
  diseases that names both in passing is no evidence).

That is support `paired`. Where no retrieved text names both (a corpus of a few thousand texts rarely
names a sibling beside the question's other entity), a text naming the put-in concept alone that reads
`SUPPORT_ALONE_FLOOR` close to the rewrite is support `alone`: the corpus writes about the sibling in the
question's kind of situation. refkit noise prefers swaps with `paired` support.

An unsupported rewrite keeps no noise: what it retrieves is about the swapped-in concept in other
situations, unrelated to the original question. Every rewrite records its support (the text and names
that support it, or why none does), so a reader can check the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from refkit.noise.options import ENTITY_FLOOR
from refkit.text_similarity import TextSimilarity
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import Aspect, NameMatcher, PhraseMatcher

CONTEXT_TYPES = ("drug", "disease", "gene", "organism")  # what a question is about; organs, tests and places set it
SUPPORT_FLOOR = ENTITY_FLOOR  # the floor at which a text naming a question's entity counts as related to it
SUPPORT_SCAN = 8  # texts naming both that are embedded per rewrite, best-ranked first
# A text naming the put-in concept without what the question keeps supports the rewrite only this close to
# it: written about the put-in concept in the question's kind of situation, though not with its entity.
SUPPORT_ALONE_FLOOR = 0.50


@dataclass(frozen=True)
class Evidence:
    put_in: tuple[str, ...]  # the names a supporting text must carry (one of them)
    kept: tuple[str, ...]  # and one of these; empty: the put-in name alone
    put_in_matcher: NameMatcher | PhraseMatcher
    kept_matcher: NameMatcher | None


def _matcher(pairs: list[tuple[str, object]], english: bool) -> NameMatcher:
    return NameMatcher(pairs, english=english)


def entity_evidence(put_in: Sequence[Entity], context: Sequence[Entity], language: str) -> Evidence:
    english = language == "en"
    return Evidence(
        tuple(e.name for e in put_in),
        tuple(e.name for e in context),
        _matcher([(f, e) for e in put_in for f in e.surface_forms(language)], english),
        _matcher([(f, e) for e in context for f in e.surface_forms(language)], english) if context else None,
    )


def aspect_evidence(aspect: Aspect, entity: Entity, language: str) -> Evidence:
    english = language == "en"
    return Evidence(
        (aspect.name,),
        (entity.name,),
        PhraseMatcher([(s, aspect) for s in aspect.phrases]),
        _matcher([(f, entity) for f in entity.surface_forms(language)], english),
    )


class SupportTest:
    """Support of one question's rewrites from the hits retrieved for them."""

    def __init__(
        self,
        similarity: TextSimilarity,
        floor: float = SUPPORT_FLOOR,
        scan: int = SUPPORT_SCAN,
        alone_floor: float = SUPPORT_ALONE_FLOOR,
    ):
        self.similarity, self.floor, self.scan, self.alone_floor = similarity, floor, scan, alone_floor

    def check(self, rewrite: str, evidence: Evidence, hits: list) -> dict:
        """The support record of one rewrite: {"supported": True, "level": "paired", "snippet_id", "rank",
        "names", "similarity"} from the best-ranked text that names both and reads close enough; else
        {"supported": True, "level": "alone", ...} from one that names what the swap put in and reads
        `alone_floor` close; else {"supported": False, "why"}."""
        paired, alone = [], []
        for hit in hits:
            text = f"{hit.title} {hit.content}"
            put_in = evidence.put_in_matcher.find(text)
            if not put_in:
                continue
            kept = evidence.kept_matcher.find(text) if evidence.kept_matcher is not None else []
            names = sorted({m.text.lower() for m in put_in} | {m.text.lower() for m in kept})
            wanted = paired if kept or evidence.kept_matcher is None else alone
            if len(wanted) < self.scan:
                wanted.append((hit, text, names))
            if len(paired) == self.scan:
                break
        for level, naming, floor in (("paired", paired, self.floor), ("alone", alone, self.alone_floor)):
            if naming:
                scores = self.similarity.cosine(rewrite, [text for _, text, _ in naming])
                for (hit, _, names), score in zip(naming, scores, strict=True):
                    if score >= floor:
                        return {
                            "supported": True,
                            "level": level,
                            "snippet_id": hit.id,
                            "rank": hit.rank,
                            "names": names,
                            "similarity": score,
                        }
        wanted = f"{' or '.join(evidence.put_in)}" + (f" with {' or '.join(evidence.kept)}" if evidence.kept else "")
        if not paired and not alone:
            return {"supported": False, "why": f"no text retrieved for it names {' or '.join(evidence.put_in)}"}
        return {
            "supported": False,
            "why": (
                f"{len(paired)} retrieved texts name {wanted}, none reads {self.floor:.2f} "
                f"close to the rewrite; {len(alone)} name {' or '.join(evidence.put_in)} "
                f"alone, none reads {self.alone_floor:.2f} close"
            ),
        }
