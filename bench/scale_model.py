"""A scale model (run_benchmarks.py --only scale): per-core and per-device rates measured here, in this
run, turned into hours for the 2026 PubMed baseline and MedCorp on N nodes with M GPUs.

Measured: corpusbuild's parse and merge on one core (one 30,000-citation file, pinned), the snippets
and bytes a citation becomes, `indexer bm25` on one 2-core node (2 threads) with its index bytes,
`indexer store`, and CPU embedding with the bundled MiniLM. Not measurable on this machine: a GPU's
embedding rate, which GPU rows take from the H100 run of bench/gpu_bench.py (docs/benchmarks.md).
Returns markdown lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
PUBMED_2026_CITATIONS = 39_000_000  # NLM's 2026 baseline, about 1,300 files of 30,000 (approximate)
MEDCORP_SNIPPETS = 54_200_000  # MedRAG's MedCorp: PubMed 23.9M, StatPearls 0.3M, textbooks 0.1M, Wikipedia 29.9M
# `indexer dense` end to end, BERT-base shape in fp16 on one H100 80GB (16 host cores), real PubMed snippets of
# ~184 tokens: measured by bench/gpu_bench.py on a lent GPU machine, not in this run
GPU_SNIPPETS_PER_S = 4_844
MEDCPT_VS_MINILM_COST = 110 / 22  # MedCPT/BGE-base vs MiniLM parameters; CPU cost taken as proportional
DEFAULT_SHARDS = 32  # corpusbuild's default --shards: one merge task per shard caps the merge's parallelism
SETUPS = [  # (nodes, cores per node, GPUs per node)
    (1, 2, 0),
    (1, 16, 0),
    (1, 16, 1),
    (1, 16, 8),
    (8, 16, 1),
    (32, 16, 1),
]


def _du(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def _measure_corpusbuild(source: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "corpusbuild",
        "pubmed",
        str(source),
        "--out",
        str(out),
        "--shards",
        "8",
        "--workers",
        "1",
        "--quiet",
    ]
    pin = lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # noqa: E731
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL, preexec_fn=pin)
    record = orjson.loads((out / "build.json").read_bytes())
    seconds, counts = record["run"]["seconds"], record["counts"]
    shard_bytes = sum(output["bytes"] for output in record["outputs"])
    return {
        "parse_citations_per_core_s": counts["articles"] / seconds["parse"],
        "merge_snippets_per_core_s": counts["snippets"] / seconds["merge"],
        "snippets_per_citation": counts["snippets"] / counts["articles"],
        "shard_bytes_per_snippet": shard_bytes / counts["snippets"],
        "work_bytes_per_snippet": _du(out / ".work") / counts["snippets"],
    }


def _measure_indexes(corpus: Path, work: Path) -> dict:
    from medsnip.corpus import Corpus

    snippets = Corpus.open(corpus).snippets
    rates = {}
    for name, arguments in {"bm25": ["--threads", "2"], "store": []}.items():
        out = work / f"scale-{name}"
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "indexer.cli", name, str(corpus), "--out", str(out), *arguments],
            check=True,
            cwd=REPO,
            capture_output=True,
        )
        rates[f"{name}_snippets_per_node_s"] = snippets / (time.perf_counter() - started)
        rates[f"{name}_bytes_per_snippet"] = _du(out) / snippets
    return rates


def _measure_embedding(corpus: Path, count: int = 400) -> float:
    sys.path.insert(0, str(REPO))
    from medsnip.corpus import Corpus
    from medsnip.encoders import DenseEncoder, preset

    snippets = []
    for shard in Corpus.open(corpus).shards:
        snippets += [orjson.loads(line) for line in shard.path.read_bytes().splitlines()[: count - len(snippets)]]
        if len(snippets) >= count:
            break
    encoder = DenseEncoder(preset("minilm"), device="cpu")
    encoder.encode_snippets(snippets[:32])
    started = time.perf_counter()
    encoder.encode_snippets(snippets, batch_size=64)
    return len(snippets) / (time.perf_counter() - started)


def scale_section(source: Path, corpus: Path, work: Path) -> list[str]:
    print("scale: corpusbuild on one core", flush=True)
    rates = _measure_corpusbuild(source, work / "scale-corpus")
    print("scale: bm25 and store", flush=True)
    rates.update(_measure_indexes(corpus, work))
    print("scale: embedding", flush=True)
    minilm_per_core = _measure_embedding(corpus) / 2  # measured on this machine's 2 cores
    pubmed_snippets = PUBMED_2026_CITATIONS * rates["snippets_per_citation"]
    lines = [
        "## Scale model: hours for 2026 PubMed and MedCorp",
        "",
        "Rates measured in this run on this machine (2 cores), then multiplied out. Each stage is parallel "
        "over independent tasks (input files, shards, groups of shards, shards to embed), so time = work / "
        "(rate per core or device x cores or devices) with the 2-worker efficiency measured above (0.9) "
        "applied to every core count; what stops that holding is listed below the table.",
        "",
        "| measured here | value |",
        "|---|---:|",
        f"| corpusbuild parse, citations/s per core | {rates['parse_citations_per_core_s']:,.0f} |",
        f"| corpusbuild merge, snippets/s per core | {rates['merge_snippets_per_core_s']:,.0f} |",
        f"| snippets per citation (abstracts only, 1000/200 chunks) | {rates['snippets_per_citation']:.2f} |",
        f"| shard bytes per snippet / kept .work bytes per snippet | {rates['shard_bytes_per_snippet']:,.0f} / "
        f"{rates['work_bytes_per_snippet']:,.0f} |",
        f"| indexer bm25 (IndexCollection, 2 threads), snippets/s per 2-core node | "
        f"{rates['bm25_snippets_per_node_s']:,.0f} |",
        f"| BM25 index bytes per snippet (positions and doc vectors) | {rates['bm25_bytes_per_snippet']:,.0f} |",
        f"| indexer store, snippets/s / bytes per snippet | {rates['store_snippets_per_node_s']:,.0f} / "
        f"{rates['store_bytes_per_snippet']:,.0f} |",
        f"| embedding, all-MiniLM-L6-v2 on CPU, snippets/s per core | {minilm_per_core:,.1f} |",
        "",
        f"Workloads: 2026 PubMed baseline ~{PUBMED_2026_CITATIONS / 1e6:.0f}M citations -> "
        f"{pubmed_snippets / 1e6:.0f}M snippets here (only citations with abstracts, chunked); MedCorp "
        f"{MEDCORP_SNIPPETS / 1e6:.1f}M snippets (BM25, store and embeddings). Embedding with a 110M "
        f"encoder (MedCPT, BGE-base): CPU at MiniLM's measured rate / {MEDCPT_VS_MINILM_COST:.0f} (parameters); "
        f"GPU at {GPU_SNIPPETS_PER_S:,} snippets/s per GPU: `indexer dense` end to end with a BERT-base shape "
        "in fp16 on one H100, measured on a lent GPU machine (the GPU section), not in this run.",
        "",
        f"| nodes x cores x GPUs | corpusbuild PubMed h ({DEFAULT_SHARDS} shards) | BM25 MedCorp h (groups + merge) | "
        "store MedCorp h | embed MedCorp h (110M encoder) |",
        "|---|---:|---:|---:|---:|",
    ]
    efficiency = 0.9
    for nodes, cores, gpus in SETUPS:
        total_cores = nodes * cores * (efficiency if nodes * cores > 1 else 1)
        parse = PUBMED_2026_CITATIONS / (rates["parse_citations_per_core_s"] * total_cores)
        merge = pubmed_snippets / (rates["merge_snippets_per_core_s"] * min(total_cores, DEFAULT_SHARDS))
        bm25_node_rate = rates["bm25_snippets_per_node_s"] * cores / 2 * efficiency  # a group per 2 cores
        bm25 = MEDCORP_SNIPPETS / (bm25_node_rate * nodes)
        bm25 += MEDCORP_SNIPPETS * rates["bm25_bytes_per_snippet"] / 500e6  # addIndexes copies at ~500 MB/s
        store = MEDCORP_SNIPPETS / rates["store_snippets_per_node_s"]  # one process, whatever the cluster
        if gpus:
            embed = MEDCORP_SNIPPETS / (GPU_SNIPPETS_PER_S * gpus * nodes)
        else:
            embed = MEDCORP_SNIPPETS / (minilm_per_core / MEDCPT_VS_MINILM_COST * total_cores)
        lines.append(
            f"| {nodes} x {cores} x {gpus} | {(parse + merge) / 3600:,.2f} | {bm25 / 3600:,.2f} | "
            f"{store / 3600:,.2f} | {embed / 3600:,.2f} |"
        )
    lines += [
        "",
        "What bounds it, and where the model stops holding:",
        "- **Embedding dominates** everywhere without GPUs (a 110M encoder on CPU is years of core time for "
        "MedCorp); with GPUs it is still the longest stage unless there are several per node. `indexer dense "
        "--devices` gives each GPU (or Ray actor with `num_gpus=1`) whole shards, so it scales with GPUs as "
        "long as shards outnumber them: use at least 4 shards per GPU.",
        f"- **I/O**: MedCorp's shards are ~{MEDCORP_SNIPPETS * rates['shard_bytes_per_snippet'] / 1e9:,.0f} GB, "
        f"the kept work ~{MEDCORP_SNIPPETS * rates['work_bytes_per_snippet'] / 1e9:,.0f} GB, the BM25 index "
        f"~{MEDCORP_SNIPPETS * rates['bm25_bytes_per_snippet'] / 1e9:,.0f} GB. Every node reads inputs and "
        "writes parts on the shared file system: at 100 MB/s of NFS that is about an hour per 360 GB, so on "
        "many nodes the file system, not the cores, bounds corpusbuild and the BM25 merge.",
        "- **The reduce**: one task per shard, so merge parallelism is capped by `--shards` (32 by default, as "
        "modelled): use at least as many shards as cores in the cluster. The store is built by one process "
        "(a few minutes for MedCorp, I/O-bound), the same on any cluster.",
        "- **The BM25 merge**: `addIndexes` runs on one node and copies every part (disk speed, assumed 500 "
        "MB/s above); `--layout parts` skips it and searches the parts through one MultiReader instead.",
        "- **The driver**: it submits one task per input file or range and per shard (a few thousand for "
        "PubMed) and reads only small result dicts; at Ray's thousands of tasks per second it is never the "
        "bound. A joined Ray cluster adds ~1 s per command (the executor section).",
        "",
    ]
    return lines
