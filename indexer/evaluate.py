"""Retrieval quality on a collection with relevance judgments: TREC runs, nDCG@10 and Recall@100
(computed by pytrec_eval, the trec_eval implementation the IR community uses)."""

from __future__ import annotations

import csv
from pathlib import Path


def read_queries(path: Path) -> dict[str, str]:
    """`qid<TAB>text` lines (a header line `query-id ...`/`qid ...` is skipped)."""
    queries: dict[str, str] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if not row or (number == 1 and row[0].lower() in ("qid", "query-id", "query_id", "id")):
                continue
            if len(row) < 2:
                raise ValueError(f"{path}:{number}: expected 'qid<TAB>query text'")
            queries[row[0]] = row[1]
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """TREC qrels (`qid 0 docid rel`) or BEIR's `query-id<TAB>corpus-id<TAB>score` (with header)."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts or (number == 1 and parts[0].lower() in ("query-id", "qid", "query_id")):
                continue
            if len(parts) == 4:
                qid, _, docid, rel = parts
            elif len(parts) == 3:
                qid, docid, rel = parts
            else:
                raise ValueError(f"{path}:{number}: expected 'qid 0 docid relevance' or 'qid docid relevance'")
            qrels.setdefault(qid, {})[docid] = int(rel)
    return qrels


def write_trec_run(path: Path, run: dict[str, list[tuple[str, float]]], tag: str) -> None:
    """TREC run lines `qid Q0 docid rank score tag`, ranks from 1."""
    with open(path, "w", encoding="utf-8") as handle:
        for qid, hits in run.items():
            for rank, (docid, score) in enumerate(hits, 1):
                handle.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


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
