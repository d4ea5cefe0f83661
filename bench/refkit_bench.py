"""refkit's benchmark (run_benchmarks.py --only refkit): how long collect, lexicon and noise take on real
question sets against the demo corpus root's searchd. There is no reference tool to compare with (the
curation benchmarks refkit scripts were assembled by hand), so these are plain timings."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
QUESTION_SETS = {
    "PubMedQA test (500)": REPO / "samples" / "ir" / "pubmedqa_test_set.json",
    "MedQA US test (1,273)": REPO / "samples" / "ir" / "medqa_us_4options_test.jsonl",
}


def _timed(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "refkit.cli", *arguments],
        check=True,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def refkit_section(root: Path, work: Path) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    process, address = start_background_server(root)
    rows = []
    try:
        lexicon = work / "lexicon.tsv"
        lexicon_seconds = _timed(["lexicon", "--server", address, "--out", str(lexicon)])
        for name, path in QUESTION_SETS.items():
            refs, noise = work / "refs.jsonl", work / "noise.jsonl"
            collect_seconds = _timed(["collect", str(path), "--server", address, "--k", "32", "--out", str(refs)])
            noise_seconds = _timed(
                [
                    "noise",
                    str(path),
                    "--server",
                    address,
                    "--lexicon",
                    str(lexicon),
                    "--seed",
                    "13",
                    "--refs",
                    str(refs),
                    "--out",
                    str(noise),
                ]
            )
            records = [orjson.loads(line) for line in noise.read_bytes().splitlines()]
            rewritten = sum(1 for r in records if r["rewrites"])
            kept = sum(len(r["noise"]) for r in records)
            rows.append((name, len(records), collect_seconds, noise_seconds, rewritten, kept))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    corpora = ", ".join(sorted(p.name for p in root.iterdir() if (p / "store").is_dir()))
    return [
        "## refkit",
        "",
        f"- searchd over the demo corpus root ({corpora}; hybrid BM25 + dense minilm), on this machine; each "
        "command is a whole process (start-up included); collect: k=32 with dedup; noise: its defaults (100 hits "
        "per rewrite, 5 kept per query), with the collected references",
        f"- `refkit lexicon` through ScanSnippets: {lexicon_seconds:.1f} s",
        "",
        "| questions | queries | collect s | collect q/s | noise s | rewritten queries | noisy references kept |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {name} | {n:,} | {c:.1f} | {n / c:,.1f} | {s:.1f} | {r:,} | {k:,} |" for name, n, c, s, r, k in rows),
        "",
    ]
