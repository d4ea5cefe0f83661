"""Writes the PubMedQA test set (pubmedqa_test_set.json, real data) as a BEIR-style collection:
corpus.jsonl (one document per question: _id = PMID, text = its abstract sections joined, no title,
as the set has none), queries.tsv (PMID <tab> question) and qrels.tsv (PMID 0 PMID 1: each question's
relevant document is its own abstract). Run: python samples/ir/make_pubmedqa_beir.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    questions = json.loads((HERE / "pubmedqa_test_set.json").read_text(encoding="utf-8"))
    corpus, queries, qrels = [], [], []
    for pmid, item in questions.items():
        corpus.append(json.dumps({"_id": pmid, "title": "", "text": " ".join(item["CONTEXTS"])}, ensure_ascii=False))
        queries.append(f"{pmid}\t{' '.join(item['QUESTION'].split())}")
        qrels.append(f"{pmid}\t0\t{pmid}\t1")
    folder = HERE / "pubmedqa-beir"
    folder.mkdir(exist_ok=True)
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (folder / "queries.tsv").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
