"""Retrieval at scale (run_benchmarks.py --only retrieval-scale): one PubMed root built at 100k, 300k,
1M and 2M+ snippets, with BM25 and an IVF dense index, then served.

Text: citations of real sentences recombined under new PMIDs (recombined_pubmed.py), so that every
snippet is distinct. Vectors: a static model distilled from the bundled MiniLM (indexer/dense/static_distill.py)
encodes ~6,000 snippets/s on this machine where MiniLM does ~20: they are real-text vectors in MiniLM's
384-dimension space with a realistic spread, not MiniLM's vectors, and their rankings are worse
(measured below as neighbour overlap with MiniLM). FAISS costs depend on dimension, count and spread,
not on which encoder made the vectors.

Measured per size: wall time of each stage (corpusbuild, store, bm25, dense embedding and indexing),
bytes on disk, recall@10 of the served IVF index against exact search at several nprobe, searchd's
start time and memory, and p50/p99 latency of BM25, dense and hybrid requests at concurrency 1 and 8.
At the largest size the IVF-PQ and OPQ variants are built from the same embeddings. Everything a stage
produced is kept in bench/work/retrieval-scale, so a run that is stopped picks up where it was.
Returns markdown lines.
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
from recombined_pubmed import SentencePool  # noqa: E402
from searchd_bench import _load  # noqa: E402
from static_views import static_dense_command  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
CITATIONS_PER_FILE = 30_000
SIZES = [("100k", 2), ("300k", 6), ("1M", 18), ("2M", 35)]  # (label, files of 30,000 citations)
SHARDS = 16
NPROBES = (1, 4, 8, 16, 32, 64, 128)
TARGET_RECALL = 0.95
K = 10
MEDCORP_SNIPPETS = 54_200_000


def _nlist(snippets: int) -> int:
    """Inverted lists: about 4 sqrt(n), rounded to a power of two, at most 4,096 (k-means over a
    256k-vector sample into more lists costs more than this 2-core machine has time for)."""
    return int(min(4096, 2 ** round(np.log2(4 * np.sqrt(snippets)))))


def _run(command: list, log: Path) -> float:
    started = time.perf_counter()
    with open(log, "a") as handle:
        subprocess.run([sys.executable, *map(str, command)], check=True, cwd=REPO, stdout=handle, stderr=handle)
    return time.perf_counter() - started


def _bytes(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in path.rglob(pattern) if p.is_file())


def _files(work: Path, count: int) -> list[Path]:
    folder = work / "pubmed-xml"
    folder.mkdir(parents=True, exist_ok=True)
    pool = None
    files = []
    for number in range(count):
        path = folder / f"recombined{number:04d}.xml"
        if not path.exists():
            if pool is None:
                pool = SentencePool(
                    sorted((REPO / "samples" / "pubmed").iterdir()),
                    [REPO / "samples" / "ir" / "pubmedqa-beir" / "corpus.jsonl"],
                )
            temp = path.with_suffix(".tmp")
            pool.write_file(temp, 60_000_000 + number * CITATIONS_PER_FILE, CITATIONS_PER_FILE, seed=number)
            os.replace(temp, path)
        files.append(path)
    return files


def _static_model(work: Path) -> Path:
    """The bundled MiniLM distilled to a static model, token frequencies from the bundled abstracts."""
    out = work / "static-minilm"
    if not (out / "model.safetensors").is_file():
        from indexer.dense.static_distill import distill
        from medsnip.encoders import bundled_minilm_path

        pool = SentencePool(
            sorted((REPO / "samples" / "pubmed").iterdir()),
            [REPO / "samples" / "ir" / "pubmedqa-beir" / "corpus.jsonl"],
        )
        distill(bundled_minilm_path(), out.with_suffix(".tmp"), pool.titles + pool.sentences)
        os.replace(out.with_suffix(".tmp"), out)
    return out


def _build(root: Path, files: list[Path], model: Path, result: dict, log: Path) -> None:
    corpus = root / "pubmed"
    stages = result.setdefault("seconds", {})
    if "corpusbuild" not in stages:
        shutil.rmtree(corpus, ignore_errors=True)
        stages["corpusbuild"] = _run(
            ["-m", "corpusbuild", "pubmed", *files, "--out", corpus, "--shards", SHARDS, "--workers", 2, "--quiet"], log
        )
        shutil.rmtree(corpus / ".work", ignore_errors=True)  # kept work is for updates; not measured here
    snippets = result["snippets"] = orjson.loads((corpus / "build.json").read_bytes())["counts"]["snippets"]
    if "store" not in stages:
        stages["store"] = _run(["-m", "indexer.cli", "store", corpus], log)
    if "bm25" not in stages:
        stages["bm25"] = _run(["-m", "indexer.cli", "bm25", corpus, "--threads", 2], log)
    result["nlist"] = nlist = _nlist(snippets)
    if "dense" not in stages:
        factory = f"IVF{nlist},SQ8"
        stages["dense"] = _run(static_dense_command(corpus, model, factory), log)
        record = orjson.loads((corpus / "dense-static" / "build.json").read_bytes())
        stages["dense_embed"], stages["dense_index"] = (
            record["run"]["seconds"]["embed"],
            record["run"]["seconds"]["index"],
        )
    result["bytes"] = {
        "shards": _bytes(corpus, "shard-*.jsonl"),
        "store": _bytes(corpus / "store"),
        "bm25": _bytes(corpus / "bm25"),
        "ivf_sq8": _bytes(corpus / "dense-static", "faiss-*"),
        "embeddings": _bytes(corpus / "dense-static", "emb-*.npy"),
    }


def _variant(corpus: Path, model: Path, name: str, factory: str, log: Path) -> dict:
    """Another dense index over the same embeddings (linked in, so nothing is embedded again)."""
    out = corpus / name
    if not (out / "build.json").is_file():
        out.mkdir(exist_ok=True)
        for source in (corpus / "dense-static").iterdir():
            if source.name.startswith(("emb-", "encoder.json")) and not (out / source.name).exists():
                os.link(source, out / source.name)
        _run(static_dense_command(corpus, model, factory, out), log)
    record = orjson.loads((out / "build.json").read_bytes())
    return {"factory": factory, "seconds": record["run"]["seconds"]["index"], "bytes": _bytes(out, "faiss-*")}


def _sq8_at_768(corpus: Path, nlist: int, work: Path) -> dict:
    """IVF-SQ8 bytes and build time for 768-dimension vectors (MedCPT's, BGE-base's): every 384-d
    embedding written twice side by side, trained on the same seeded sample size, each shard added and
    written, measured, then deleted. Flat at 768 d is measured the same way on the first shard."""
    import faiss

    from indexer.dense import TRAIN_SAMPLE_MAX, TRAIN_SAMPLE_SEED

    paths = sorted((corpus / "dense-static").glob("emb-*.npy"))
    doubled = lambda path: np.tile(np.load(path).astype(np.float32), 2)  # noqa: E731
    rng = np.random.default_rng(TRAIN_SAMPLE_SEED)
    sample = np.concatenate([doubled(p)[rng.random(np.load(p, mmap_mode="r").shape[0]) < 0.125] for p in paths])
    started = time.perf_counter()
    template = faiss.index_factory(768, f"IVF{nlist},SQ8", faiss.METRIC_INNER_PRODUCT)
    template.train(sample[:TRAIN_SAMPLE_MAX])
    total = vectors = 0
    out = work / "sq8-768.index"
    for path in paths:
        index = faiss.clone_index(template)
        block = doubled(path)
        index.add(block)
        faiss.write_index(index, str(out))
        total, vectors = total + out.stat().st_size, vectors + len(block)
    seconds = time.perf_counter() - started
    flat = faiss.IndexFlatIP(768)
    flat.add(doubled(paths[0]))
    faiss.write_index(flat, str(out))
    flat_per_vector = out.stat().st_size / flat.ntotal
    out.unlink()
    return {"sq8_bytes": total, "vectors": vectors, "seconds": seconds, "flat_bytes_per_vector": flat_per_vector}


def _exact_top(corpus: Path, vectors: np.ndarray) -> np.ndarray:
    """Exact top-K (global row numbers) of each query over the float16 embeddings the indexes were
    built from, in chunks (what a Flat index would return)."""
    import faiss

    best_scores = np.full((len(vectors), K), -np.inf, dtype=np.float32)
    best_rows = np.full((len(vectors), K), -1, dtype=np.int64)
    offset = 0
    for path in sorted((corpus / "dense-static").glob("emb-*.npy")):
        block = np.load(path).astype(np.float32)
        scores, rows = faiss.knn(vectors, block, min(K, len(block)), metric=faiss.METRIC_INNER_PRODUCT)
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_rows = np.concatenate([best_rows, rows + offset], axis=1)
        order = np.argsort(-merged_scores, axis=1, kind="stable")[:, :K]
        best_scores = np.take_along_axis(merged_scores, order, 1)
        best_rows = np.take_along_axis(merged_rows, order, 1)
        offset += len(block)
    return best_rows


def _recall(corpus: Path, index_name: str, vectors: np.ndarray, exact: np.ndarray) -> dict:
    """recall@10 against exact search, and in-process search ms/query, per nprobe."""
    from indexer.dense import DenseIndex

    index = DenseIndex.open(corpus / index_name)
    starts = np.cumsum([0] + [shard.records for shard in index.corpus.shards])
    found = {}
    for nprobe in NPROBES:
        started = time.perf_counter()
        hits = index.search_vectors(vectors, K, nprobe=nprobe)
        seconds = time.perf_counter() - started
        rows = [{int(starts[s] + r) for s, r, _ in query_hits} for query_hits in hits]
        recall = float(np.mean([len(got & set(want.tolist())) / K for got, want in zip(rows, exact, strict=True)]))
        found[str(nprobe)] = {"recall": recall, "ms_per_query": 1000 * seconds / len(vectors)}
    return found


def _serve(root: Path, questions: list[str], nprobe: int) -> dict:
    from searchd.launch import start_background_server

    started = time.perf_counter()
    process, address = start_background_server(root, "--nprobe", nprobe)
    served = {"start_s": time.perf_counter() - started, "rss_start_mib": _memory(process.pid)}
    try:
        # one pass over every question first: the page cache then holds what these queries touch, as it
        # would on a server that has been up a while (cold pages are disk reads, not search cost)
        _load(address, questions, 8, ("bm25", "dense"), None, len(questions))
        for mode, retrievers in {"bm25": ("bm25",), "dense": ("dense",), "hybrid": ("bm25", "dense")}.items():
            _load(address, questions, 4, retrievers, None, 40)  # warm-up
            for concurrency, count in ((1, 150), (8, 400)):
                done, errors, latencies, wall = _load(address, questions, concurrency, retrievers, None, count)
                quantiles = statistics.quantiles(latencies, n=100)
                served[f"{mode}@{concurrency}"] = {
                    "qps": done / wall,
                    "p50": quantiles[49],
                    "p99": quantiles[98],
                    "errors": errors,
                }
        served["rss_after_mib"] = _memory(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    return served


def _memory(pid: int) -> dict:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "RssAnon", "RssFile"):
            values[key] = int(line.split()[1]) / 1024
    return values


def _neighbour_overlap(model: Path) -> float:
    """How far the static vectors are from MiniLM's: mean overlap of the 10 nearest neighbours of 200
    PubMedQA abstracts among the 500, by each encoder."""
    from medsnip.encoders import DenseEncoder, EncoderSpec, preset
    from medsnip.snippet import join_contents

    records = [json.loads(line) for line in (REPO / "samples/ir/pubmedqa-beir/corpus.jsonl").read_bytes().splitlines()]
    snippets = [
        {"title": r["title"], "content": r["text"], "contents": join_contents(r["title"], r["text"])} for r in records
    ]
    minilm = DenseEncoder(preset("minilm"), device="cpu").encode_snippets(snippets)
    static = DenseEncoder(EncoderSpec("static", str(model), pooling="static")).encode_snippets(snippets)
    overlap = []
    for query in range(0, len(snippets), max(1, len(snippets) // 200)):
        near = [set(np.argsort(-(vectors @ vectors[query]))[1 : K + 1].tolist()) for vectors in (minilm, static)]
        overlap.append(len(near[0] & near[1]) / K)
    return float(np.mean(overlap))


def measure(work: Path, sizes=SIZES) -> dict:
    from medsnip.encoders import DenseEncoder, EncoderSpec
    from medsnip.queries import query_texts

    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "results.json"
    results = orjson.loads(results_path.read_bytes()) if results_path.is_file() else {}
    save = lambda: results_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))  # noqa: E731
    log = work / "commands.log"
    model = _static_model(work)
    if "neighbour_overlap" not in results:
        results["neighbour_overlap"] = _neighbour_overlap(model)
        save()
    questions = list(query_texts(QUERIES).values())
    encoder = DenseEncoder(EncoderSpec("static", str(model), pooling="static", max_length=512, query_max_length=512))
    vectors = encoder.encode_queries(questions)
    files = _files(work, max(count for _, count in sizes))
    for label, count in sizes:
        result = results.setdefault(label, {"files": count})
        root = work / f"root-{label}"
        print(f"retrieval scale: {label}", flush=True)
        _build(root, files[:count], model, result, log)
        save()
        corpus = root / "pubmed"
        if "recall" not in result:
            exact = _exact_top(corpus, vectors)
            np.save(work / f"exact-{label}.npy", exact)
            result["recall"] = {"ivf_sq8": _recall(corpus, "dense-static", vectors, exact)}
            save()
        nprobe = next(
            (n for n, r in result["recall"]["ivf_sq8"].items() if r["recall"] >= TARGET_RECALL), str(NPROBES[-1])
        )
        result["nprobe"] = int(nprobe)
        if (label, count) == sizes[-1] and "variants" not in result:
            exact = np.load(work / f"exact-{label}.npy")
            variants = {}
            for name, factory in (
                ("dense-pq", f"IVF{result['nlist']},PQ48"),
                ("dense-opq", f"OPQ48,IVF{result['nlist']},PQ48"),
            ):
                variants[name] = _variant(corpus, model, name, factory, log)
                variants[name]["recall"] = _recall(corpus, name, vectors, exact)
                shutil.rmtree(corpus / name)  # served: dense-static only
            result["variants"] = variants
            save()
        if (label, count) == sizes[-1] and "at_768" not in result:
            result["at_768"] = _sq8_at_768(corpus, result["nlist"], work)
            save()
        if "served" not in result:
            result["served"] = _serve(root, questions, result["nprobe"])
            save()
    return results


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (fixed, per-unit) cost: y = fixed + per_unit * x."""
    per_unit, fixed = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)
    return float(fixed), float(per_unit)


def _gib(value: float) -> str:
    return f"{value / 2**30:,.1f} GiB"


def _table(header: list[str], rows: list[list[str]], align: str = "---:") -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join([align] * len(header)) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _build_rows(rows: list[dict]) -> list[list[str]]:
    table = []
    for row in rows:
        s, b = row["seconds"], row["bytes"]
        stages = [f"{s[key]:.0f}" for key in ("corpusbuild", "store", "bm25", "dense_embed", "dense_index")]
        sizes = [_gib(b[key]) for key in ("shards", "store", "bm25", "ivf_sq8", "embeddings")]
        table.append([f"{row['snippets']:,}", *stages, *sizes])
    return table


def _recall_cells(recall: dict, nprobes) -> list[str]:
    return [f"{recall[str(n)]['recall']:.3f} ({recall[str(n)]['ms_per_query']:.1f} ms)" for n in nprobes]


def _served_rows(rows: list[dict]) -> tuple[list[list[str]], list[list[str]]]:
    memory, latency = [], []
    for row in rows:
        served = row["served"]
        start, after = served["rss_start_mib"], served["rss_after_mib"]
        files = sum(row["bytes"][key] for key in SERVED_FILES)
        memory.append(
            [
                f"{row['snippets']:,}",
                f"{served['start_s']:.1f}",
                f"{start['RssAnon']:,.0f} / {start['RssFile']:,.0f} MiB",
                f"{after['RssAnon']:,.0f} / {after['RssFile']:,.0f} MiB",
                _gib(files),
                f"{after['RssAnon'] * 2**20 / files:.1%}",
                f"{after['VmRSS'] * 2**20 / files:.1%}",
            ]
        )
        cells = [f"{served[f'{m}@{c}']['p50']:.1f} / {served[f'{m}@{c}']['p99']:.1f}" for m in MODES for c in (1, 8)]
        errors = sum(value["errors"] for key, value in served.items() if "@" in key)
        latency.append([f"{row['snippets']:,}", *cells, f"{served['hybrid@8']['qps']:.1f}", str(errors)])
    return memory, latency


def _sizing_rows(largest: dict) -> list[list[str]]:
    """Measured bytes per snippet at the largest size (384 d, and 768 d where measured), times MedCorp's
    snippets. PQ48 codes do not grow with the dimension (48 bytes whatever d), so its 768-d column
    repeats the 384-d measurement."""
    n = largest["snippets"]
    at_768 = largest.get("at_768", {})
    sizing = {
        "Flat (float32)": (largest["bytes"]["embeddings"] * 2 / n, at_768.get("flat_bytes_per_vector")),
        f"IVF{largest['nlist']},SQ8": (
            largest["bytes"]["ivf_sq8"] / n,
            at_768["sq8_bytes"] / at_768["vectors"] if at_768 else None,
        ),
    }
    for variant in largest.get("variants", {}).values():
        sizing[variant["factory"]] = (variant["bytes"] / n, variant["bytes"] / n)
    rows = []
    for name, (per_384, per_768) in sizing.items():
        if per_768 is None:
            continue
        medcorp = per_768 * MEDCORP_SNIPPETS
        ram, gpu = ("yes" if medcorp < 64e9 * 0.8 else "no"), ("yes" if medcorp < 80e9 * 0.9 else "no")
        rows.append(
            [
                f"`{name}`",
                f"{per_384:,.0f}",
                f"{per_768:,.0f}",
                _gib(per_384 * MEDCORP_SNIPPETS),
                _gib(medcorp),
                ram,
                gpu,
            ]
        )
    for label, key in (("BM25 (Lucene: positions, raw text)", "bm25"), ("shards + snippet store", "shards")):
        per = (largest["bytes"][key] + (largest["bytes"]["store"] if key == "shards" else 0)) / n
        rows.append([label, f"{per:,.0f}", "same", _gib(per * MEDCORP_SNIPPETS), "same", "on disk, mapped", "-"])
    return rows


MODES = ("bm25", "dense", "hybrid")
SERVED_FILES = ("shards", "store", "bm25", "ivf_sq8")  # what searchd maps (the store serves text from the shards)
INTRO = [
    "`run_benchmarks.py --only retrieval-scale` (bench/scale_retrieval.py). One PubMed corpus per size, {shards} "
    "shards, built by the real commands (`corpusbuild pubmed --workers 2`, `indexer store`, `indexer bm25 "
    "--threads 2`, `indexer dense`) and served by `searchd serve --nprobe N`.",
    "",
    "- **Text**: citations recombined from real sentences under new PMIDs (bench/recombined_pubmed.py). Every "
    "snippet is distinct (repeated records would put identical vectors in one inverted list and make any recall "
    "look perfect), but the sentences of one abstract come from different papers.",
    "- **Vectors**: a static model distilled from the bundled MiniLM (indexer/dense/static_distill.py: every token "
    "through MiniLM, centred, top 10 directions removed, SIF-weighted; `--pooling static`): 384 dimensions like "
    "MiniLM, ~6,000 snippets/s here instead of ~20. What it does not represent: MiniLM's rankings (10-nearest-"
    "neighbour overlap with MiniLM on the 500 PubMedQA abstracts: {overlap:.2f}) or a transformer's encoding "
    "cost (the scale model section has that). FAISS's costs depend on dimension, count and how the vectors "
    "spread, which these have.",
    "- **Queries**: the 500 PubMedQA questions. recall@10 is against exact inner-product search over the same "
    "float16 embeddings (what a Flat index returns).",
    "",
]


def _targets(results: dict, labels: list[str], largest: dict) -> list[str]:
    served, n = largest["served"], largest["snippets"]
    files = sum(largest["bytes"][key] for key in SERVED_FILES)
    anon, total = served["rss_after_mib"]["RssAnon"] * 2**20, served["rss_after_mib"]["VmRSS"] * 2**20
    chosen = ", ".join(f"{results[label]['nprobe']}" for label in labels)
    lines = [
        f"**Against the targets** (largest size, {n:,} snippets):",
        "",
        f"- hybrid (BM25 + IVF-SQ8) p50 at concurrency 1: {served['hybrid@1']['p50']:.1f} ms (target < 50 ms); "
        f"p99 {served['hybrid@1']['p99']:.1f} ms; at concurrency 8: p50 {served['hybrid@8']['p50']:.1f} ms",
        f"- IVF-SQ8 recall@10 >= {TARGET_RECALL} against exact search: reached at every size, with nprobe "
        f"{chosen} (100k to 2M)",
        f"- server memory after the load runs: {anon / files:.1%} of the index files' size in anonymous memory "
        f"(target < 25%); {total / files:.1%} counting the mapped file pages it touched",
    ]
    if "at_768" in largest:
        at_768 = largest["at_768"]
        medcorp = at_768["sq8_bytes"] / at_768["vectors"] * MEDCORP_SNIPPETS
        gpu, ram = ("yes" if medcorp < 72e9 else "no"), ("yes" if medcorp < 51.2e9 else "no")
        lines.append(
            f"- MedCorp at 768 dimensions as IVF-SQ8, from measured bytes: {_gib(medcorp)}; fits one "
            f"80 GB GPU: {gpu}; 64 GB of RAM: {ram}"
        )
    return lines + [""]


def report(results: dict, sizes=SIZES) -> list[str]:
    labels = [label for label, _ in sizes if "served" in results.get(label, {})]
    rows = [results[label] for label in labels]
    largest, counts = rows[-1], [row["snippets"] for row in rows]
    lines = ["## Retrieval at scale: 100k to 2M snippets, BM25 + IVF dense, served", ""]
    lines += [line.format(shards=SHARDS, overlap=results["neighbour_overlap"]) for line in INTRO]
    lines += _targets(results, labels, largest)
    lines += ["### Build time per stage (seconds, 2 cores) and bytes on disk", ""]
    lines += _table(
        [
            "snippets",
            "corpusbuild",
            "store",
            "bm25",
            "dense: embed",
            "dense: IVF train+add",
            "shards",
            "store",
            "bm25",
            "IVF-SQ8",
            "embeddings (f16)",
        ],
        _build_rows(rows),
    )
    lines += [
        "### IVF-SQ8 recall@10 against exact search, by nprobe",
        "",
        "Lists: about 4 sqrt(n), at most 4,096. In brackets: in-process dense search time per query over "
        "all shards (batch of 500).",
        "",
    ]
    lines += _table(
        ["snippets", "lists", *(f"nprobe {n}" for n in NPROBES)],
        [[f"{r['snippets']:,}", f"{r['nlist']:,}", *_recall_cells(r["recall"]["ivf_sq8"], NPROBES)] for r in rows],
    )
    chosen = ", ".join(f"{label}: {results[label]['nprobe']}" for label in labels)
    lines += [f"Served nprobe (the smallest reaching recall@10 {TARGET_RECALL}): {chosen}.", ""]
    if "variants" in largest:
        n = largest["snippets"]
        served = {
            "factory": f"IVF{largest['nlist']},SQ8",
            "bytes": largest["bytes"]["ivf_sq8"],
            "seconds": largest["seconds"]["dense_index"],
            "recall": largest["recall"]["ivf_sq8"],
        }
        variants = [served, *largest["variants"].values()]
        lines += [f"### Compressed variants at {n:,} snippets (same embeddings, same number of lists)", ""]
        probes = (16, 64, 128)
        lines += _table(
            ["index", "bytes/snippet", "train+add s", *(f"recall@10 nprobe {p}" for p in probes)],
            [
                [
                    f"`{v['factory']}`",
                    f"{v['bytes'] / n:,.0f}",
                    f"{v['seconds']:.0f}",
                    *(f"{v['recall'][str(p)]['recall']:.3f}" for p in probes),
                ]
                for v in variants
            ],
        )
    memory, latency = _served_rows(rows)
    lines += ["### searchd: start, memory and latency", ""]
    lines += _table(
        [
            "snippets",
            "start s",
            "RSS at start (anon / file)",
            "RSS after load (anon / file)",
            "index files",
            "anon / files",
            "RSS / files",
        ],
        memory,
    )
    lines += [
        "Index files: shards and store (the store serves snippet text from the shards), BM25, IVF-SQ8; all "
        "memory-mapped. File pages count in RSS once touched, but "
        "the kernel drops them under memory pressure; anonymous memory is what the server itself holds.",
        "",
    ]
    lines += _table(
        ["snippets", *(f"{m} c={c} p50 / p99 ms" for m in MODES for c in (1, 8)), "hybrid c=8 queries/s", "errors"],
        latency,
    )
    lines += [f"### Cost growth: fitted lines, extrapolated to MedCorp ({MEDCORP_SNIPPETS:,} snippets)", ""]
    fitted = []
    for stage in ("corpusbuild", "store", "bm25", "dense_embed", "dense_index"):
        fixed, per = _fit(counts, [row["seconds"][stage] for row in rows])
        fitted.append([stage, f"{fixed:.1f}", f"{per * 1e6:,.0f}", f"{(fixed + per * MEDCORP_SNIPPETS) / 3600:,.1f} h"])
    lines += _table(["stage", "fixed s", "s per 1M snippets", "MedCorp on this 2-core machine"], fitted)
    lines += [
        "`dense_embed` is the static model's rate (a transformer's is in the scale model section). At MedCorp "
        "`dense_index` would train more lists (65,536 for 54M) than the 4,096 here, so its k-means costs more "
        "than the line says.",
        "",
        "### MedCorp sizing from measured bytes",
        "",
        f"Bytes per snippet measured at {counts[-1]:,} snippets (file sizes / snippets), times "
        f"{MEDCORP_SNIPPETS:,}. 768 dimensions (MedCPT, BGE-base) measured by building the same index "
        "over every vector written twice side by side; PQ48 codes are 48 bytes whatever the dimension. "
        '"Fits" leaves 20% of the RAM (10% of the GPU) for the process, the query encoder and the page '
        "cache. BM25 and the shards are disk files the server maps.",
        "",
    ]
    lines += _table(
        [
            "index",
            "bytes/snippet 384 d",
            "bytes/snippet 768 d",
            "MedCorp 384 d",
            "MedCorp 768 d",
            "fits 64 GB RAM (768 d)",
            "fits one 80 GB GPU (768 d)",
        ],
        _sizing_rows(largest),
    )
    return lines


def retrieval_scale_section(work: Path) -> list[str]:
    return report(measure(work))


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else len(SIZES)
    found = measure(REPO / "bench" / "work" / "retrieval-scale", SIZES[:count])
    print("\n".join(report(found, SIZES[:count])))
