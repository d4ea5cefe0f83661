"""Writes the gold snippets of BioASQ 10b batch 1 (bioasq_10B1_golden.json, real data) as a BEIR-style
collection: corpus.jsonl (one document per distinct gold snippet: _id = PMID-section-offset, title "",
text = the snippet), queries.tsv (question id <tab> question) and qrels.tsv (question id 0 snippet id 1:
a question's relevant documents are its own gold snippets). `refkit noise`'s benchmark serves them
beside the demo root, so every BioASQ question has relevant references in the corpus to compare noise
with. Run: python samples/ir/make_bioasq_beir.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def snippet_id(snippet: dict) -> str:
    pmid = snippet["document"].rstrip("/").rsplit("/", 1)[-1]
    section = "t" if snippet["beginSection"] == "title" else "a"
    return f"{pmid}-{section}{snippet['offsetInBeginSection']}"


def main() -> None:
    questions = json.loads((HERE / "bioasq_10B1_golden.json").read_text(encoding="utf-8"))["questions"]
    corpus: dict[str, str] = {}
    queries, qrels = [], []
    for question in questions:
        queries.append(f"{question['id']}\t{' '.join(question['body'].split())}")
        for snippet in question["snippets"]:
            identifier = snippet_id(snippet)
            corpus.setdefault(identifier, " ".join(snippet["text"].split()))
            line = f"{question['id']}\t0\t{identifier}\t1"
            if line not in qrels:
                qrels.append(line)
    folder = HERE / "bioasq-beir"
    folder.mkdir(exist_ok=True)
    lines = [
        json.dumps({"_id": i, "title": "", "text": text}, ensure_ascii=False) for i, text in sorted(corpus.items())
    ]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "queries.tsv").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
