"""IR file formats every stage shares: relevance judgements (TREC qrels or BEIR) and TREC run files.
Queries are read by medsnip.queries (one reader for every query file format)."""

from __future__ import annotations

from pathlib import Path


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
