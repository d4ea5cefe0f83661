"""`refkit label`: label collected references from relevance judgements (qrels).

For query sets that come with judgements (PubMedQA: each question's own abstract; BioASQ: its
relevant PubMed documents; any TREC/BEIR qrels), a reference is `relevant` when the qrels give its
document (or its snippet id) a grade above zero. Unjudged references stay unlabelled by default
(`--unjudged skip`), for an expert or a later step to decide: a reference nobody judged may well answer
the question, and calling it irrelevant would punish the models that cite it. `--unjudged irrelevant`
is the pooled-judgement reading, when the qrels are known to be complete. The labelled file is
`refkit assemble`'s `--relevant` input.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from medsnip.jsonl import read_jsonl


def label_references(refs: Path, qrels: dict[str, dict[str, int]], unjudged: str = "skip") -> Iterator[dict]:
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
