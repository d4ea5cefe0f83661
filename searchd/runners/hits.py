"""What every runner adapter takes from a searchd hit: its id, title, text and the metadata that says where it
came from (corpus, source, document, and each retriever's rank and score)."""

from __future__ import annotations

from medsnip.v1 import search_pb2


def hit_metadata(hit: search_pb2.Hit) -> dict:
    """The hit's provenance as plain data: corpus (of its first retriever), source, doc_id, title, fused
    rank and score, and per retriever its corpus, rank and score."""
    return {
        "id": hit.id,
        "title": hit.title,
        "corpus": hit.retrievers[0].corpus if hit.retrievers else "",
        "source": hit.source,
        "doc_id": hit.doc_id,
        "rank": hit.rank,
        "score": hit.score,
        "retrievers": [
            {"corpus": r.corpus, "retriever": r.retriever, "rank": r.rank, "score": r.score} for r in hit.retrievers
        ],
    }
