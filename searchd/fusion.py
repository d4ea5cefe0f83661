"""Fusion of ranked lists from different retrievers and corpora, two ways.

- `rrf` (the default): BM25 scores of different Lucene indexes (and inner products of different
  encoders) are not on one scale, so every (corpus, retriever) list is fused by rank alone,
  score(d) = sum over the lists that contain d of 1 / (rrf_k + rank_in_list(d)), ranks from 1
  (Cormack et al., 2009; rrf_k 60 by default).
- `medrag`: MedRAG's retrieval (Xiong et al., 2024, RetrievalSystem.merge): for each retriever the
  corpora's lists are merged into one by the retriever's own score (descending; ascending for a
  distance such as SPECTER's L2), then those per-retriever lists are fused by RRF (MedRAG uses
  rrf_k 100). With a single retriever the merged list itself is the answer, scores as they are.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from medsnip.serving import DEFAULT_RRF_K  # the served default, shared with serve.json


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


def merge_by_score(
    lists: dict[tuple[str, str], list[tuple[str, float]]], retriever: str, ascending: bool = False
) -> list[tuple[str, str, float]]:
    """One retriever's lists over every corpus as one list, best score first: (corpus, id, score).
    Equal scores keep corpus order, then list order (MedRAG leaves their order to numpy's sort)."""
    merged = [
        (corpus, snippet_id, score, position)
        for (corpus, name), hits in sorted(lists.items())
        if name == retriever
        for position, (snippet_id, score) in enumerate(hits)
    ]
    merged.sort(key=lambda item: (item[2] if ascending else -item[2], item[0], item[3]))
    return [(corpus, snippet_id, score) for corpus, snippet_id, score, _ in merged]


def fuse_medrag(
    lists: dict[tuple[str, str], list[tuple[str, float]]],
    k: int,
    rrf_k: int = DEFAULT_RRF_K,
    ascending: set[str] | frozenset = frozenset(),
) -> list[FusedHit]:
    """MedRAG's fusion (module docstring): corpora merged per retriever by score, retrievers fused by
    RRF over the merged lists' ranks. A hit's contributions carry its rank in each merged list.
    `ascending`: retrievers whose scores are distances."""
    retrievers = sorted({retriever for _, retriever in lists})
    merged = {retriever: merge_by_score(lists, retriever, retriever in ascending) for retriever in retrievers}
    if len(retrievers) == 1:
        ((retriever, hits),) = merged.items()
        fused = []
        for rank, (corpus, snippet_id, score) in enumerate(hits[:k], 1):
            fused.append(FusedHit(snippet_id, score, rank, [(corpus, retriever, rank, score)]))
        return fused
    # every retriever's merged list becomes one ranked list for RRF; its corpus goes in the key
    ranked = {
        (retriever, ""): [(snippet_id, score) for _, snippet_id, score in hits] for retriever, hits in merged.items()
    }
    fused = fuse_rrf(ranked, k, rrf_k)
    corpus_of = {
        (retriever, snippet_id): corpus for retriever, hits in merged.items() for corpus, snippet_id, _ in hits
    }
    for hit in fused:
        hit.contributions = [
            (corpus_of[(retriever, hit.id)], retriever, rank, score) for retriever, _, rank, score in hit.contributions
        ]
    return fused
