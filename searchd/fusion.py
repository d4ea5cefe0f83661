"""Reciprocal rank fusion of ranked lists from different retrievers and corpora.

BM25 scores of different Lucene indexes (and inner products of different encoders) are not on one
scale, so lists are never merged by score: every (corpus, retriever) list is fused by rank alone,
score(d) = sum over the lists that contain d of 1 / (rrf_k + rank_in_list(d)), ranks from 1
(Cormack et al., 2009; rrf_k 60 by default, MedRAG uses 100).
"""

from __future__ import annotations

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
    then to the smaller id, so the order is deterministic."""
    fused: dict[str, FusedHit] = {}
    best_rank: dict[str, int] = {}
    for (corpus, retriever), hits in sorted(lists.items()):
        for rank, (snippet_id, score) in enumerate(hits, 1):
            hit = fused.get(snippet_id)
            if hit is None:
                hit = fused[snippet_id] = FusedHit(snippet_id, 0.0)
                best_rank[snippet_id] = rank
            hit.score += 1.0 / (rrf_k + rank)
            hit.contributions.append((corpus, retriever, rank, score))
            best_rank[snippet_id] = min(best_rank[snippet_id], rank)
    ordered = sorted(fused.values(), key=lambda h: (-h.score, best_rank[h.id], h.id))[:k]
    for rank, hit in enumerate(ordered, 1):
        hit.rank = rank
    return ordered
