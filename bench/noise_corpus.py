"""The realistic root of the noise benchmark: thousands of related real texts around every question.

BioASQ's gold snippets are answers to their own question and topic neighbours of many others, so a
root of all of them is the hard case for noise: every question has its answers in the corpus (a kept
gold snippet of the question is a leak) and thousands of texts on related entities. Written here, from
the bundled files (samples/SOURCES.md):

- `bioasq/corpus.jsonl`: every distinct gold snippet of BioASQ Task 7b-10b and Task 11b batches 2-4
  (samples/bioasq; Task 11b batch 1 is not in the repository: it is the project's unseen check), one
  document each, id `PMID-{t|a}BEGIN-END` (section and offsets), the PMID in meta;
  `bioasq/queries.tsv` and `bioasq/qrels.tsv`: each question and its gold snippets;
- `pubmedqa/corpus.jsonl`: the 1,000 expert-labelled PubMedQA abstracts (PQA-L, ori_pqal.json), their
  MeSH names in meta (what `refkit lexicon --server` mines).

`question_sample` is the seeded sample of questions the benchmark runs.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
BIOASQ = SAMPLES / "bioasq"
PUBMEDQA_LABELLED = SAMPLES / "ir" / "pubmedqa_ori_pqal.json.gz"


def golden_files() -> list[Path]:
    """The bundled BioASQ golden files, in task and batch order (7B1 ... 11B4)."""
    files = sorted(BIOASQ.glob("*_golden.json.gz"), key=lambda p: (int(p.name.split("B")[0]), p.name))
    if any(p.name.startswith("11B1") for p in files):  # the unseen check must never be read here
        raise RuntimeError("samples/bioasq holds Task 11b batch 1: it must stay out of the repository")
    return files


def snippet_id(snippet: dict) -> str:
    pmid = snippet["document"].rstrip("/").rsplit("/", 1)[-1]
    section = "t" if snippet["beginSection"] == "title" else "a"
    return f"{pmid}-{section}{snippet['offsetInBeginSection']}-{snippet['offsetInEndSection']}"


def _lines(items) -> str:
    return "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items)


def write_bioasq(folder: Path) -> dict[str, str]:
    """corpus.jsonl, queries.tsv and qrels.tsv of every bundled batch into `folder`; returns the
    questions (id -> body)."""
    corpus: dict[str, dict] = {}
    questions: dict[str, str] = {}
    qrels: dict[tuple[str, str], None] = {}
    for path in golden_files():
        for question in json.loads(gzip.decompress(path.read_bytes()))["questions"]:
            body = " ".join(question["body"].split())
            questions.setdefault(question["id"], body)
            for snippet in question.get("snippets", []):
                identifier = snippet_id(snippet)
                text = " ".join(snippet["text"].split())
                if text:
                    corpus.setdefault(
                        identifier, {"_id": identifier, "title": "", "text": text, "pmid": identifier.split("-")[0]}
                    )
                    qrels[question["id"], identifier] = None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(_lines(corpus[key] for key in sorted(corpus)), encoding="utf-8")
    (folder / "queries.tsv").write_text("".join(f"{q}\t{body}\n" for q, body in questions.items()), encoding="utf-8")
    (folder / "qrels.tsv").write_text("".join(f"{q}\t0\t{d}\t1\n" for q, d in qrels), encoding="utf-8")
    return questions


def write_pubmedqa(folder: Path) -> int:
    """corpus.jsonl of the 1,000 labelled PubMedQA abstracts (id = PMID, MeSH names in meta)."""
    data = json.loads(gzip.decompress(PUBMEDQA_LABELLED.read_bytes()))
    records = [
        {
            "_id": pmid,
            "title": "",
            "text": " ".join(" ".join(item["CONTEXTS"]).split()),
            "mesh": [{"name": name} for name in item.get("MESHES", [])],
            "year": item.get("YEAR"),
        }
        for pmid, item in sorted(data.items())
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(_lines(records), encoding="utf-8")
    return len(records)


def question_sample(questions: dict[str, str], size: int, seed: int) -> list[tuple[str, str]]:
    """`size` questions drawn with `seed`, in the order of their ids."""
    chosen = random.Random(seed).sample(sorted(questions), min(size, len(questions)))
    return [(q, questions[q]) for q in sorted(chosen)]
