"""What a refkit noise run may vary, and the thresholds its rules use, with where each value comes from.

The similarity thresholds are MiniLM cosines (the bundled all-MiniLM-L6-v2, refkit.text_similarity.TextSimilarity),
calibrated on the realistic bench of `make bench` (docs/benchmarks.md, "refkit noise on a realistic root"):
BioASQ questions over the gold snippets of 2,237 BioASQ questions and real PubMed abstracts, where a gold
snippet of the question is a known answer.
"""

from __future__ import annotations

from dataclasses import dataclass

# candidates measured by the similarity filters per question at most: a bound on the embedding time of a question
# whose rewrites retrieve little. On the realistic bench 60 left 35 close-tier texts unfound (filled in with weaker
# ones); 150 and 400 find the same.
EXAMINED = 150
SWAP_POOL = 20  # sibling swaps per target searched for support, best-ranked first
ENTITY_POOL = 4  # the seed picks entity swaps among this many best supported ones

# may-answer: a candidate at least this much closer to the original question than to the rewrite that
# retrieved it reads as being about the original (an answer), not about the rewritten situation.
ANSWER_MARGIN = 0.05
# may-answer: this close to the original question, a text usually answers it whatever it names.
ANSWER_CEILING = 0.55
# may-answer: this close to one of the question's known relevant references (--refs labelled relevant),
# a text is taken for another answer (two gold snippets of one BioASQ question reach it in 66% of pairs,
# gold snippets of two different questions in 0.3%).
GOLD_CEILING = 0.60
# unrelated: a kept text names an entity of the question that the rewrite kept, or the one it put in, and
# reads at least this close to the rewrite; or, naming none, at least SIMILARITY_FLOOR close. A text that names
# none shares a phrase or a topic at most: the blind reading calls it easy, so by default none is kept.
ENTITY_FLOOR = 0.40
SIMILARITY_FLOOR = 1.0
# may-answer: a same-subject text (an aspect rewrite's) that the original question retrieves at this rank or better
# is written about the original situation.
ORIGINAL_RANK = 100
# may-answer: a text this close to one of the question's own references (collected, or its best hits) is about
# the original situation.
REFERENCE_CEILING = 0.65
# rank: texts of the weak tiers (related by one name or similarity, titles, bare definitions, fragments) fill a
# question up to this many kept and no further. The blind reading calls 6 in 27 of the related ones hard, against
# 20 in 27 of the same-subject and situation ones: past what an item needs (refkit assemble's default 3..5
# irrelevant), they only dilute the hard ones.
FILL_TO = 3
# rank: a text of the weak tiers reading less than this close to the original question is not kept at all: on the
# seventh blind sheet of the realistic bench (docs/noise-review.md), none of the 12 related texts under 0.33 was
# hard, 6 of the 10 above it.
# Among themselves the weak texts rank closest to the question first.
WEAK_FLOOR = 0.33
# rank: texts an entity swap retrieved that name the swapped-in entity but nothing the question keeps (the sibling in
# another situation: cetuximab in colorectal cancer for a question on biliary cancer) are not kept unless asked
# for: two strict readers called 26% of the texts of entity swaps hard, and these are most of the rest. With them,
# 24% of the realistic bench's questions keep 3 or more and 48% of what is kept comes from aspect rewrites; without,
# fewer questions keep 3 and 64% comes from aspect rewrites (docs/benchmarks.md).
RELATED = False


@dataclass
class NoiseOptions:
    seed: int = 0
    per_query: int = 5
    candidates: int = 100  # hits retrieved per rewrite
    attribute_swaps: int = 4
    entity_swaps: int = 2
    support: bool = True  # only swaps the corpus supports (refkit.noise.support)
    answer_margin: float = ANSWER_MARGIN
    answer_ceiling: float = ANSWER_CEILING
    entity_floor: float = ENTITY_FLOOR
    similarity_floor: float = SIMILARITY_FLOOR
    original_rank: int = ORIGINAL_RANK
    reference_ceiling: float = REFERENCE_CEILING
    fill_to: int = FILL_TO
    weak_floor: float = WEAK_FLOOR
    examined: int = EXAMINED
    related: bool = RELATED

    def as_dict(self) -> dict:
        return {
            "seed": self.seed,
            "per_query": self.per_query,
            "candidates": self.candidates,
            "attribute_swaps": self.attribute_swaps,
            "entity_swaps": self.entity_swaps,
            "support": self.support,
            "answer_margin": self.answer_margin,
            "answer_ceiling": self.answer_ceiling,
            "entity_floor": self.entity_floor,
            "similarity_floor": self.similarity_floor,
            "original_rank": self.original_rank,
            "reference_ceiling": self.reference_ceiling,
            "fill_to": self.fill_to,
            "weak_floor": self.weak_floor,
            "examined": self.examined,
            "related": self.related,
        }
