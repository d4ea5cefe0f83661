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
# searched as MedRAG searches MedCPT, Contriever (inner product) and SPECTER (L2 distance: another FAISS
# scan, residual tables per list); the vectors are unit length, so L2 ranks as inner product does
METRICS = {"mean-input": "ip", "cls-input": "ip", "mean-cls": "l2"}
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
    from static_views import make_static_views, static_dense_command

    root = work / "root-2M"
    corpus = root / "pubmed"
    log = work / "commands.log"
    seconds_path = work / "seconds.json"
    seconds = orjson.loads(seconds_path.read_bytes()) if seconds_path.is_file() else {}
    files = scale_retrieval._files(work, FILES)
    if not (corpus / "build.json").is_file():
        seconds["corpusbuild"] = _run(
            ["-m", "corpusbuild", "pubmed", *files, "--out", corpus, "--shards", SHARDS, "--workers", 2, "--quiet"], log
        )
        shutil.rmtree(corpus / ".work", ignore_errors=True)  # kept work is for updates; not measured here
    for stage, args in (("store", []), ("bm25", ["--threads", 2])):
        if not (corpus / stage / "build.json").is_file():
            seconds[stage] = _run(["-m", "indexer.cli", stage, corpus, *args], log)
    pool = SentencePool(
        sorted((REPO / "samples" / "pubmed").iterdir()), [REPO / "samples" / "ir" / "pubmedqa-beir" / "corpus.jsonl"]
    )
    models = make_static_views(work, pool.titles + pool.sentences)
    for view, model in zip(VIEWS, models.values(), strict=True):
        out = corpus / f"dense-{view}"
        record = out / "build.json"
        params = orjson.loads(record.read_bytes())["params"] if record.is_file() else {}
        factory = f"IVF{{lists}},PQ{pq}"
        wanted = (factory, refine, nprobe, METRICS[view])
        if (params.get("index_factory"), params.get("refine"), params.get("nprobe"), params.get("metric")) != wanted:
            command = static_dense_command(corpus, model, factory, out)
            _run([*command, "--refine", refine, "--nprobe", nprobe, "--metric", METRICS[view]], log)
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
                recall = np.mean(
                    [
                        len(set(found[:K].tolist()) & set(truth.tolist())) / K
                        for found, truth in zip(rows, exact, strict=True)
                    ]
                )
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
    found = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sum(int(value) for value in found)


def _index_files(root: Path) -> dict[str, list[Path]]:
    corpus = root / "pubmed"
    store = [path for path in (corpus / "store").rglob("*") if path.is_file()]
    groups = {
        "bm25": [path for path in (corpus / "bm25").rglob("*") if path.is_file()],
        "shards + store": [*corpus.glob("shard-*"), *store],
    }
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


# -- the report --

# MedCorp's corpora (MedRAG: PubMed 23.9M, StatPearls 0.3M, textbooks 0.125M, Wikipedia 29.9M snippets):
# each gets its own dense index and coarse quantizer (lists sized to it)
MEDCORP_CORPORA = {"pubmed": 23_900_000, "statpearls": 301_000, "textbooks": 126_000, "wikipedia": 29_900_000}
BERT_BASE_QUERY_ENCODER_BYTES = 110_000_000 * 4  # MedCPT's query encoder, Contriever, SPECTER: float32 weights
JVM_HEAP = 1 << 30  # searchd --jvm-heap 1g
MACHINE = 64e9


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---:"] * len(header)) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


def _curve_lines(curve: dict) -> list[str]:
    lines = []
    for label, entry in sorted(curve.items(), key=lambda item: item[1]["vectors"]):
        lines += [
            f"**{label} vectors**, IVF{entry['lists']} (coarse quantizer trained in "
            f"{entry['coarse_train_s']:.0f} s). Cells: recall@10 (in-process ms per query, batch of 500).",
            "",
        ]
        rows = []
        for pq, result in entry["pq"].items():
            for nprobe in NPROBES:
                cells = [
                    f"{result['cells'][f'{nprobe}/{r}']['recall']:.3f} ({result['cells'][f'{nprobe}/{r}']['ms']:.2f})"
                    for r in REFINES
                ]
                rows.append([f"PQ{pq}", f"{result['resident_bytes']:.0f}", str(nprobe), *cells])
        lines += _table(
            ["codes", "resident B/snippet", "nprobe", *(f"refine {r}" if r > 1 else "no refine" for r in REFINES)], rows
        )
    return lines


def _sizing(results: dict) -> tuple[list[list[str]], float]:
    """Rows of the MedCorp RRF-4 sizing model and its resident total (bytes)."""
    from indexer.dense import lists_for

    choice, served, n = results["choice"], results["served"], results["snippets"]
    per_snippet = choice["pq"] + 8
    quantizers = sum(lists_for(count) * DIMENSION * 4 for count in MEDCORP_CORPORA.values())
    dense_resident = 3 * (MEDCORP_SNIPPETS * per_snippet + quantizers)
    bm25_files = served["files"]["bm25"]
    bm25_hot = served["cached"]["bm25"] / bm25_files  # share of BM25's files the questions touched at 2M
    bm25_resident = bm25_hot * bm25_files / n * MEDCORP_SNIPPETS
    process = served["memory"]["RssAnon"]
    encoders = 3 * BERT_BASE_QUERY_ENCODER_BYTES
    total = dense_resident + bm25_resident + process + encoders + JVM_HEAP
    refine_rows = 3 * choice["refine"] * K * 4096  # pages a query reads from the mapped embeddings, at most
    rows = [
        [
            "3 dense indexes: IVF-PQ codes + ids",
            _gb(3 * MEDCORP_SNIPPETS * per_snippet),
            f"projected: {per_snippet} B/snippet (PQ{choice['pq']} + 8-byte id, measured in the file layout at 2M) x "
            f"54.2M x 3",
        ],
        [
            "3 dense indexes: coarse quantizers (one per corpus)",
            _gb(3 * quantizers),
            "projected: lists sized to each corpus (4 sqrt(n), IVF16384 for PubMed and Wikipedia) x 768 x 4 B",
        ],
        [
            "BM25: the part of Lucene's files queries touch",
            _gb(bm25_resident),
            f"projected: {bm25_hot:.0%} of the BM25 files were in the page cache after 1,000 questions at 2M "
            f"(fincore), times MedCorp's BM25 size ({_gb(bm25_files / n * MEDCORP_SNIPPETS)} at the measured "
            "bytes per snippet)",
        ],
        [
            "searchd process (Python, gRPC, torch, FAISS)",
            _gb(process),
            "measured: anonymous RSS at 2M with three static query encoders",
        ],
        [
            "3 BERT-base query encoders (MedCPT, Contriever, SPECTER)",
            _gb(encoders),
            "projected: 110M float32 weights each",
        ],
        ["JVM heap (Lucene)", _gb(JVM_HEAP), "the bound searchd sets (--jvm-heap 1g)"],
        [
            "**resident total**",
            f"**{_gb(total)}**",
            f"target <= 51 GB; {MACHINE / 1e9:.0f} GB machine: {_gb(MACHINE - total)} left for the page cache",
        ],
        [
            "page cache a query reads from the embeddings",
            f"{refine_rows / 1e6:.1f} MB",
            "at most refine x k rows x 3 indexes, one 4 KB page each; evictable (the cold column below is its cost)",
        ],
        [
            "disk: 3 x float16 embeddings (the re-ranking vectors)",
            _gb(3 * MEDCORP_SNIPPETS * DIMENSION * 2),
            "projected: 1,536 B/snippet x 54.2M x 3, kept by the indexer anyway (updates re-use them)",
        ],
        [
            "disk: 3 x IVF-PQ files",
            _gb(3 * MEDCORP_SNIPPETS * per_snippet + 3 * quantizers * 16),
            "projected: codes + ids, and a quantizer copy in each shard file (16-64 shards)",
        ],
        [
            "disk: BM25 + shards + store",
            _gb((bm25_files + served["files"]["shards + store"]) / n * MEDCORP_SNIPPETS),
            "projected: bytes per snippet measured at 2M x 54.2M",
        ],
    ]
    return rows, total


def compressed_dense_section(work: Path) -> list[str]:
    results = measure(work)
    choice, served, n = results["choice"], results["served"], results["snippets"]
    curve = results["curve"]
    largest = curve[max(curve, key=lambda label: curve[label]["vectors"])]
    cell = largest["pq"][str(choice["pq"])]["cells"][f"{choice['nprobe']}/{choice['refine']}"]
    doc = (__doc__ or "").split("\n\n")
    lines = [
        "## Dense indexes that fit: IVF-PQ re-ranked from mapped embeddings, RRF-4 served at 2M",
        "",
        f"`run_benchmarks.py --only compressed-dense` (bench/compressed_dense.py), {n:,} snippets.",
        "",
        *doc[1].splitlines(),
        "",
    ]
    resident = 3 * choice["resident_bytes"]
    lines += [
        "**Against the targets** (2M point, 768 d):",
        "",
        f"- recall@10 against exact search: {cell['recall']:.3f} with `IVF{largest['lists']},PQ{choice['pq']}`, nprobe "
        f"{choice['nprobe']}, refine {choice['refine']} (target >= {TARGET_RECALL})",
        f"- resident bytes per snippet per dense index: {choice['resident_bytes']:.0f} (target <= {TARGET_BYTES}); "
        f"{resident:.0f} for the three",
        f"- hybrid RRF-4 over gRPC, one client, warm: p50 {served['warm']['p50']:.1f} ms, p99 "
        f"{served['warm']['p99']:.1f} ms (targets < 50 / < 200 ms); cold (caches dropped: "
        f"{'yes' if served['dropped_caches'] else 'no'}, searchd restarted, {served['cold']['count']} first calls): "
        f"p50 {served['cold']['p50']:.1f} ms, p99 {served['cold']['p99']:.1f} ms",
        f"- the recipe's defaults (manifests/medcorp-2026.toml): PQ{choice['pq']}, refine {choice['refine']}, nprobe "
        f"{choice['nprobe']}: of the settings at or above {TARGET_RECALL} recall and within {TARGET_BYTES} B, the "
        "fastest at the largest size",
        "",
    ]
    lines += ["### The curve: recall@10, search time and resident bytes by PQ size, nprobe and re-ranking", ""]
    lines += _curve_lines(curve)
    lines += [
        "### Served at 2M: memory and page cache after the warm passes",
        "",
        f"searchd started in {served['start_s']:.1f} s; RSS anonymous {served['memory']['RssAnon'] / 2**20:,.0f} MiB, "
        f"file-backed {served['memory']['RssFile'] / 2**20:,.0f} MiB.",
        "",
    ]
    lines += _table(
        ["files", "on disk", "in the page cache", "share"],
        [
            [name, _gb(size), _gb(served["cached"][name]), f"{served['cached'][name] / size:.0%}"]
            for name, size in served["files"].items()
        ],
    )
    seconds = results["seconds"]
    lines += ["### Build time per stage at 2M (this machine, 2 cores)", ""]
    rows = [[stage, f"{value:.0f}"] for stage, value in seconds.items() if not isinstance(value, dict)]
    rows += [
        [f"{stage}: embed / index", f"{value['embed']:.0f} / {value['index']:.0f}"]
        for stage, value in seconds.items()
        if isinstance(value, dict)
    ]
    lines += _table(["stage", "seconds"], rows)
    sizing, total = _sizing(results)
    lines += [
        "## MedCorp RRF-4 on one 64 GB machine: sizing model",
        "",
        "MedCorp: 54.2M snippets in four corpora (PubMed 23.9M, StatPearls 0.3M, textbooks 0.1M, Wikipedia "
        "29.9M), BM25 + MedCPT + Contriever + SPECTER (768 d), served as manifests/medcorp-2026.toml declares. "
        "From the measured curve and served root above; each line says what is measured and what projected.",
        "",
    ]
    lines += _table(["what", "MedCorp RRF-4", "from"], sizing)
    scanned_2m = choice["nprobe"] * n / largest["lists"]
    scanned_medcorp = choice["nprobe"] * sum(count / lists_for_count(count) for count in MEDCORP_CORPORA.values())
    lines += [
        "**Query latency at MedCorp** (projected): the dense part scans nprobe x n / lists codes per index, "
        f"{scanned_medcorp:,.0f} at MedCorp against {scanned_2m:,.0f} at 2M ({scanned_medcorp / scanned_2m:.1f}x), "
        f"and re-ranks the same {choice['refine'] * K} rows; BM25's postings grow with the corpus (Lucene's "
        "block-max WAND skips most of them for a top-100). Measured at 2M: warm p50 "
        f"{served['warm']['p50']:.1f} ms; a machine with more cores runs the three dense searches and BM25 side by "
        "side (searchd batches each retriever on its own thread).",
        "",
        "**Build time per stage** on N CPU workers and one GPU: the scale model above (rates measured per core and "
        "per H100) applies unchanged to corpusbuild, BM25, the store and embedding (x3 encoders). The FAISS step: "
        f"at 2M, {largest['pq'][str(choice['pq'])]['train_s']:.0f} s to train PQ{choice['pq']} codebooks and "
        f"{largest['pq'][str(choice['pq'])]['add_s']:.0f} s to encode 2M vectors on 2 cores (in-process curve); at "
        "MedCorp (projected) encoding grows with n (27x), training with the sample (40 vectors a list) x lists "
        "(IVF16384: 16x the 2M training work, on a GPU with faiss-gpu).",
        "",
    ]
    results["sizing_total"] = total
    return lines


def lists_for_count(count: int) -> int:
    from indexer.dense import lists_for

    return lists_for(count)
