"""Is a noise candidate a hard negative: related to the original question, though it must not answer it?

A reference kept as noise that has nothing to do with the question (a cystitis trial for a question on
pembrolizumab in lung cancer) is easy to ignore and teaches a benchmark nothing. CRAB keeps references
that are about the question's entities or situation but cannot answer it. A candidate that passed
refkit.noise's answer filters is kept only when it is related, in one of two ways, tried in order:

1. `entity`: its title or text names a key entity of the question (a non-generic entity found in it,
   the target included: same entity, another aspect) or the entity a swap put in (a sibling concept),
   and its MiniLM cosine similarity to the original question reaches `ENTITY_FLOOR` (a name alone is
   weak evidence: "fever" in a history of anatomy is no hard negative for a COVID-19 question);
2. `similarity`: its similarity to the original question reaches `DENSE_FLOOR`.
And a candidate at `ANSWER_CEILING` or above is rejected as a likely answer: that close to the question,
a text usually is one (the offline answerability check; `--judge` adds a model of your choice); so is a
candidate at `GOLD_CEILING` or above to one of the question's known relevant references.
The floors and the ceiling are calibrated on labelled pairs (samples/ir/pubmedqa-beir, bioasq-beir): a
question and another question's relevant text (related only by being biomedical) score below 0.40 in
99% of PubMedQA pairs and below 0.45 in 99% of BioASQ pairs as well, while a question and its own
abstract score 0.72 at the median and 0.50 or more in 95% of pairs (tests/test_refkit_support.py
recomputes them; `make bench` reports them). A hand review of kept references at the earlier floors
(0.30 with an entity, 0.40 without) found most of those between 0.30 and 0.40, and most of those
related by similarity alone below 0.45, to be about something else. Hard negatives are what lies
between the floors and the ceiling.

Every kept reference records why it is related and, for a reader judging it, its similarity to the
original question and to the question's relevant references (`--refs` lines labelled relevant): MiniLM
cosine, and BM25 over the pool of texts this question's searches returned (bm25s, Lucene's BM25
parameters k1 0.9, b 0.4; IDF from that pool, so scores compare within one question only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refkit.lexicon import Entity
from refkit.matcher import PhraseMatcher, with_variants

DENSE_FLOOR = 0.45
ENTITY_FLOOR = 0.40
ANSWER_CEILING = 0.50
# Two relevant snippets of one BioASQ question score 0.66 at the median, and 0.60 or more in 66% of pairs;
# relevant snippets of two different questions reach 0.60 in 0.3% of pairs. A candidate that close to a
# reference known to answer the question (`--refs` labelled relevant) is taken for another answer.
GOLD_CEILING = 0.60


@dataclass(frozen=True)
class Related:
    how: str  # "entity" | "similarity"
    why: str
    entities: tuple[str, ...]


class TextSimilarity:
    """MiniLM cosine similarity of texts (each vector independent of its batch); vectors come from the
    process's refkit.vector_cache store, opened on first use."""

    @staticmethod
    def vectors(texts: list[str]) -> np.ndarray:
        from refkit.vector_cache import shared

        return shared().matrix(texts)

    def cosine(self, text: str, others: list[str]) -> list[float]:
        if not others:
            return []
        vectors = self.vectors([text, *others])
        return [round(float(score), 4) for score in vectors[1:] @ vectors[0]]


class PoolBM25:
    """BM25 among the texts one question's searches returned (its pool): how lexically close a text is to
    the question, or a relevant reference to a candidate."""

    def __init__(self, pool: list[str]):
        import bm25s  # imported here: refkit's other commands need not load it

        self._bm25s = bm25s
        self._pool = list(dict.fromkeys(pool))
        self._index = {text: i for i, text in enumerate(self._pool)}
        self._retriever = bm25s.BM25(k1=0.9, b=0.4)
        self._retriever.index(self._tokens(self._pool), show_progress=False)

    def _tokens(self, texts: list[str]):
        return self._bm25s.tokenize(texts, stopwords="en", show_progress=False)

    def score(self, query: str, texts: list[str]) -> list[float]:
        """BM25 of `query` for each of `texts` (all of them in the pool)."""
        [words] = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        scores = self._retriever.get_scores(words) if words else np.zeros(len(self._pool))
        return [round(float(scores[self._index[t]]), 4) for t in texts]


class RelatednessTest:
    """One question's relatedness test: its key entities, the entities its swaps put in, the floor."""

    def __init__(self, question: str, key_entities: list[Entity], swapped_in: dict[int, list[Entity]],
                 similarity: TextSimilarity, language: str = "en", floor: float = DENSE_FLOOR,
                 entity_floor: float = ENTITY_FLOOR, ceiling: float = ANSWER_CEILING):  # fmt: skip
        """`swapped_in`: rewrite number -> the entities that rewrite put in."""
        self.question, self.similarity, self.floor, self.entity_floor = question, similarity, floor, entity_floor
        self.ceiling = ceiling
        english = language == "en"
        self._key = PhraseMatcher(with_variants([(f, e) for e in key_entities for f in e.surface_forms(language)],
                                                english=english))  # fmt: skip
        self._swapped = {number: PhraseMatcher(with_variants([(f, e) for e in entities
                                                              for f in e.surface_forms(language)],
                                                             english=english))
                         for number, entities in swapped_in.items()}  # fmt: skip

    def check(self, text: str, rewrite_number: int) -> tuple[Related | None, str]:
        """(how it is related, None if it is not; the reason either way)."""
        named = {m.payload.name for m in self._key.find(text)}
        swapped = self._swapped.get(rewrite_number)
        put_in = {m.payload.name for m in swapped.find(text)} if swapped else set()
        [score] = self.similarity.cosine(self.question, [text])
        if score >= self.ceiling:
            return None, (f"likely answers: MiniLM similarity to the question {score:.2f}, at or above the answer "
                          f"ceiling {self.ceiling:.2f}")  # fmt: skip
        if (named or put_in) and score >= self.entity_floor:
            parts = []
            if named:
                parts.append(f"names the question's {', '.join(sorted(named))}")
            if put_in:
                parts.append(f"names {', '.join(sorted(put_in))}, which the rewrite put in")
            why = f"{'; '.join(parts)}; MiniLM similarity to the question {score:.2f}"
            return Related("entity", why, tuple(sorted(named | put_in))), why
        if score >= self.floor:
            why = f"MiniLM similarity to the question {score:.2f}, at or above the floor {self.floor:.2f}"
            return Related("similarity", why, ()), why
        if named or put_in:
            return None, (f"unrelated: names {', '.join(sorted(named | put_in))} but its MiniLM similarity to the "
                          f"question {score:.2f} is below {self.entity_floor:.2f}")  # fmt: skip
        return None, (f"unrelated: names no key entity of the question and its MiniLM similarity to it "
                      f"{score:.2f} is below the floor {self.floor:.2f}")  # fmt: skip


def similarity_record(question: str, text: str, gold: list[str], similarity: TextSimilarity, bm25: PoolBM25) -> dict:
    """What a reader judging a kept reference wants beside it: MiniLM cosine and pool BM25 to the original
    question and, where relevant references are known, the highest to any of them."""
    [dense_original] = similarity.cosine(question, [text])
    [bm25_original] = bm25.score(question, [text])
    return {
        "dense_original": dense_original,
        "bm25_original": bm25_original,
        "dense_gold": max(similarity.cosine(text, gold)) if gold else None,
        "bm25_gold": max(bm25.score(text, gold)) if gold else None,
    }
