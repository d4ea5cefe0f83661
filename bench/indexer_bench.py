"""The indexer's benchmarks (run by run_benchmarks.py --only indexer): BM25 indexing against Anserini's
IndexCollection on the same files, BM25 batch search, CPU embedding. FAISS index types are compared at
scale, on real-text vectors, in scale_retrieval.py. Each function returns markdown lines."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from indexer.bm25 import BM25Index  # noqa: E402
from indexer.bm25.anserini import index_collection_command  # noqa: E402
from medsnip.corpus import Corpus  # noqa: E402
from medsnip.encoders import DenseEncoder, preset  # noqa: E402
from medsnip.queries import query_texts  # noqa: E402

QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
FAISS_VECTORS = 100_000
FAISS_SEED = 20261122
NOISE_SIGMA = 0.05  # per dimension; copies of one vector stay neighbours without being near-identical


def _timed_cpu(command: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _timed(command: list[str]) -> float:
    """Wall seconds of one run."""
    return _timed_cpu(command)[0]


def _shard_copies(corpus: Corpus, copies: Path) -> Path:
    """Copies of a corpus's shards in a folder of their own: what Anserini's IndexCollection reads directly."""
    shutil.rmtree(copies, ignore_errors=True)
    copies.mkdir(parents=True)
    for shard in corpus.shards:
        shutil.copy(shard.path, copies / shard.path.name)
    return copies


def bm25_section(corpus_dir: Path, work: Path, repeats: int) -> list[str]:
    corpus = Corpus.open(corpus_dir)
    copies = _shard_copies(corpus, work / "anserini-input")
    ours, direct = [], []
    for _ in range(repeats):
        out = corpus_dir / "bm25"
        ours.append(_timed([sys.executable, "-m", "indexer.cli", "bm25", str(corpus_dir), "--out", str(out)]))
        target = work / "anserini-index"
        shutil.rmtree(target, ignore_errors=True)
        direct.append(_timed(index_collection_command(copies, target, 1)))
    ours_rate, direct_rate = corpus.snippets / min(ours), corpus.snippets / min(direct)
    index = BM25Index.open(corpus_dir / "bm25")
    questions = list(query_texts(QUERIES).values())
    search: dict[tuple[str, int], float] = {}
    ways = {
        "pyserini": lambda t: index._search_hit_by_hit(questions, 100, t),
        "medsnip": lambda t: index.search(questions, k=100, threads=t),
    }
    index.search(questions[:50], k=100, threads=2)  # warm-up: the JVM's JIT
    assert index.search(questions, k=100, threads=2) == index._search_hit_by_hit(questions, 100, 2), "hits differ"
    for _ in range(repeats):
        for threads in (1, 2):
            for way, run in ways.items():
                started = time.perf_counter()
                run(threads)
                rate = len(questions) / (time.perf_counter() - started)
                search[(way, threads)] = max(search.get((way, threads), 0.0), rate)
    return [
        "## indexer bm25",
        "",
        f"- corpus: the PubMed benchmark file's {corpus.snippets:,} snippets (30,000 real citations scaled up "
        "with new PMIDs, built by corpusbuild pubmed into 8 shards)",
        f"- best of {repeats}; whole process wall time, JVM start included; both with 1 indexing thread, "
        "positions and doc vectors stored",
        "",
        "| indexer | wall s | snippets/s | vs Anserini |",
        "|---|---:|---:|---:|",
        f"| Anserini IndexCollection run directly on copies of the shards | {min(direct):.2f} | {direct_rate:,.0f} "
        "| 1.00x |",
        f"| `indexer bm25` (links to the shards, count check, build.json) | {min(ours):.2f} | {ours_rate:,.0f} | "
        f"{ours_rate / direct_rate:.2f}x |",
        "",
        "Target: at least 0.9x Anserini's own rate.",
        "",
        f"Batch search, {len(questions)} PubMedQA questions, k=100, best of {repeats}: pyserini's "
        "`LuceneSearcher.batch_search` with each hit's docid and score read (what a pyserini user writes), "
        "against `BM25Index.search`, medsnip's FlatSearcher: each query as Anserini's SimpleSearcher runs it, "
        "the hit ids read from the doc values its tie-breaking sort reads rather than from each hit's stored "
        "document, and the batch handed to Python in three JNI conversions (identical hits and float32 scores, "
        "checked here):",
        "",
        "| threads | pyserini queries/s | medsnip queries/s | speed-up |",
        "|---:|---:|---:|---:|",
        *(
            f"| {threads} | {search[('pyserini', threads)]:,.0f} | {search[('medsnip', threads)]:,.0f} | "
            f"{search[('medsnip', threads)] / search[('pyserini', threads)]:.1f}x |"
            for threads in (1, 2)
        ),
        "",
    ]


def embedding_section(corpus_dir: Path, count: int) -> list[str]:
    """CPU embedding rate of real snippets."""
    import orjson
    import torch

    corpus = Corpus.open(corpus_dir)
    snippets = []
    for shard in corpus.shards:
        for line in shard.path.read_bytes().splitlines():
            snippets.append(orjson.loads(line))
            if len(snippets) == count:
                break
        if len(snippets) == count:
            break
    encoder = DenseEncoder(preset("minilm"), device="cpu")
    encoder.encode_snippets(snippets[:32])  # warm-up
    started = time.perf_counter()
    encoder.encode_snippets(snippets, batch_size=64)
    seconds = time.perf_counter() - started
    mean_chars = sum(len(s["contents"]) for s in snippets) / len(snippets)
    lines = [
        "## indexer dense: embedding",
        "",
        f"- {len(snippets):,} real PubMed snippets (mean {mean_chars:.0f} characters), all-MiniLM-L6-v2 "
        f"(6 layers, 22M parameters, 256 tokens), batch 64, sorted by length, torch {torch.__version__} "
        f"on {torch.get_num_threads()} CPU threads",
        "",
        "| device | snippets/s |",
        "|---|---:|",
        f"| CPU (this machine) | {len(snippets) / seconds:,.1f} |",
        "",
        "No GPU was lent to the session that wrote this file, so the GPU target (>= 10,000 snippets/s for a "
        "110M-parameter BERT in fp16 on one H100) is not measured here; `indexer dense --device cuda` (half "
        "precision by default) is the path it will be measured on.",
        "",
    ]
    return lines


def small_bm25_section(corpora: list[Path], work: Path, repeats: int) -> list[str]:
    """`indexer bm25` on small corpora (a daily update's, a test's, a demo's), where the JVM's start is most of
    the work: against Anserini's IndexCollection run directly (a plain JVM), and against itself with the class
    cache off (MEDSNIP_JVM_AOT=off). The quick compiler (below 8 MB of input) applies to every indexer row."""
    import os

    from indexer.bm25.anserini import QUICK_COMPILER_BELOW_BYTES

    rows = []
    for corpus_dir in corpora:
        corpus = Corpus.open(corpus_dir)
        copies = _shard_copies(corpus, work / "small-anserini-input")
        size = sum(shard.path.stat().st_size for shard in corpus.shards)
        ours_command = [sys.executable, "-m", "indexer.cli", "bm25", str(corpus_dir), "--out", str(corpus_dir / "bm25")]
        target = work / "small-anserini-index"
        runs: dict[str, list[tuple[float, float]]] = {"direct": [], "cache": [], "no cache": []}
        subprocess.run(ours_command, check=True, cwd=REPO, capture_output=True)  # the class cache written once
        for _ in range(repeats):
            shutil.rmtree(target, ignore_errors=True)
            runs["direct"].append(_timed_cpu(index_collection_command(copies, target, 1)))
            runs["cache"].append(_timed_cpu(ours_command))
            runs["no cache"].append(_timed_cpu(ours_command, {**os.environ, "MEDSNIP_JVM_AOT": "off"}))
        best = {name: (min(w for w, _ in found), min(c for _, c in found)) for name, found in runs.items()}
        quick = "C1" if size < QUICK_COMPILER_BELOW_BYTES else "C1+C2"
        rows.append(
            f"| {corpus.snippets:,} snippets, {size / 2**20:.1f} MB "
            f"| {best['direct'][0]:.2f} / {best['direct'][1]:.2f} "
            f"| {best['no cache'][0]:.2f} / {best['no cache'][1]:.2f} | {best['cache'][0]:.2f} / "
            f"{best['cache'][1]:.2f} | {best['direct'][0] / best['cache'][0]:.2f}x / "
            f"{best['direct'][1] / best['cache'][1]:.2f}x | {quick} |"
        )
    return [
        "## indexer bm25 on small corpora: the JVM's start",
        "",
        "- corpora: real PubMed records scaled up with new PMIDs (pubmed_scaleup), built by corpusbuild pubmed "
        "into 2 shards; 1 indexing thread",
        f"- best of {repeats}, runs interleaved; wall / CPU seconds of the whole process and its children "
        "(Python, the JVM); Anserini's run is on copies of the shards",
        "- `indexer bm25` (indexer/jvm_aot.py, indexer/bm25/anserini.py): the JVM maps the machine's class "
        "cache and, below 8 MB of input, runs the quick compiler alone",
        "",
        "| corpus | Anserini IndexCollection s (wall / CPU) | `indexer bm25`, no class cache | `indexer bm25` "
        "| vs Anserini (wall / CPU) | JIT |",
        "|---|---:|---:|---:|---:|---|",
        *rows,
        "",
    ]
