"""The indexer's benchmarks (run by run_benchmarks.py --only indexer): BM25 indexing against Anserini's
IndexCollection on the same files, BM25 batch search, CPU embedding, and FAISS index types compared
on the same vectors. Each function returns markdown lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from indexer.anserini_index import index_collection_command  # noqa: E402
from indexer.bm25 import BM25Index  # noqa: E402
from indexer.encoders import DenseEncoder, preset  # noqa: E402
from medsnip.corpus import Corpus  # noqa: E402
from medsnip.queries import query_texts  # noqa: E402

QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
FAISS_VECTORS = 100_000
FAISS_SEED = 20261122
NOISE_SIGMA = 0.05  # per dimension; copies of one vector stay neighbours without being near-identical


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def bm25_section(corpus_dir: Path, work: Path, repeats: int) -> list[str]:
    corpus = Corpus.open(corpus_dir)
    copies = work / "anserini-input"
    shutil.rmtree(copies, ignore_errors=True)
    copies.mkdir(parents=True)
    for shard in corpus.shards:
        shutil.copy(shard.path, copies / shard.path.name)
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
    ways = {"pyserini": lambda t: index._search_hit_by_hit(questions, 100, t), "medsnip": lambda t: index.search(
        questions, k=100, threads=t)}  # fmt: skip
    index.search(questions[:50], k=100, threads=2)  # warm-up: the JVM's JIT
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
        "against `BM25Index.search`, which runs the same Anserini batch_search and reads the hits through "
        "medsnip's FlatBatchSearch helper (identical hits and scores):",
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


def embedding_section(corpus_dir: Path, count: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """CPU embedding rate of real snippets; returns the lines, the snippet vectors and query vectors."""
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
    vectors = encoder.encode_snippets(snippets, batch_size=64)
    seconds = time.perf_counter() - started
    mean_chars = sum(len(s["contents"]) for s in snippets) / len(snippets)
    queries = encoder.encode_queries(list(query_texts(QUERIES).values()))
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
        "110M-parameter BERT in fp16 on one H100) is not measured here; `indexer dense --device cuda --fp16` "
        "is the path it will be measured on.",
        "",
    ]
    return lines, vectors, queries


def faiss_section(real: np.ndarray, queries: np.ndarray) -> list[str]:
    """Flat vs HNSW32 vs IVF-PQ vs IVF-SQ8 on the same >= 100k vectors."""
    import faiss

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    rng = np.random.default_rng(FAISS_SEED)
    copies = -(-FAISS_VECTORS // len(real))
    base = np.concatenate([real] * copies)[:FAISS_VECTORS].astype(np.float32)
    base += rng.normal(0, NOISE_SIGMA, base.shape).astype(np.float32)  # no exact duplicates (they flatter ANN)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    dimension = base.shape[1]
    k = 10
    flat = faiss.IndexFlatIP(dimension)
    flat.add(base)
    _, truth = flat.search(queries, k)
    rows = []
    settings = {
        "Flat": [None],
        "HNSW32": [("efSearch", 64), ("efSearch", 256)],
        "IVF1024,PQ48": [("nprobe", 16), ("nprobe", 64)],
        "IVF1024,SQ8": [("nprobe", 16), ("nprobe", 64)],
    }
    for factory, parameters in settings.items():  # fmt: skip
        started = time.perf_counter()
        index = faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            index.train(base[rng.choice(len(base), size=min(len(base), 30_000), replace=False)])
        index.add(base)
        build = time.perf_counter() - started
        path = Path("/tmp") / f"medsnip-faiss-{os.getpid()}.index"
        faiss.write_index(index, str(path))
        size = path.stat().st_size
        path.unlink()
        for params in parameters:
            if params:
                faiss.ParameterSpace().set_index_parameter(index, *params)
            started = time.perf_counter()
            for _ in range(3):
                _, found = index.search(queries, k)
            qps = 3 * len(queries) / (time.perf_counter() - started)
            recall = np.mean([len(set(found[i]) & set(truth[i])) / k for i in range(len(queries))])
            rows.append((factory, params, build, qps, recall, size / len(base)))
    lines = [
        "## indexer dense: FAISS index types on the same vectors",
        "",
        f"- {FAISS_VECTORS:,} vectors: {len(real):,} real PubMed snippet embeddings (all-MiniLM-L6-v2, "
        f"{dimension} dims) repeated with seeded Gaussian noise (sigma {NOISE_SIGMA} per dimension, renormalised), "
        "since CPU embedding "
        "here is too slow for 100k real ones; queries: the 500 PubMedQA questions; recall@10 against exact Flat; "
        f"{os.cpu_count()} threads",
        "",
        "| index_factory | search parameter | build s | queries/s | recall@10 | bytes/vector |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for factory, params, build, qps, recall, per_vector in rows:
        parameter = f"{params[0]}={params[1]}" if params else "-"
        lines.append(f"| {factory} | {parameter} | {build:.2f} | {qps:,.0f} | {recall:.3f} | {per_vector:,.0f} |")
    lines += ["", *medcorp_sizing(rows, dimension), ""]
    return lines


def medcorp_sizing(rows, measured_dimension: int) -> list[str]:
    """What MedCorp (54M snippets x 768 dims) needs per index type, scaled from the measured bytes."""
    snippets, dimension = 54_000_000, 768
    gib = 2**30
    recall = {factory: r for factory, _, _, _, r, _ in rows}  # the last (widest-search) setting of each
    sizes = {
        "Flat": snippets * dimension * 4,
        "HNSW32": snippets * (dimension * 4 + 32 * 2 * 4),
        "IVF65536,PQ64": snippets * (64 + 8),
        "IVF65536,SQ8": snippets * (dimension + 8),
    }
    return [
        "### Sizing MedCorp: 54M snippets x 768 dimensions (MedCPT or BGE-base)",
        "",
        "| index | size | one 80 GB GPU | 64 GB RAM | recall@10 measured above (384 dims, 100k) |",
        "|---|---:|---|---|---:|",
        f"| Flat (fp32) | {sizes['Flat'] / gib:,.0f} GiB | no | no | 1.000 |",
        f"| HNSW32 | {sizes['HNSW32'] / gib:,.0f} GiB | no | no | {recall['HNSW32']:.3f} |",
        f"| IVF65536,SQ8 | {sizes['IVF65536,SQ8'] / gib:,.0f} GiB | yes | yes (memory-mapped shards) | "
        f"{recall['IVF1024,SQ8']:.3f} (IVF1024,SQ8) |",
        f"| IVF65536,PQ64 | {sizes['IVF65536,PQ64'] / gib:,.1f} GiB | yes | yes | "
        f"{recall['IVF1024,PQ48']:.3f} (IVF1024,PQ48) |",
        "",
        "Flat needs ~155 GiB (MedRAG's 256 GB RAM); IVF-SQ8 (1 byte per dimension) is the largest that fits one "
        "80 GB GPU or 64 GB of RAM and keeps recall close to Flat; IVF-PQ64 (64 bytes per vector) fits either "
        "many times over at lower recall. Sizes are computed from the per-vector bytes of each type (codes + "
        "8-byte ids; HNSW adds 32 neighbours x 2 levels of 4-byte links); recall is the measurement above at "
        f"{measured_dimension} dims and 100k vectors, which flatters IVF at 54M (more lists needed, same nprobe "
        "fraction). Copies of one real vector form clusters of near neighbours whose order inside the cluster "
        "is decided by the noise, which makes exact top-10 harder for ANN than on real data: read recall as a "
        "lower bound.",
    ]
