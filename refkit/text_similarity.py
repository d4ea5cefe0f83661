"""MiniLM similarity of texts, and BM25 among one question's searched texts: what refkit's rules measure.

`TextSimilarity` gives the cosine of the bundled all-MiniLM-L6-v2's vectors (each independent of its batch,
kept between runs by refkit.vector_cache); refkit noise's may-answer, unrelated and support rules are
thresholds on it (refkit.noise.options). `similarity_record` is what a reader judging a kept reference sees
beside it: its MiniLM cosine and pool BM25 (bm25s, Lucene's k1 0.9, b 0.4, IDF from the texts one
question's searches returned, so scores compare within one question only) to the original question and,
where relevant references are known (`--refs` lines labelled relevant), the highest to any of them.
"""

from __future__ import annotations

import numpy as np


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
