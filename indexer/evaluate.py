"""Retrieval quality on a collection with relevance judgments: TREC runs, nDCG@10 and Recall@100
(computed by pytrec_eval, the trec_eval implementation the IR community uses)."""

from __future__ import annotations


def evaluate(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over the judged queries (unjudged queries are not counted)."""
    import pytrec_eval

    as_dict = {qid: {docid: float(score) for docid, score in hits} for qid, hits in run.items() if qid in qrels}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    per_query = evaluator.evaluate(as_dict)
    judged = [qid for qid in qrels if qid in per_query]
    if not judged:
        return {"ndcg_cut_10": 0.0, "recall_100": 0.0, "queries": 0}
    return {
        "ndcg_cut_10": sum(per_query[q]["ndcg_cut_10"] for q in judged) / len(qrels),
        "recall_100": sum(per_query[q]["recall_100"] for q in judged) / len(qrels),
        "queries": len(qrels),
    }


def doc_ids_of(hits: list[tuple[str, float]], store, by: str) -> list[tuple[str, float]]:
    """Map snippet-level hits to the qrels' document ids (`by`="doc_id": the best chunk of each
    document counts once), or keep snippet ids (`by`="id")."""
    if by == "id":
        return hits
    seen: dict[str, float] = {}
    for snippet, found in zip(hits, store.get([h[0] for h in hits]), strict=True):
        doc_id = found["doc_id"] if found else snippet[0]
        if doc_id not in seen:
            seen[doc_id] = snippet[1]
    return list(seen.items())
