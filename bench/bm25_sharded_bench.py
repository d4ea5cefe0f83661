"""BM25 built per group of shards (run_benchmarks.py --only bm25-sharded) against one Anserini
IndexCollection run, on the PubMed benchmark corpora (41,794 and 83,588 snippets, 8 shards each).

Every row is a whole `indexer bm25` process (JVM start-up included). CPU seconds are the process
tree's user + system time (wait4), which shows how many cores one IndexCollection run already keeps
busy (its JIT compilers, garbage collector and Lucene's background merges), the bound on what parallel
builds can gain on a 2-core machine. Search compares the merged index and the parts read through one
MultiReader with the single-run index: 500 PubMedQA questions, k=100, the hits and scores must be
identical. Returns markdown lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from indexer.bm25 import BM25Index  # noqa: E402
from medsnip.corpus import Corpus  # noqa: E402
from medsnip.queries import query_texts  # noqa: E402

QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
SETUPS = {
    "one IndexCollection run, 1 thread (pyserini's way)": ["--workers", "1"],
    "one IndexCollection run, 2 threads": ["--workers", "1", "--threads", "2"],
    "2 groups in parallel, merged (addIndexes)": ["--workers", "2", "--layout", "merged"],
    "2 groups in parallel, kept as parts (MultiReader)": ["--workers", "2", "--layout", "parts"],
}
BASELINE = next(iter(SETUPS))


def _run(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process tree)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command} failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


def _out(work: Path, label: str, setup: str) -> Path:
    return work / f"bm25-{label}-{list(SETUPS).index(setup)}"


def _build_rows(corpus_dir: Path, label: str, work: Path, repeats: int) -> tuple[list[str], dict]:
    snippets = Corpus.open(corpus_dir).snippets
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in SETUPS}
    for _ in range(repeats):
        for name, arguments in SETUPS.items():
            out = _out(work, label, name)
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, "-m", "indexer.cli", "bm25", str(corpus_dir), "--out", str(out), *arguments]
            runs[name].append(_run(command))
    base_wall = min(wall for wall, _ in runs[BASELINE])
    rows = []
    for name, measured in runs.items():
        wall, cpu = min(measured)
        rows.append(
            f"| {snippets:,} | {name} | {wall:.2f} | {cpu:.1f} | {cpu / wall:.2f} | {snippets / wall:,.0f} | "
            f"{base_wall / wall:.2f}x |"
        )
    base_cpu = min(runs[BASELINE])[1]
    return rows, {"snippets": snippets, "cores_used": base_cpu / base_wall}


def _search_rows(corpus_dir: Path, label: str, work: Path, repeats: int) -> tuple[list[str], bool]:
    corpus = Corpus.open(corpus_dir)
    questions = list(query_texts(QUERIES).values())[:500]
    indexes = {name: BM25Index(_out(work, label, name), corpus) for name in list(SETUPS)[::2] + [list(SETUPS)[3]]}
    reference = indexes[BASELINE].search(questions, k=100, threads=2)
    identical = all(index.search(questions, k=100, threads=2) == reference for index in indexes.values())
    rows = []
    for name, index in indexes.items():
        index.search(questions[:50], k=100, threads=2)  # warm-up: the JIT
        best = {threads: float("inf") for threads in (1, 2)}
        for _ in range(repeats):
            for threads in best:
                started = time.perf_counter()
                index.search(questions, k=100, threads=threads)
                best[threads] = min(best[threads], time.perf_counter() - started)
        rows.append(f"| {name} | {len(questions) / best[1]:,.0f} | {len(questions) / best[2]:,.0f} |")
    for index in indexes.values():
        index.close()
    return rows, identical


def bm25_sharded_section(corpora: dict[str, Path], work: Path, repeats: int) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    build_rows, shapes = [], []
    for label, corpus_dir in corpora.items():
        print(f"bm25-sharded: building {label}", flush=True)
        rows, shape = _build_rows(corpus_dir, label, work, repeats)
        build_rows += rows
        shapes.append(shape)
    largest = list(corpora)[-1]
    print("bm25-sharded: searching", flush=True)
    search_rows, identical = _search_rows(corpora[largest], largest, work, repeats)
    cores = os.cpu_count() or 1
    ceilings = ", ".join(
        f"{shape['cores_used']:.2f} cores at {shape['snippets']:,} snippets (ceiling "
        f"{cores / shape['cores_used']:.2f}x)"
        for shape in shapes
    )
    return [
        "## indexer bm25 across workers (groups of shards built in parallel)",
        "",
        f"- corpora: the PubMed benchmark files' snippets (real citations scaled up with new PMIDs), 8 shards; "
        f"best of {repeats}; whole `indexer bm25` process, JVM start-up included",
        "- CPU s: user + system seconds of the process tree; cores = CPU s / wall s",
        "",
        "| snippets | build | wall s | CPU s | cores | snippets/s | vs one run |",
        "|---:|---|---:|---:|---:|---:|---:|",
        *build_rows,
        "",
        f"One IndexCollection run with one indexing thread already keeps {ceilings} busy on this {cores}-core "
        "machine: Java's JIT compilers, the garbage collector and Lucene's concurrent merges run beside the "
        "indexing thread, and each extra JVM pays its own JIT warm-up and GC threads again (the CPU s column). "
        f"No split of the work can beat {cores} cores / (cores one run uses), so the issue's 1.6x at 2 workers "
        f"is out of reach on {cores} cores. On one machine the faster way is `--threads` (one JVM, one "
        "IndexWriter shared by threads); `--workers` groups pay off where each group gets its own cores: on "
        "a bigger machine, or on the nodes of a Ray cluster (`--executor ray`), and their ratio here grows "
        "with corpus size as the fixed per-JVM costs amortize.",
        "",
        f"Search over the {corpora[largest].name} corpus, 500 PubMedQA questions, k=100, queries/s "
        f"(best of {repeats}); hits and scores identical to the single run's for every layout: "
        f"{'yes' if identical else 'NO'}.",
        "",
        "| index | 1 thread | 2 threads |",
        "|---|---:|---:|",
        *search_rows,
        "",
    ]
