"""`refkit label`: label collected references from relevance judgements (qrels).

For query sets that come with judgements (PubMedQA: each question's own abstract; BioASQ: its
relevant PubMed documents; any TREC/BEIR qrels), a reference is `relevant` when the qrels give its
document (or its snippet id) a grade above zero. Unjudged references are `irrelevant` by default (the
usual reading of a pooled judgement set) or left unlabelled with `--unjudged skip`, for an expert to
decide. The labelled file is `refkit assemble`'s `--relevant` input.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from medsnip.jsonl import read_jsonl


def label_references(refs: Path, qrels: dict[str, dict[str, int]], unjudged: str = "irrelevant") -> Iterator[dict]:
    for _, record in read_jsonl(refs, ("id", "query", "references")):
        judged = qrels.get(str(record["id"]), {})
        references = []
        for reference in record["references"]:
            grades = [judged[key] for key in (reference.get("doc_id"), reference.get("snippet_id")) if key in judged]
            if grades:
                label = "relevant" if max(grades) > 0 else "irrelevant"
            else:
                label = None if unjudged == "skip" else "irrelevant"
            references.append({**reference, "label": label, "label_source": "qrels" if grades else "unjudged"})
        yield {**record, "references": references}
