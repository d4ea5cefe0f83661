"""What `refkit noise` keeps on real questions, and whether an expert would keep it (run_benchmarks.py
--only noise).

The root is the demo root (`make demo`) plus the gold snippets of BioASQ 10b batch 1 as a corpus of
their own (samples/ir/bioasq-beir), so every BioASQ question has its answers in the corpus and the
leak rate can be measured for it as for PubMedQA (each question's own abstract). For BioASQ batch 1
(all 90 questions), the first 300 PubMedQA and the first 300 MedQA questions: collect (k 16), label
(qrels), noise (seed 13) at the default top-M 100 and at top-M 20, audit with qrels and the lexicon.
Also: the relatedness floors and the minilm judge's threshold measured on labelled pairs (PubMedQA
questions and abstracts, BioASQ questions and gold snippets), and a fixed-seed sample of kept noise for
judging by hand (docs/noise-review-sample.jsonl; the judgements are docs/noise-review.md).
Returns markdown lines."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson

from medsnip.irformats import read_qrels
from refkit.relatedness import DENSE_FLOOR, ENTITY_FLOOR
from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
IR = SAMPLES / "ir"
QUESTIONS = 500
SETS = {  # name: (questions, qrels)
    "BioASQ 10b batch 1": (IR / "bioasq-beir" / "queries.tsv", IR / "bioasq-beir" / "qrels.tsv"),
    "PubMedQA test": (IR / "pubmedqa_test_set.json", IR / "pubmedqa-beir" / "qrels.tsv"),
    "MedQA US test": (IR / "medqa_us_4options_test.jsonl", None),
}
SETUPS = {"default (top-M 100)": [], "top-M 20": ["--top-m", "20"]}
SAMPLE_SIZE = 66
SAMPLE_SEED = 26


def _run(*arguments, module: str = "refkit.cli") -> str:
    result = subprocess.run([sys.executable, "-m", module, *map(str, arguments)], cwd=REPO, capture_output=True,
                            text=True)  # fmt: skip
    if result.returncode:
        raise RuntimeError(f"{module} {' '.join(map(str, arguments))} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def bench_root(demo: Path, work: Path) -> Path:
    """The demo root's sources (hard links) plus the BioASQ gold snippets, indexed like the demo's."""
    root = work / "root"
    if not (root / "bioasq" / "dense-minilm" / "build.json").is_file():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        for source in ("pubmed", "pubmedqa", "statpearls", "textbooks", "wikipedia"):
            shutil.copytree(demo / source, root / source, copy_function=lambda a, b: Path(b).hardlink_to(a))
        _run("jsonl", IR / "bioasq-beir" / "corpus.jsonl", "--source", "bioasq", "--no-chunk", "--shards", 4,
             "--out", root / "bioasq", "--quiet", module="corpusbuild")  # fmt: skip
        for stage in (["store"], ["bm25"], ["dense", "--preset", "minilm"]):
            _run(stage[0], root / "bioasq", *stage[1:], module="indexer.cli")
    return root


def labelled(folder: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A BEIR folder's texts (id -> title and text) and each query's relevant ids, in qrels order."""
    texts = {r["_id"]: f"{r['title']} {r['text']}".strip()
             for r in map(orjson.loads, (folder / "corpus.jsonl").read_bytes().splitlines())}  # fmt: skip
    relevant = {query_id: [doc_id for doc_id, grade in judged.items() if grade > 0]
                for query_id, judged in read_qrels(folder / "qrels.tsv").items()}  # fmt: skip
    return texts, {query_id: docs for query_id, docs in relevant.items() if docs}


def gold_pairs_line(similarity) -> str:
    """How alike two answers of one question are (refkit.relatedness.GOLD_CEILING), against answers of
    two different questions: BioASQ's gold snippets."""
    from refkit.relatedness import GOLD_CEILING

    texts, relevant = labelled(IR / "bioasq-beir")
    ids = sorted({d for docs in relevant.values() for d in docs})
    vectors = dict(zip(ids, similarity.vectors([texts[d] for d in ids]), strict=True))
    same = [
        float(vectors[a] @ vectors[b]) for docs in relevant.values() for i, a in enumerate(docs) for b in docs[i + 1 :]
    ]
    rng, questions = random.Random(SAMPLE_SEED), sorted(relevant)
    other = []
    for _ in range(20_000):
        first, second = rng.sample(questions, 2)
        other.append(float(vectors[rng.choice(relevant[first])] @ vectors[rng.choice(relevant[second])]))
    same_array, other_array = np.array(same), np.array(other)
    return (f"Answers to one question are alike: two gold snippets of one BioASQ question ({len(same):,} pairs) score "
            f"{np.median(same_array):.2f} at the median and reach {GOLD_CEILING:.2f} in "
            f"{(same_array >= GOLD_CEILING).mean():.0%} of pairs; gold snippets of two different questions (20,000 "
            f"pairs) reach it in {(other_array >= GOLD_CEILING).mean():.2%}. A kept candidate at {GOLD_CEILING:.2f} "
            "or more to a relevant reference of its question is rejected as a likely answer.")  # fmt: skip


def calibration_lines() -> list[str]:
    """The floors of refkit.relatedness and the minilm judge's threshold against labelled pairs."""
    from medsnip.queries import query_texts
    from refkit.judge import PRESETS
    from refkit.relatedness import TextSimilarity

    similarity = TextSimilarity()
    rows = []
    for name, folder in (("PubMedQA (question, its abstract)", IR / "pubmedqa-beir"),
                         ("BioASQ (question, its gold snippets)", IR / "bioasq-beir")):  # fmt: skip
        questions = query_texts(folder / "queries.tsv")
        texts, relevant = labelled(folder)
        relevant = {query_id: docs for query_id, docs in relevant.items() if query_id in questions}
        chosen = sorted(relevant)[:200]
        question_vectors = similarity.vectors([questions[q] for q in chosen])
        own = [relevant[q][0] for q in chosen]
        text_vectors = similarity.vectors([texts[d] for d in own])
        scores = question_vectors @ text_vectors.T
        answers = np.diag(scores)
        mismatched = scores[~np.eye(len(chosen), dtype=bool)]
        threshold = PRESETS["minilm"].threshold
        recall = float((answers >= threshold).mean())  # true answers the judge rejects
        wrongly = float((mismatched >= threshold).mean())
        rows.append(f"| {name} | {len(chosen)} | {np.median(answers):.2f} | {np.quantile(answers, 0.05):.2f} | "
                    f"{np.quantile(mismatched, 0.95):.2f} | {np.quantile(mismatched, 0.99):.2f} | "
                    f"{(mismatched < ENTITY_FLOOR).mean():.1%} | {(mismatched < DENSE_FLOOR).mean():.1%} | "
                    f"{recall:.1%} | {wrongly:.2%} |")  # fmt: skip
    return [
        gold_pairs_line(similarity),
        "",
        "Floors and the judge on labelled pairs (MiniLM cosine of a question and a text; mismatched = a question "
        "with another question's relevant text, which is biomedical but unrelated). A kept reference must reach "
        f"{ENTITY_FLOOR:.2f} when it names a key entity and {DENSE_FLOOR:.2f} otherwise; the minilm judge "
        f"(`--judge minilm`, threshold {PRESETS['minilm'].threshold:.2f}) rejects what reaches its threshold. "
        "'judge rejects' is its recall on true answers; 'wrongly' the share of mismatched pairs it would reject.",
        "",
        "| pairs | n | answers: median | answers: 5th pct | mismatched: 95th pct | mismatched: 99th pct | "
        f"mismatched below {ENTITY_FLOOR:.2f} | below {DENSE_FLOOR:.2f} | judge rejects answers | judge rejects "
        "mismatched |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]


def review_sample(outputs: dict[tuple[str, str], Path], destination: Path) -> int:
    """A fixed-seed sample of kept noise across the sets and setups (a reference kept by both setups
    once, as the default's), written for judging by hand."""
    kept, seen = [], set()
    for (set_name, setup), path in outputs.items():
        for record in map(orjson.loads, path.read_bytes().splitlines()):
            rewrites = {r["number"]: r["query"] for r in record["rewrites"]}
            for reference in record["noise"]:
                if (record["id"], reference["snippet_id"]) in seen:
                    continue
                seen.add((record["id"], reference["snippet_id"]))
                kept.append({"set": set_name, "setup": setup, "id": record["id"], "question": record["query"],
                             "rewrite": rewrites[reference["rewrite"]], "snippet_id": reference["snippet_id"],
                             "reference": f"{reference['title']} {reference['content']}".strip()[:700],
                             "related": reference["related"]})  # fmt: skip
    chosen = random.Random(SAMPLE_SEED).sample(kept, min(SAMPLE_SIZE, len(kept)))
    destination.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in chosen), encoding="utf-8")
    return len(chosen)


def noise_section(demo: Path, work: Path) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    root = bench_root(demo, work)
    process, address = start_background_server(root)
    try:
        lexicon = work / "lexicon.tsv"
        started = time.perf_counter()
        _run("lexicon", "--mesh-names", "--mesh", SAMPLES / "mesh" / "meshrdf-desc-samples.xml", "--supplementary",
             SAMPLES / "mesh" / "meshrdf-supp-samples.xml", "--server", address, "--out", lexicon)  # fmt: skip
        lexicon_seconds = time.perf_counter() - started
        rows, outputs = [], {}
        for name, (questions, qrels) in SETS.items():
            refs, labeled = work / "refs.jsonl", work / f"labeled-{len(rows)}.jsonl"
            _run("collect", questions, "--server", address, "--k", 16, "--limit", QUESTIONS, "--out", refs)
            if qrels:
                _run("label", refs, "--qrels", qrels, "--out", labeled)
            else:
                shutil.copyfile(refs, labeled)
            for setup, extra in SETUPS.items():
                out = work / f"noise-{len(rows)}.jsonl"
                print(f"noise: {name}, {setup}", flush=True)
                started = time.perf_counter()
                _run("noise", questions, "--server", address, "--lexicon", lexicon, "--seed", 13, "--limit",
                     QUESTIONS, "--refs", labeled, "--out", out, *extra)  # fmt: skip
                seconds = time.perf_counter() - started
                outputs[name, setup] = out
                audit = json.loads(_run("audit", out, *(["--qrels", qrels] if qrels else []), "--lexicon", lexicon))
                no_entity = sum(n for reason, n in audit["shortfall"].items() if reason.startswith("no entity"))
                with_entity = audit["questions"] - no_entity
                leak = "n/a" if audit["leak_rate"] is None else (
                    f"{audit['leaked']}/{audit['judged_kept']} ({audit['leak_rate']:.1%})")  # fmt: skip
                by = audit["kept_related_by"]
                refused = ", ".join(f"{rule} {n}" for rule, n in audit["refused_swaps"].items()) or "0"
                rows.append(f"| {name} | {setup} | {audit['questions']} | {with_entity} | "
                            f"{audit['covered']}/{with_entity} ({audit['covered'] / max(with_entity, 1):.0%}) | "
                            f"{audit['kept']} | {by.get('entity', 0)} / {by.get('similarity', 0)} | {leak} | "
                            f"{audit['rewrites_without_sense']}/{audit['rewrites']} | "
                            f"{audit['rewrites_with_grammar_problems']} | {refused} | {seconds:.0f} |")  # fmt: skip
        sampled = review_sample(outputs, REPO / "docs" / "noise-review-sample.jsonl")
    finally:
        process.terminate()
        process.wait(timeout=60)
    return [
        "## refkit noise: sensible rewrites and hard negatives",
        "",
        "The demo root plus BioASQ 10b batch 1's gold snippets as a corpus (`bioasq`, 786 snippets), so every "
        "question set has its answers in the root. Questions: all 90 of BioASQ batch 1 and the first "
        f"{QUESTIONS} of PubMedQA and MedQA; collect k 16, label with the set's qrels, noise with seed 13 and "
        f"`--refs` the labelled references; the lexicon is every MeSH name under the real slices, merged with "
        f"the served records (`refkit lexicon --mesh-names --mesh ... --server`, {lexicon_seconds:.0f} s). "
        "Covered = questions with 3+ hard negatives (kept references related to the question: naming its key "
        f"entity or the swapped-in one with MiniLM similarity {ENTITY_FLOOR:.2f}+, or similarity {DENSE_FLOOR:.2f}+), "
        "among the questions where the vocabulary finds a target. Swaps are searched before they are chosen and a "
        "swap the corpus does not support (refkit.support) is refused ('unsupported'). Leak = kept noise the qrels "
        "call relevant (BioASQ: a gold snippet of the question; PubMedQA: its own abstract). Sense = rewrites that "
        "break a refkit.sense rule as `refkit audit --lexicon` checks it; refused = swap candidates the sense rules "
        "turned down, by rule ('same-concept' includes near-synonyms and group/concept mismatches).",
        "",
        "| questions | setup | n | with a target | covered | kept | by entity / by similarity | leak | sense "
        "problems | grammar | refused swaps | noise s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
        *rows,
        "",
        *calibration_lines(),
        f"Hand review: {sampled} kept references drawn with seed {SAMPLE_SEED} from the runs above (both setups) "
        "(docs/noise-review-sample.jsonl) and judged by reading question, rewrite and reference: "
        "docs/noise-review.md.",
        "",
    ]
