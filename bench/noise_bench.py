"""How many real questions `refkit noise` covers, and how often its noise leaks (run_benchmarks.py --only
noise): BioASQ, PubMedQA and MedQA questions over the demo root's searchd, before this work (the
lexicon mined from the served records alone, no judge) and after (the MeSH slices merged in; then with
the minilm judge). Coverage is the share of questions with 3+ kept noisy references; the leak rate is
measured where judgements exist for documents the root holds (PubMedQA: each question's own abstract
is in the `pubmedqa` corpus). Returns markdown lines."""

from __future__ import annotations

import json
import subprocess
import sys
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
        mined, merged = work / "lexicon-mined.tsv", work / "lexicon-mesh.tsv"
        _refkit("lexicon", "--server", address, "--out", mined)
        _refkit("lexicon", "--mesh", SAMPLES / "mesh" / "meshrdf-desc-samples.xml", "--supplementary",
                SAMPLES / "mesh" / "meshrdf-supp-samples.xml", "--server", address, "--out", merged)  # fmt: skip
        setups = {"mined lexicon, no judge (before)": (mined, []), "MeSH + mined, no judge": (merged, []),
                  "MeSH + mined, judge minilm": (merged, ["--judge", "minilm"])}  # fmt: skip
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
                rows.append(f"| {name} | {setup} | {audit['covered']}/{audit['questions']} ({audit['coverage']:.0%}) "
                            f"| {audit['kept']} | {no_entity} | {leak} |")  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=60)
    return [
        "## refkit noise: coverage and leak rate",
        "",
        f"The first {QUESTIONS} questions of each set, seed 13, over the demo root (`make demo`); coverage = "
        "questions with 3+ kept noisy references; leak = kept noise the judgements call relevant to its "
        "question (PubMedQA: the question's own abstract). The MeSH lexicon here is the 43-descriptor and "
        "19-concept slice in samples/mesh (users pass NLM's full desc2026.xml, which cannot be fetched here), "
        "so most questions still name no entity it knows.",
        "",
        "| questions | setup | covered | kept | no entity found | leak |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        "",
    ]
