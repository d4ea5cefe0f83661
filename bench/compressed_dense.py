"""Dense indexes that fit (run_benchmarks.py --only compressed-dense): IVF-PQ codes in memory, re-ranked
exactly from the float16 embeddings the indexer keeps on disk, chosen from a measured curve, then served
as MedRAG's RRF-4 (BM25 + three 768-d dense indexes) at 2M snippets over gRPC.

- **Text**: 2,082,370 PubMed snippets, citations recombined from real sentences under new PMIDs
  (bench/recombined_pubmed.py; the corpus of the retrieval-scale section), 16 shards, built by the real
  commands (`corpusbuild pubmed`, `indexer store`, `indexer bm25`).
- **Vectors**: three 768-d static encoders of real text (bench/static_views.py: the bundled MiniLM's
  token table seen two ways at once), each embedded by `indexer dense --index-factory 'IVF{lists},PQ96'
  --refine R`. Not MedCPT's, Contriever's or SPECTER's rankings, nor a transformer's encoding cost.
- **Queries**: the 500 PubMedQA questions, encoded by the same static encoders.
- **Curve**: at 0.1M, 0.5M and 2M vectors (the first n rows of the 2M embeddings: shards are filled by
  hash, so a prefix is a sample of the whole) and PQ 48/64/96 bytes, recall@10 against exact inner-product
  search over the same float16 embeddings, by nprobe and re-ranking factor, with the in-process search
  time per query and the bytes per snippet that must stay resident (codes + ids + the shared coarse
  quantizer). One IVF-PQ over all n vectors: the same hits as the sharded index (its shards share one
  quantizer and codebooks, and per-shard candidate lists merge exactly).
- **Served**: searchd over the 2M root (store, BM25, three dense), default retrievers and fusion from its
  serve.json (MedRAG's: per retriever the corpora merged by score, RRF k = 100), one client over gRPC,
  warm (after a pass over the questions) and cold (page cache dropped with /proc/sys/vm/drop_caches,
  searchd started again, each question's first call); resident memory from /proc and fincore.

Everything is kept in bench/work/compressed-dense, so a stopped run continues. Returns markdown lines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
FILES = 35  # recombined files of 30,000 citations: 2,082,370 snippets
SHARDS = 16
SIZES = (100_000, 500_000, None)  # None: every vector (2M)
PQ_BYTES = (48, 64, 96)
NPROBES = (16, 32, 64, 128)
REFINES = (1, 2, 5, 10, 20)
K = 10
TARGET_RECALL, TARGET_BYTES = 0.95, 150
DIMENSION = 768
VIEWS = ("mean-input", "cls-input", "mean-cls")
MEDCORP_SNIPPETS = 54_200_000


def _run(command: list, log: Path) -> float:
    started = time.perf_counter()
    with open(log, "a") as handle:
        subprocess.run([sys.executable, *map(str, command)], check=True, cwd=REPO, stdout=handle, stderr=handle)
    return time.perf_counter() - started


def build_root(work: Path, pq: int, refine: int, nprobe: int) -> tuple[Path, dict]:
    """The 2M root: corpus, store, BM25 and one dense index per static view; (root, seconds per stage)."""
    import scale_retrieval
    from recombined_pubmed import SentencePool
    from static_views import make_static_views

    root = work / "root-2M"
    corpus = root / "pubmed"
    log = work / "commands.log"
    seconds_path = work / "seconds.json"
    seconds = orjson.loads(seconds_path.read_bytes()) if seconds_path.is_file() else {}
    files = scale_retrieval._files(work, FILES)
    if not (corpus / "build.json").is_file():
        seconds["corpusbuild"] = _run(["-m", "corpusbuild", "pubmed", *files, "--out", corpus, "--shards", SHARDS,
                                       "--workers", 2, "--quiet"], log)  # fmt: skip
        shutil.rmtree(corpus / ".work", ignore_errors=True)  # kept work is for updates; not measured here
    for stage, args in (("store", []), ("bm25", ["--threads", 2])):
        if not (corpus / stage / "build.json").is_file():
            seconds[stage] = _run(["-m", "indexer.cli", stage, corpus, *args], log)
    pool = SentencePool(sorted((REPO / "samples" / "pubmed").iterdir()),
                        [REPO / "samples" / "ir" / "pubmedqa-beir" / "corpus.jsonl"])  # fmt: skip
    models = make_static_views(work, pool.titles + pool.sentences)
    for view, model in zip(VIEWS, models.values(), strict=True):
        out = corpus / f"dense-{view}"
        record = out / "build.json"
        params = orjson.loads(record.read_bytes())["params"] if record.is_file() else {}
        factory = f"IVF{{lists}},PQ{pq}"
        if (params.get("index_factory"), params.get("refine"), params.get("nprobe")) != (factory, refine, nprobe):
            _run(["-m", "indexer.cli", "dense", corpus, "--model", model, "--pooling", "static", "--normalize",
                  "--max-length", 512, "--query-max-length", 512, "--batch-size", 4096, "--index-factory", factory,
                  "--refine", refine, "--nprobe", nprobe, "--out", out], log)  # fmt: skip
        run = orjson.loads(record.read_bytes())["run"]["seconds"]
        seconds.setdefault(f"dense-{view}", {"embed": run["embed"], "index": run["index"]})
    seconds_path.write_bytes(orjson.dumps(seconds))
    serve = {"retrievers": ["bm25", *(f"dense-{view}" for view in VIEWS)], "fusion": "medrag", "rrf_k": 100}
    (root / "serve.json").write_text(json.dumps(serve))
    return root, seconds


def _questions() -> list[str]:
    from medsnip.queries import query_texts

    return list(query_texts(QUERIES).values())


def _embeddings(dense: Path) -> np.ndarray:
    """Every shard's float16 embeddings in corpus row order, as float32."""
    record = orjson.loads((dense / "build.json").read_bytes())
    return np.concatenate([np.load(dense / entry["embeddings"]).astype(np.float32) for entry in record["shards"]])


def _exact(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact top-K rows per query by inner product (blocks of 262,144 rows)."""
    best_scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), K), dtype=np.int64)
    for start in range(0, len(vectors), 1 << 18):
        scores = queries @ vectors[start : start + (1 << 18)].T
        rows = np.argpartition(-scores, K, axis=1)[:, :K] if scores.shape[1] > K else np.argsort(-scores, axis=1)
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, rows, axis=1)], axis=1)
        merged_rows = np.concatenate([best_rows, rows + start], axis=1)
        keep = np.argsort(-merged_scores, axis=1)[:, :K]
        best_scores = np.take_along_axis(merged_scores, keep, axis=1)
        best_rows = np.take_along_axis(merged_rows, keep, axis=1)
    return best_rows


def _curve_at(vectors: np.ndarray, queries: np.ndarray, exact: np.ndarray) -> dict:
    """recall@10, in-process ms per query and resident bytes per snippet for each PQ size, nprobe and
    re-ranking factor, over one IVF-PQ index of `vectors` (coarse quantizer trained once)."""
    import faiss

    from indexer.dense import TRAIN_SAMPLE_SEED, lists_for, training_sample_size

    count = len(vectors)
    lists = lists_for(count)
    rng = np.random.default_rng(TRAIN_SAMPLE_SEED)
    sample = vectors[np.sort(rng.choice(count, size=training_sample_size(count, lists), replace=False))]
    coarse = faiss.index_factory(DIMENSION, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
    started = time.perf_counter()
    coarse.train(sample)
    result = {"lists": lists, "coarse_train_s": time.perf_counter() - started, "pq": {}}
    quantizer = faiss.extract_index_ivf(coarse).quantizer
    for pq in PQ_BYTES:
        index = faiss.IndexIVFPQ(quantizer, DIMENSION, lists, pq, 8, faiss.METRIC_INNER_PRODUCT)
        index.do_polysemous_training = False  # as indexer.dense builds them
        started = time.perf_counter()
        index.train(sample)  # the quantizer is trained: only the codebooks are
        train_s = time.perf_counter() - started
        started = time.perf_counter()
        index.add(vectors)
        add_s = time.perf_counter() - started
        resident = pq + 8 + lists * DIMENSION * 4 / count  # codes, ids, one shared quantizer
        cells = {}
        for nprobe in NPROBES:
            index.nprobe = nprobe
            for refine in REFINES:
                started = time.perf_counter()
                _, rows = index.search(queries, K * refine)
                if refine > 1:
                    rows = _rescored(vectors, queries, rows)
                seconds = time.perf_counter() - started
                recall = np.mean([len(set(found[:K].tolist()) & set(truth.tolist())) / K
                                  for found, truth in zip(rows, exact, strict=True)])  # fmt: skip
                cells[f"{nprobe}/{refine}"] = {"recall": float(recall), "ms": seconds * 1000 / len(queries)}
        result["pq"][str(pq)] = {"train_s": train_s, "add_s": add_s, "resident_bytes": resident, "cells": cells}
        del index
    return result


def _rescored(vectors: np.ndarray, queries: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Candidate rows re-ranked by exact inner product (what DenseIndex does from the mapped embeddings)."""
    out = np.empty_like(rows)
    for query, candidates in enumerate(rows):
        valid = candidates[candidates >= 0]
        scores = vectors[valid] @ queries[query]
        order = np.argsort(-scores, kind="stable")
        out[query, : len(valid)] = valid[order]
        out[query, len(valid) :] = -1
    return out


def measure_curve(work: Path, root: Path) -> dict:
    from medsnip.encoders import DenseEncoder, EncoderSpec

    path = work / "curve.json"
    curve = orjson.loads(path.read_bytes()) if path.is_file() else {}
    dense = root / "pubmed" / f"dense-{VIEWS[0]}"
    spec = EncoderSpec.from_dict(orjson.loads((dense / "encoder.json").read_bytes()))
    queries = DenseEncoder(spec, queries_only=True).encode_queries(_questions()).astype(np.float32)
    vectors = None
    for size in SIZES:
        if vectors is None:
            vectors = _embeddings(dense)
        count = size or len(vectors)
        label = f"{count:,}"
        if label in curve:
            continue
        print(f"compressed dense: curve at {label} vectors", flush=True)
        part = vectors[:count]
        exact = _exact(part, queries)
        curve[label] = {"vectors": count, **_curve_at(part, queries, exact)}
        path.write_bytes(orjson.dumps(curve, option=orjson.OPT_INDENT_2))
    return curve


def choose(curve: dict) -> dict:
    """The recipe's defaults from the curve at the largest size: among the settings that reach
    TARGET_RECALL within TARGET_BYTES resident, the fastest; ties go to fewer bytes."""
    largest = curve[max(curve, key=lambda label: curve[label]["vectors"])]
    fits = []
    for pq, entry in largest["pq"].items():
        if entry["resident_bytes"] > TARGET_BYTES:
            continue
        for key, cell in entry["cells"].items():
            if cell["recall"] >= TARGET_RECALL:
                nprobe, refine = map(int, key.split("/"))
                fits.append((cell["ms"], entry["resident_bytes"], int(pq), nprobe, refine, cell["recall"]))
    if not fits:
        return {}
    ms, resident, pq, nprobe, refine, recall = min(fits)
    return {"pq": pq, "nprobe": nprobe, "refine": refine, "recall": recall, "ms": ms, "resident_bytes": resident}


def _memory(pid: int) -> dict:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            values[key] = int(line.split()[1]) * 1024
    return values


def _cached_bytes(paths: list[Path]) -> int:
    """Bytes of these files in the page cache (fincore, util-linux)."""
    found = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, paths)],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return sum(int(value) for value in found)


def _index_files(root: Path) -> dict[str, list[Path]]:
    corpus = root / "pubmed"
    store = [path for path in (corpus / "store").rglob("*") if path.is_file()]
    groups = {"bm25": [path for path in (corpus / "bm25").rglob("*") if path.is_file()],
              "shards + store": [*corpus.glob("shard-*"), *store]}  # fmt: skip
    for view in VIEWS:
        groups[f"dense-{view}: codes"] = sorted((corpus / f"dense-{view}").glob("faiss-*"))
        groups[f"dense-{view}: embeddings"] = sorted((corpus / f"dense-{view}").glob("emb-*.npy"))
    return groups


def _drop_caches() -> bool:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:  # not root: the cold pass is then only as cold as the machine's memory pressure makes it
        return False


def _latencies(address: str, questions: list[str]) -> list[float]:
    from searchd.client import SearchClient

    found = []
    with SearchClient(address, retries=0) as client:
        for question in questions:
            started = time.perf_counter()
            client.search(question, k=K)  # the root's served retrievers and fusion (serve.json)
            found.append((time.perf_counter() - started) * 1000)
    return found


def _summary(latencies: list[float]) -> dict:
    quantiles = statistics.quantiles(latencies, n=100)
    return {"p50": quantiles[49], "p99": quantiles[98], "mean": statistics.fmean(latencies), "count": len(latencies)}


def measure_served(root: Path) -> dict:
    """Cold pass (caches dropped, fresh server), then warm passes, one client; memory and cache use."""
    from searchd.launch import start_background_server

    questions = _questions()
    files = _index_files(root)
    served: dict = {"dropped_caches": _drop_caches()}
    started = time.perf_counter()
    process, address = start_background_server(root, "--jvm-heap", "1g")
    served["start_s"] = time.perf_counter() - started
    try:
        served["cold"] = _summary(_latencies(address, questions[:250]))
        _latencies(address, questions)  # every question once: what they touch is in the page cache now
        served["warm"] = _summary(_latencies(address, questions))
        served["memory"] = _memory(process.pid)
        served["cached"] = {name: _cached_bytes(paths) for name, paths in files.items()}
        served["files"] = {name: sum(p.stat().st_size for p in paths) for name, paths in files.items()}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    return served


def measure(work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "results.json"
    results = orjson.loads(results_path.read_bytes()) if results_path.is_file() else {}
    save = lambda: results_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))  # noqa: E731
    first_root = work / "root-2M"
    if "curve" not in results:
        root, _ = build_root(work, pq=96, refine=10, nprobe=64)  # the embeddings the curve reads
        results["curve"] = measure_curve(work, root)
        save()
    results["choice"] = choice = choose(results["curve"]) or {"pq": 96, "nprobe": 64, "refine": 10}
    save()
    root, seconds = build_root(work, pq=choice["pq"], refine=choice["refine"], nprobe=choice["nprobe"])
    assert root == first_root
    results["seconds"] = seconds
    if "served" not in results or results["served"].get("choice") != choice:
        results["served"] = {**measure_served(root), "choice": choice}
        save()
    results["snippets"] = orjson.loads((root / "pubmed" / "build.json").read_bytes())["counts"]["snippets"]
    save()
    return results
