"""searchd's memory over many reloads (run_benchmarks.py --only reload-memory).

A searchd that takes the daily update by SIGHUP must not grow. Roots of real PubMed records (the
repository's samples repeated under new PMIDs, bench/pubmed_scaleup.py) with a store, BM25 and a static
dense index (the bundled MiniLM distilled, indexer/dense/static_distill.py) are served by a real searchd; it is
reloaded `RELOADS` times (SIGHUP, each waited for through Info, then one hybrid query) and after each its
resident memory (/proc: anonymous and file-backed) and the index files it maps are read. Two roots (600
and 6,000 citations) with an unchanged root, and the small one with a real `medsnip update` (revisions,
new citations, deletions) applied every `UPDATE_EVERY` reloads, so each tenth reload swaps generations.
The first `WARM_UP` reloads are the warm-up. Returns markdown lines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from static_views import static_dense_command  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RELOADS, WARM_UP, UPDATE_EVERY = 100, 10, 10
SIZES = (600, 6_000)
QUESTION = "Is losartan effective for hypertension in diabetic patients?"


def _run(arguments: list, log: Path) -> None:
    with open(log, "a") as handle:
        subprocess.run([sys.executable, *map(str, arguments)], check=True, cwd=REPO, stdout=handle, stderr=handle)


def build_root(work: Path, citations: int, model: Path) -> Path:
    """ROOT/pubmed of `citations` real records under new PMIDs, with store, BM25 and a static dense index."""
    from pubmed_scaleup import write_scaled_pubmed

    root = work / f"root-{citations}"
    corpus = root / "pubmed"
    if (corpus / "dense-static" / "build.json").is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    inputs = work / f"input-{citations}"
    inputs.mkdir(parents=True, exist_ok=True)
    source = inputs / "pubmed26n0001.xml.gz"
    write_scaled_pubmed(sorted((REPO / "samples" / "pubmed").iterdir()), source, citations, 70_000_000)
    log = work / "commands.log"
    _run(["-m", "corpusbuild", "pubmed", source, "--out", corpus, "--shards", 4, "--workers", 2, "--quiet"], log)
    _run(["-m", "indexer.cli", "store", corpus], log)
    _run(["-m", "indexer.cli", "bm25", corpus], log)
    _run(static_dense_command(corpus, model), log)
    return root


def update_file(work: Path, root: Path, day: int) -> Path:
    """A real-format update file: revised abstracts, new citations and deletions of the root's records."""
    import copy

    from pubmed_scaleup import load_template_articles, renumbered, write_pubmed_file

    source = json.loads((root / "pubmed" / "build.json").read_text())["inputs"][0]["path"]
    articles = load_template_articles([Path(source)])
    pmid = [int(a.findtext("MedlineCitation/PMID")) for a in articles]
    folder = work / "updates"
    folder.mkdir(parents=True, exist_ok=True)
    revised = []
    for index in range(day * 10, day * 10 + 10):  # the same PMID, another real abstract
        clone = renumbered(articles[index % len(articles)], pmid[index % len(articles)])
        donor = articles[(index + 37) % len(articles)].find("MedlineCitation/Article/Abstract")
        old = clone.find("MedlineCitation/Article/Abstract")
        if old is not None and donor is not None:
            old.getparent().replace(old, copy.deepcopy(donor))
        revised.append(clone)
    new = [renumbered(articles[(day * 7 + i) % len(articles)], 71_000_000 + day * 100 + i) for i in range(20)]
    out = folder / f"pubmed26n{1000 + day:04d}.xml.gz"
    write_pubmed_file(out, [*revised, *new], deletions=pmid[500 + day * 3 : 503 + day * 3])
    return folder


def generation_files(root: Path) -> int:
    """The files one generation of the root may map: shards, the store's arrays, Lucene's segment files and
    the FAISS indexes of the served folders (not the replaced versions under .generations)."""
    count = 0
    for corpus in (p for p in root.iterdir() if (p / "build.json").is_file()):
        count += len(list(corpus.glob("shard-*.jsonl"))) + len(list((corpus / "store").glob("*.npy")))
        count += len(
            [
                f
                for f in (corpus / "bm25" / "index").glob("*")
                if f.is_file() and not f.name.startswith(("segments", "write.lock"))
            ]
        )
        count += sum(len(list(d.glob("faiss-*.index"))) for d in corpus.glob("dense-*"))
    return count


def memory(pid: int, root: Path) -> dict:
    """Resident MiB (anonymous, file-backed), the root's files the process maps, and how many one
    generation of the root has."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:", "VmRSS:")):
            values[line.split(":")[0]] = int(line.split()[1]) / 1024
    mapped = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith(str(root.resolve())):
            mapped.add(parts[5])
    return {
        "rss": values.get("VmRSS", 0.0),
        "anon": values.get("RssAnon", 0.0),
        "file": values.get("RssFile", 0.0),
        "mapped": len(mapped),
        "generation_files": generation_files(root),
    }


def reload_series(root: Path, work: Path, reloads: int, update_every: int | None) -> list[dict]:
    """One sample before the first reload and one after each (waited for, then one query)."""
    from searchd.client import SearchClient
    from searchd.launch import start_background_server

    process, address = start_background_server(root)
    samples = []
    log = work / "commands.log"
    try:
        with SearchClient(address) as client:
            client.search(QUESTION, k=10)
            samples.append({"reload": 0, **memory(process.pid, root)})
            for number in range(1, reloads + 1):
                if update_every and number % update_every == 0:
                    updates = update_file(work, root, number // update_every)
                    _run(["-m", "pipeline.cli", "update", root / "pubmed", "--pubmed-updates", updates], log)
                before = json.loads(client.info().stats_json)["generation"]["generation"]
                os.kill(process.pid, signal.SIGHUP)
                deadline = time.monotonic() + 300
                while json.loads(client.info().stats_json)["generation"]["generation"] == before:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"reload {number} did not finish")
                    time.sleep(0.05)
                client.search(QUESTION, k=10)
                samples.append({"reload": number, **memory(process.pid, root)})
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    return samples


def _summary(name: str, samples: list[dict]) -> str:
    start, warm, end = samples[0], samples[WARM_UP], samples[-1]
    ratio = max(s["mapped"] / max(s["generation_files"], 1) for s in samples)
    growth = end["rss"] - warm["rss"]
    peak = max(s["rss"] for s in samples[WARM_UP:])
    return (
        f"| {name} | {start['rss']:.0f} | {samples[1]['rss']:.0f} | {warm['rss']:.0f} | {end['rss']:.0f} | "
        f"{growth:+.0f} | {peak:.0f} | {end['anon']:.0f} / {end['file']:.0f} | {start['mapped']} / "
        f"{max(s['mapped'] for s in samples)} ({ratio:.2f}x) |"
    )


def reload_section(work: Path) -> list[str]:
    from scale_retrieval import _static_model

    work.mkdir(parents=True, exist_ok=True)
    model = _static_model(work)
    rows, series = [], {}
    for citations in SIZES:
        root = build_root(work, citations, model)
        series[f"{citations:,} citations, unchanged"] = reload_series(root, work, RELOADS, None)
    updated = work / "root-updated"
    shutil.rmtree(updated, ignore_errors=True)
    shutil.copytree(build_root(work, SIZES[0], model), updated)
    series[f"{SIZES[0]:,} citations, an update every {UPDATE_EVERY}"] = reload_series(
        updated, work, RELOADS, UPDATE_EVERY
    )
    for name, samples in series.items():
        rows.append(_summary(name, samples))
    (work / "reload-series.json").write_text(json.dumps(series))
    return [
        "## searchd memory over reloads",
        "",
        f"A real searchd serving PubMed roots (store, BM25, static dense), reloaded {RELOADS} times by SIGHUP "
        f"(each waited for through Info, then one hybrid query); RSS in MiB from /proc after each reload, the "
        f"first {WARM_UP} as warm-up; mapped = the root's files the process maps (at start / at most, and at most "
        "as a multiple of the files the generation serving then has: a BM25 update adds a Lucene segment, so one "
        "generation's count grows with the updates; retired generations' files must not stay mapped).",
        "",
        "| root | RSS at start | after reload 1 | after reload 10 | after reload 100 | 10 -> 100 | peak after 10 | "
        "anon / file at 100 | mapped files |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]
