"""Reciprocal rank fusion of ranked lists from different retrievers and corpora.

BM25 scores of different Lucene indexes (and inner products of different encoders) are not on one
scale, so lists are never merged by score: every (corpus, retriever) list is fused by rank alone,
score(d) = sum over the lists that contain d of 1 / (rrf_k + rank_in_list(d)), ranks from 1
(Cormack et al., 2009; rrf_k 60 by default, MedRAG uses 100).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

DEFAULT_RRF_K = 60


@dataclass
class FusedHit:
    id: str
    score: float
    rank: int = 0
    contributions: list[tuple[str, str, int, float]] = field(default_factory=list)  # corpus, retriever, rank, score


def fuse_rrf(
    lists: dict[tuple[str, str], list[tuple[str, float]]], k: int, rrf_k: int = DEFAULT_RRF_K
) -> list[FusedHit]:
    """Top-k fused hits, best first. Ties (equal fused score) go to the hit with the better best rank,
    then to the smaller id, so the order is deterministic.

    A hybrid query over five corpora fuses ten lists of 100 hits: ~900 candidates for 10 results. Only
    the candidates' scores and best ranks are kept while summing (in the lists' sorted order, so every
    score is the same float whatever the input's order); hits and their contributions are built for the
    top k alone, where a server spends its time under the GIL otherwise."""
    ordered = sorted(lists.items())
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for _, hits in ordered:
        for rank, (snippet_id, _) in enumerate(hits, 1):
            if snippet_id in scores:
                scores[snippet_id] += 1.0 / (rrf_k + rank)
                if rank < best_rank[snippet_id]:
                    best_rank[snippet_id] = rank
            else:
                scores[snippet_id] = 1.0 / (rrf_k + rank)
                best_rank[snippet_id] = rank
    top = heapq.nsmallest(k, scores, key=lambda i: (-scores[i], best_rank[i], i))
    fused = {snippet_id: FusedHit(snippet_id, scores[snippet_id], rank) for rank, snippet_id in enumerate(top, 1)}
    for (corpus, retriever), hits in ordered:
        for rank, (snippet_id, score) in enumerate(hits, 1):
            hit = fused.get(snippet_id)
            if hit is not None:
                hit.contributions.append((corpus, retriever, rank, score))
    return list(fused.values())
