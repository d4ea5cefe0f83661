"""searchd for the runners (run_benchmarks.py --only runners): Search-R1's retrieval server design against
searchd's `/retrieve` over HTTP and its BatchSearch over gRPC, in one run, on the same corpus and vectors.

- **Reference**: bench/search_r1_server.py, Search-R1's server rebuilt from its published shape (FastAPI,
  one FAISS Flat index in memory, the corpus as a Python list, each request's queries encoded in batches of 512
  padded to their longest, as Search-R1's encoder does), over the same embeddings and with the same query model
  as searchd's dense index; and the same server encoding as medsnip does (length buckets), a stronger reference.
- **searchd**: `searchd serve --http-port` on the same corpus: dense only (what the reference does; the root's
  serve.json names the dense retriever) and hybrid (BM25 + dense, RRF: what searchd serves by default).
- **Load**: one client sends batches of 1, 64, 512 and 4,096 questions (a GRPO step sends hundreds to thousands at
  once; searchd at its defaults takes 4,096 in one call), topk 3
  with scores and text, one batch after another, after 2,048 untimed questions (every server warm, the JVM's
  JIT included); questions are BioASQ's (Task 11b batch 1 excluded).
  Throughput is questions/s over the whole run, latency per batch (p50/p99), RSS after the run.
- **Sizes**: the realistic root of the noise benchmark (20,783 BioASQ gold snippets, MiniLM, Flat both sides),
  then PubMed citations recombined from real sentences under new ids (bench/recombined_pubmed.py) at the
  largest size this machine builds in the bench's time, with the static MiniLM (bench/scale_retrieval.py):
  searchd's compressed dense index (IVF-PQ, re-ranked exactly from the float16 embeddings on disk) against the
  reference's Flat index of the same vectors.

Returns markdown lines."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_retrieval import _memory  # noqa: E402

from medsnip.encoders.transformer import PAD_MULTIPLE  # noqa: E402  (how medsnip pads queries)
from searchd.engine import STAGES  # noqa: E402  (where a search's time goes, as Info reports it)

REPO = Path(__file__).resolve().parents[1]
BATCHES = ((1, 60), (64, 24), (512, 3), (4096, 1))  # (questions per call, calls)
# Every server answers this many questions in calls of 256 before it is timed: a training loop's server has
# been up for hours, and the JVM compiles Lucene's search loops only after a few thousand queries (timed
# cold, hybrid's first sizes measured the JIT compiler at work beside the search: 1.04x over HTTP at 64
# questions against 1.29x over gRPC, which ran second; alternating the two on one warm server: 301 / 299 ms).
WARM_QUESTIONS = 2048
TOPK = 3
SCALE_FILES = 6  # recombined files of 30,000 citations (~180k citations, ~300k snippets)
PQ_BYTES, REFINE, NPROBE = 48, 10, 32


def _bytes(folder: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


def _questions(count: int) -> list[str]:
    from medsnip.queries import query_texts

    queries = REPO / "bench" / "work" / "noise" / "beir" / "bioasq" / "queries.tsv"
    questions = list(query_texts(queries).values())
    return (questions * -(-count // len(questions)))[:count]  # a batch of 4,096 repeats some of the 2,237


def _start_reference(corpus: Path, dense: Path, work: Path, *extra) -> tuple[subprocess.Popen, str]:
    port_file = work / "reference.port"
    port_file.unlink(missing_ok=True)
    log = open(work / "reference.log", "w")
    process = subprocess.Popen(
        [sys.executable, REPO / "bench" / "search_r1_server.py", corpus, dense, "--port-file", port_file, *extra],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    while not (port_file.exists() and port_file.read_text().strip()):  # created a moment before it is written
        assert process.poll() is None, (work / "reference.log").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    url = f"http://127.0.0.1:{port_file.read_text().strip()}"
    while True:  # the port is bound before uvicorn answers
        try:
            requests.post(f"{url}/retrieve", json={"queries": ["warm"], "topk": 1}, timeout=60).raise_for_status()
            return process, url
        except requests.ConnectionError:
            time.sleep(0.2)


def _start_searchd(root: Path, work: Path, *extra) -> tuple[subprocess.Popen, str, str]:
    from searchd.launch import start_background_server

    port_file = work / "searchd-http.port"
    port_file.unlink(missing_ok=True)
    process, address = start_background_server(root, "--http-port", 0, "--http-port-file", port_file, *extra)
    while not (port_file.exists() and port_file.read_text().strip()):
        time.sleep(0.05)
    return process, address, f"http://127.0.0.1:{port_file.read_text().strip()}"


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()


def _stage_seconds(address: str) -> dict:
    """searchd's time per stage so far (Info's stats: searchd.engine.STAGES)."""
    from searchd.client import SearchClient

    with SearchClient(address) as client:
        return json.loads(client.info().stats_json)["seconds"]


def _warm(call, questions: list[str]) -> None:
    """WARM_QUESTIONS questions in calls of 256, untimed."""
    for first in range(0, WARM_QUESTIONS, 256):
        call(questions[first : first + 256])


def _run_batches(call, questions: list[str], address: str | None = None) -> dict:
    """{batch: {qps, p50, p99, wall, stages}} of one client calling `call(batch of questions)` one batch after
    another; `stages`: searchd's seconds per stage over the timed calls, when `address` is searchd's."""
    results = {}
    for size, calls in BATCHES:
        call(questions[:size])  # warm-up: this size's first call
        before = _stage_seconds(address) if address else {}
        latencies, started = [], time.perf_counter()
        for number in range(calls):
            first = (number * size) % max(1, len(questions) - size)
            batch = questions[first : first + size]
            began = time.perf_counter()
            answered = call(batch)
            latencies.append((time.perf_counter() - began) * 1000)
            assert len(answered) == len(batch) and all(len(hits) == TOPK for hits in answered)
        wall = time.perf_counter() - started
        quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
        results[size] = {"qps": size * calls / wall, "p50": statistics.median(latencies), "p99": quantiles[98]}
        if address:
            after = _stage_seconds(address)
            results[size]["wall"] = sum(latencies) / 1000
            results[size]["stages"] = {stage: after[stage] - before[stage] for stage in STAGES}
    return results


def _http_call(url: str):
    session = requests.Session()

    def call(batch: list[str]) -> list:
        answer = session.post(f"{url}/retrieve", json={"queries": batch, "topk": TOPK, "return_scores": True})
        answer.raise_for_status()
        return answer.json()["result"]

    return call


def _grpc_call(address: str, retrievers: list[str]):
    from searchd.client import SearchClient

    client = SearchClient(address, timeout=600)

    def call(batch: list[str]) -> list:
        return [list(response.hits) for response in client.batch_search(batch, k=TOPK, retrievers=retrievers)]

    return call


def _dense_root(root: Path, corpus: str, dense: str, work: Path) -> Path:
    """A root of links to `corpus` whose serve.json serves its dense index alone (the reference's setting)."""
    folder = work / f"root-{corpus}-{dense}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / corpus).exists():
        (folder / corpus).symlink_to((root / corpus).resolve())
    (folder / "serve.json").write_text(json.dumps({"retrievers": [dense]}))
    return folder


def measure_pair(root: Path, corpus: str, dense: str, work: Path, questions: list[str], hybrid: bool) -> dict:
    """The reference and searchd (HTTP and gRPC, dense; hybrid too when `hybrid`) on one corpus."""
    corpus_dir = root / corpus
    results: dict = {
        "snippets": orjson.loads((corpus_dir / "build.json").read_bytes())["counts"]["snippets"],
        "factory": orjson.loads((corpus_dir / dense / "build.json").read_bytes())["params"]["index_factory_built"],
    }
    dims = orjson.loads((corpus_dir / dense / "build.json").read_bytes())["encoder"]["dimension"]
    for name, extra in (("reference", ()), ("reference bucketed", ("--bucketed",))):
        process, url = _start_reference(corpus_dir, corpus_dir / dense, work, *extra)
        try:
            _warm(_http_call(url), questions)
            results[name] = {"runs": _run_batches(_http_call(url), questions), "memory": _memory(process.pid)}
        finally:
            _stop(process)
        results[name]["index_bytes"] = results["snippets"] * dims * 4  # IndexFlatIP: the float32 vectors
    modes = {"dense": (_dense_root(root, corpus, dense, work), [dense])}
    if hybrid:
        modes["hybrid"] = (root, ["bm25", dense])
    for mode, (served_root, retrievers) in modes.items():
        process, address, url = _start_searchd(served_root, work, "--corpora", corpus)
        try:
            _warm(_http_call(url), questions)
            results[f"searchd {mode}"] = {
                "http": _run_batches(_http_call(url), questions, address),
                "grpc": _run_batches(_grpc_call(address, retrievers), questions),
                "memory": _memory(process.pid),
                "index_bytes": _bytes(corpus_dir / dense, "faiss-*.index")
                + (_bytes(corpus_dir / "bm25", "**/*") if mode == "hybrid" else 0),
            }
        finally:
            _stop(process)
    return results


def ceiling(corpus: Path, dense: str, questions: list[str]) -> dict:
    """The libraries called directly in this process, no server: {mode: {batch: seconds a call}}, dense (the query
    encoder as searchd runs it, FAISS Flat at depth topk, each hit's row read from a list) and hybrid (the same at
    fusion depth 100, and Anserini's batch search over 2 threads at depth 100)."""
    import search_r1_server

    from indexer.bm25 import BM25Index

    rows = search_r1_server.load_rows(corpus)
    index, encoder = search_r1_server.load_flat(corpus / dense)
    bm25 = BM25Index.open(corpus / "bm25")
    timings: dict = {"dense": {}, "hybrid": {}}
    for size, _ in BATCHES:
        batch = questions[:size]
        for mode, depth in (("dense", TOPK), ("hybrid", 100)):
            encoder.encode_queries(batch[:8])
            began = time.perf_counter()
            vectors = encoder.encode_queries(batch)
            _, found = index.search(vectors, depth)
            if mode == "hybrid":
                bm25.search(batch, depth, threads=2)
            [[rows[i] for i in row[:TOPK]] for row in found.tolist()]
            timings[mode][size] = time.perf_counter() - began
    bm25.close()
    return timings


def lucene_alone(corpus: Path, questions: list[str]) -> float:
    """Seconds of one 512-question BM25 batch at fusion depth 100 on 2 threads, called directly (best of 3, after
    the servers' warm-up): the least a hybrid call adds to a dense one on two cores."""
    from indexer.bm25 import BM25Index

    bm25 = BM25Index.open(corpus / "bm25")
    bm25.search(questions[:WARM_QUESTIONS], 100, threads=2)
    seconds = []
    for _ in range(3):
        began = time.perf_counter()
        bm25.search(questions[:512], 100, threads=2)
        seconds.append(time.perf_counter() - began)
    bm25.close()
    return min(seconds)


def scale_root(work: Path) -> Path:
    """Recombined PubMed (SCALE_FILES files) with a store and a compressed static dense index."""
    import scale_retrieval
    from static_views import static_dense_command

    root = work / "scale-root"
    corpus = root / "pubmed"
    log = work / "scale-commands.log"
    files = scale_retrieval._files(work, SCALE_FILES)
    if not (corpus / "build.json").is_file():
        scale_retrieval._run(
            ["-m", "corpusbuild", "pubmed", *files, "--out", corpus, "--shards", 8, "--workers", 2, "--quiet"], log
        )
    if not (corpus / "store" / "build.json").is_file():
        scale_retrieval._run(["-m", "indexer.cli", "store", corpus], log)
    if not (corpus / "bm25" / "build.json").is_file():
        scale_retrieval._run(["-m", "indexer.cli", "bm25", corpus, "--threads", 2], log)
    dense = corpus / "dense-static"
    if not (dense / "build.json").is_file():
        snippets = orjson.loads((corpus / "build.json").read_bytes())["counts"]["snippets"]
        factory = f"IVF{scale_retrieval._nlist(snippets)},PQ{PQ_BYTES}"
        command = static_dense_command(corpus, scale_retrieval._static_model(work), factory)
        scale_retrieval._run([*command, "--refine", REFINE, "--nprobe", NPROBE], log)
    return root


def measure(demo: Path, work: Path) -> dict:
    import noise_bench

    work.mkdir(parents=True, exist_ok=True)
    noise_root = noise_bench.bench_root(demo, REPO / "bench" / "work" / "noise")
    questions = _questions(max(size for size, _ in BATCHES) + 64)
    results_ceiling = ceiling(noise_root / "bioasq", "dense-minilm", questions)
    results = {"realistic": measure_pair(noise_root, "bioasq", "dense-minilm", work, questions, hybrid=True)}
    scale = scale_root(work)
    results["scale"] = measure_pair(scale, "pubmed", "dense-static", work, questions, hybrid=True)
    results["scale"]["lucene_512"] = lucene_alone(scale / "pubmed", questions)
    results["ceiling"] = results_ceiling
    (work / "results.json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    return results


REFERENCES = (
    ("reference", "Search-R1's design (Flat, padded batches)"),
    ("reference bucketed", "the same, medsnip's encoder"),
)


def _rows(results: dict) -> list[list[str]]:
    rows = []
    reference = results["reference"]
    for size, _ in BATCHES:
        base = reference["runs"][size]["qps"]
        for name, label in REFERENCES:
            run = results[name]["runs"][size]
            rows.append([label, "HTTP", str(size), f"{run['qps']:,.0f}", f"{run['qps'] / base:.2f}", *_latency(run)])
        for mode in ("searchd dense", "searchd hybrid"):
            for transport in ("http", "grpc"):
                run = results[mode][transport][size]
                call = "HTTP /retrieve" if transport == "http" else "gRPC BatchSearch"
                rows.append([mode, call, str(size), f"{run['qps']:,.0f}", f"{run['qps'] / base:.2f}", *_latency(run)])
    return rows


def _latency(run: dict) -> list[str]:
    return [f"{run['p50']:,.0f}", f"{run['p99']:,.0f}"]


def own_share(run: dict) -> float:
    """searchd's own share of a batch's time: what the libraries (encoder, FAISS, Lucene: busy time, which overlaps
    when BM25 and the encoder run side by side) leave of the calls' wall time, over that wall time."""
    libraries = sum(run["stages"][stage] for stage in ("encoder", "faiss", "lucene"))
    return max(0.0, run["wall"] - libraries) / run["wall"]


def _stage_rows(results: dict, ceiling: dict | None) -> list[list[str]]:
    rows = []
    for mode in ("searchd dense", "searchd hybrid"):
        for size, calls in BATCHES:
            run = results[mode]["http"][size]
            per_call = {stage: run["stages"][stage] / calls * 1000 for stage in STAGES}
            wall = run["wall"] / calls * 1000
            direct = ceiling[mode.split()[1]][size] * 1000 if ceiling else float("nan")
            rows.append(
                [mode, str(size), f"{wall:,.0f}", *(f"{per_call[stage]:,.1f}" for stage in STAGES)]
                + [f"{own_share(run):.0%}", f"{direct:,.0f}", f"{direct / wall:.2f}"]
            )
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _memory_rows(results: dict) -> list[list[str]]:
    rows = []
    labels = dict(REFERENCES)
    for name in ("reference", "reference bucketed", "searchd dense", "searchd hybrid"):
        memory, index = results[name]["memory"], results[name]["index_bytes"]
        label = labels.get(name, name)
        rows.append(
            [
                label,
                f"{memory['VmRSS']:,.0f}",
                f"{memory['RssAnon']:,.0f}",
                f"{memory['RssFile']:,.0f}",
                f"{index / 2**20:,.1f}",
            ]
        )
    return rows


def findings(results: dict) -> list[str]:
    """Where searchd is faster or smaller than the reference and where it is not, from the figures."""

    def ratio(part: dict, mode: str, transport: str, size: int, reference: str = "reference") -> float:
        return part[mode][transport][size]["qps"] / part[reference]["runs"][size]["qps"]

    def cells(part: dict, mode: str, reference: str = "reference") -> str:
        return ", ".join(f"{size}: {ratio(part, mode, 'http', size, reference):.2f}x" for size, _ in BATCHES)

    realistic, scale = results["realistic"], results["scale"]
    lines = ["**Reading.**", ""]
    for name, part in (("realistic root (Flat on both sides)", realistic), ("at scale (searchd IVF-PQ)", scale)):
        lines.append(
            f"- {name}, questions/s over HTTP against Search-R1's design, by batch size: searchd dense "
            f"{cells(part, 'searchd dense')}; searchd hybrid {cells(part, 'searchd hybrid')}."
        )
    lines.append(
        "- Which setting made the difference between this bench and an independent run of the same comparison "
        "(0.50x here, 1.14x there, hybrid at 512): the reference's query encoding. This bench's reference used "
        "to encode with medsnip's own encoder (queries padded to multiples of "
        f"{PAD_MULTIPLE} tokens, batches run side by side on one thread each); Search-R1's encoder pads each batch "
        "of 512 questions to its longest, which cost MiniLM 2.4x the time on these questions (measured against "
        "multiples of 16 tokens). The reference now pads as Search-R1 does; the row 'the same, "
        "medsnip's encoder' keeps the other setting: against it, on the realistic root, searchd dense "
        f"{cells(realistic, 'searchd dense', 'reference bucketed')} and hybrid "
        f"{cells(realistic, 'searchd hybrid', 'reference bucketed')}."
    )
    shares = ", ".join(
        f"{mode.split()[1]} {own_share(realistic[mode]['http'][512]):.0%}"
        for mode in ("searchd dense", "searchd hybrid")
    )
    lines.append(
        f"- searchd's own share of a 512-question call on the realistic root (what the encoder, FAISS and Lucene "
        f"leave of its time): {shares} (table below). Hybrid costs BM25 at fusion depth 100 on top of the "
        "encoder on the same two cores, with each dense list read at depth 100 and fused per question."
    )
    lines += targets(realistic, scale, ratio)
    reference, dense = scale["reference"], scale["searchd dense"]
    lines.append(
        f"- Memory at {scale['snippets']:,} snippets: the reference holds its Flat index and its corpus in "
        f"anonymous memory ({reference['memory']['RssAnon']:,.0f} MiB, index {reference['index_bytes'] / 2**20:,.0f} "
        f"MiB); searchd's dense index is {dense['index_bytes'] / 2**20:,.0f} MiB of IVF-PQ codes and its anonymous "
        f"memory {dense['memory']['RssAnon']:,.0f} MiB, the store and the float16 embeddings it re-ranks from "
        f"being mapped files ({dense['memory']['RssFile']:,.0f} MiB resident, shared with the page cache). A Flat "
        "index of MedCorp's 54M snippets at 768 dimensions is ~155 GiB of memory; IVF-PQ codes are ~3 GiB."
    )
    lines.append(
        "- Run-to-run spread on this 2-core machine is 20-30%, the reference's own rate included: a ratio within "
        "a tenth of its target is a tie, not a verdict. No GPU was lent to this "
        "session: the CUDA encoder and FAISS on the GPU against the libraries-only ceiling are not measured here."
    )
    return lines + [""]


def targets(realistic: dict, scale: dict, ratio) -> list[str]:
    """Issue 58's targets against this run: hybrid >= 1.1x and dense >= 1.3x the reference at every batch size on
    the realistic root, hybrid >= 1.1x at 512 at scale; and the most hybrid can reach at scale on two cores."""

    def verdict(part: dict, mode: str, least: float, sizes) -> str:
        short = [f"{size}: {ratio(part, mode, 'http', size):.2f}x" for size in sizes]
        missed = [size for size in sizes if ratio(part, mode, "http", size) < least]
        return f"{', '.join(short)} ({'met' if not missed else 'not met at ' + ', '.join(map(str, missed))})"

    sizes = [size for size, _ in BATCHES]
    dense_call = scale["searchd dense"]["http"][512]["p50"] / 1000
    reference_call = scale["reference"]["runs"][512]["p50"] / 1000
    most = reference_call / (dense_call + scale["lucene_512"])
    return [
        f"- Against issue 58's targets, over HTTP: on the realistic root hybrid >= 1.1x: "
        f"{verdict(realistic, 'searchd hybrid', 1.1, sizes)}; dense >= 1.3x: "
        f"{verdict(realistic, 'searchd dense', 1.3, sizes)}; at scale hybrid >= 1.1x at 512: "
        f"{verdict(scale, 'searchd hybrid', 1.1, [512])}.",
        f"- The most hybrid can reach at scale on two cores: its call does the dense call's work "
        f"({dense_call * 1000:,.0f} ms for 512 questions) plus Lucene's at fusion depth 100 "
        f"({scale['lucene_512'] * 1000:,.0f} ms on 2 threads, called directly) on the same cores, against the "
        f"reference's {reference_call * 1000:,.0f} ms: at most {most:.2f}x with nothing of searchd's own. Asking "
        "the lists for less than depth 100 would change the fused hits and scores, which the issue keeps exact.",
    ]


def report(results: dict) -> list[str]:
    lines = ["## searchd for the runners: Search-R1's /retrieve, against Search-R1's server design", ""]
    lines += [(__doc__ or "").split("\n\n", 1)[1].rsplit("Returns markdown lines.", 1)[0].strip(), ""]
    lines += findings(results)
    for key, title in (("realistic", "Realistic root"), ("scale", "At scale, compressed")):
        part = results[key]
        lines += [
            f"### {title}: {part['snippets']:,} snippets, searchd's dense index {part['factory']}",
            "",
            "Questions/s of one client, batches one after another; ratio against Search-R1's design at the same "
            "batch size; latency per batch (ms).",
            "",
        ]
        lines += _table(["server", "call", "batch", "questions/s", "vs reference", "p50 ms", "p99 ms"], _rows(part))
        lines += ["", "Memory after the run (MiB) and the index bytes each serves:", ""]
        lines += _table(["server", "RSS", "anonymous", "file-backed", "index MiB"], _memory_rows(part))
        lines.append("")
    lines += [
        "### Where the time goes (realistic root, HTTP /retrieve)",
        "",
        "Per call (ms): the call's wall time at the client, then the seconds searchd's stages spent on it (Info's "
        "stats; the encoder and Lucene run side by side in hybrid, so stages may sum past the wall time); "
        "searchd's own share (the wall time the encoder, FAISS and Lucene leave, over the wall time); and the "
        "libraries called directly in one process for the same batch (encoder, FAISS, Lucene, rows read: the "
        "ceiling), with its time over searchd's.",
        "",
    ]
    lines += _table(
        ["mode", "batch", "wall", *STAGES, "searchd's own", "libraries alone", "alone / searchd"],
        _stage_rows(results["realistic"], results.get("ceiling")),
    )
    return lines + [""]


def runners_section(demo: Path, work: Path) -> list[str]:
    results_path = work / "results.json"
    if os.environ.get("MEDSNIP_BENCH_REUSE") and results_path.is_file():
        results = {k: _with_int_keys(v) for k, v in orjson.loads(results_path.read_bytes()).items()}
    else:
        results = measure(demo, work)
    return report(results)


def _with_int_keys(part: dict) -> dict:
    """results.json read back: the batch sizes are JSON strings."""
    fixed = {}
    for name, value in part.items():
        if isinstance(value, dict):
            fixed[name] = {
                (int(key) if key.isdigit() else key): (
                    {int(size): run for size, run in inner.items()} if key in ("runs", "http", "grpc") else inner
                )
                for key, inner in value.items()
            }
        else:
            fixed[name] = value
    return fixed
