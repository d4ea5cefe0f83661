"""`make demo`: build every bundled real sample source from manifests/demo.toml, show what came out,
build (or reuse, when their lineage still matches) each source's store, BM25 and dense indexes, serve
them with searchd, query it, and build a small curation benchmark with refkit."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from corpusbuild.cli import main as corpusbuild_main
from corpusbuild.engine.verify import verify_build
from demo.refkit_walkthrough import curation_walkthrough, show_item
from medsnip.corpus import Corpus, LineageError
from medsnip.snippet import SHARD_GLOB, iter_snippets

REPO = Path(__file__).resolve().parents[1]
# A structured abstract (labels kept, split at a section boundary), a legacy MEDLINE citation, and one
# snippet of each other source.
EXAMPLE_IDS = (
    "pubmed:27797938:1",
    "pubmed:10540283:0",
    "statpearls:pone.0000217:4",
    "textbooks:Pharmacology_Katzung:0",
    "wikipedia:25:3",
)


def show_snippet(console: Console, snippet: dict) -> None:
    meta = snippet["meta"]
    if snippet["source"] == "pubmed":
        mesh = ", ".join(m["name"] + ("*" if m["major"] else "") for m in meta["mesh"][:6])
        chemicals = ", ".join(c["name"] for c in meta["chemicals"][:4]) or "-"
        details = f"journal {meta['journal'] or '-'} ({meta['year']}) | MeSH {mesh} ... | chemicals {chemicals}"
    else:
        details = ", ".join(f"{key}: {value}" for key, value in meta.items())
    body = f"[bold]{escape(snippet['title'])}[/bold]\n\n{escape(snippet['content'])}\n\n[dim]{escape(details)}[/dim]"
    console.print(Panel(body, title=snippet["id"], title_align="left"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "demo")
    args = parser.parse_args()
    console = Console() if Console().is_terminal else Console(width=140)  # logs and CI get a readable width
    steps: dict[str, float] = {}
    started = time.perf_counter()
    console.rule("corpusbuild build manifests/demo.toml (real PubMed, PMC NXML, textbook and Wikipedia samples)")
    recipe = REPO / "manifests" / "demo.toml"
    try:
        corpusbuild_main(
            ["build", str(recipe), "--out", str(args.out), "--workers", "2", "--require-checksums"],
            standalone_mode=False,
        )
    except SystemExit as stop:
        if stop.code:
            raise
    sources = ("pubmed", "statpearls", "textbooks", "wikipedia", "pubmedqa")
    for source in sources:
        differences, summary = verify_build(args.out / source)
        console.print(f"verify {source}: {'OK, ' + summary if not differences else differences}")
    console.rule("example snippets")
    wanted = {}
    for source in sources:
        for shard in sorted((args.out / source).glob(SHARD_GLOB)):
            for snippet in iter_snippets(shard):
                if snippet["id"] in EXAMPLE_IDS:
                    wanted[snippet["id"]] = snippet
    for snippet_id in EXAMPLE_IDS:
        show_snippet(console, wanted[snippet_id])
    console.print(f"corpus root: {args.out} (build.json lists every source's record)")
    steps["corpusbuild: 5 sources built and verified"] = time.perf_counter() - started
    steps.update(build_indexes(console, args.out, sources))
    steps.update(serve_and_query(console, args.out, args.out / "refkit"))
    table = Table("step", "seconds", title="make demo, step by step (this run)")
    for step, seconds in [*steps.items(), ("total", time.perf_counter() - started)]:
        table.add_row(step, f"{seconds:.1f}")
    console.print(table)


DEMO_QUERIES = (  # real questions: PubMedQA (samples/ir), and two of the kind MedQA asks
    "Is anorectal endosonography valuable in dyschesia?",
    "What is the mechanism of action of metformin in type 2 diabetes?",
    "Which genes are associated with autism spectrum disorder?",
)


def serve_and_query(console: Console, root: Path, refkit_out: Path) -> dict[str, float]:
    """Start searchd on a free loopback port, wait for SERVING, run the demo queries and the refkit
    walkthrough, stop it; returns the seconds of each part."""
    import signal

    from searchd.client import SearchClient
    from searchd.launch import start_background_server

    console.rule("searchd: hybrid BM25 + dense search over every source, fused by RRF (k=60)")
    steps, started = {}, time.perf_counter()
    process, address = start_background_server(root)
    try:
        with SearchClient(address) as client:
            info = client.info()
            console.print(f"searchd {info.server_version} on {address}: "
                          + ", ".join(f"{c.name} ({c.snippets:,})" for c in info.corpora))  # fmt: skip
            for question in DEMO_QUERIES:
                response = client.search(question, k=5)
                table = Table("#", "RRF", "id", "ranks (corpus/retriever)", "title / content",
                              title=f"{question}  [{response.took_ms:.0f} ms]")  # fmt: skip
                for hit in response.hits:
                    ranks = ", ".join(f"{r.corpus}/{r.retriever} {r.rank}" for r in hit.retrievers)
                    table.add_row(str(hit.rank), f"{hit.score:.4f}", escape(hit.id), escape(ranks),
                                  f"[bold]{escape(hit.title)}[/bold]\n{escape(hit.content[:160])}...")  # fmt: skip
                console.print(table)
        steps["searchd: started, 3 hybrid queries"] = time.perf_counter() - started
        started = time.perf_counter()
        item = curation_walkthrough(console, address, refkit_out)
        steps["refkit: collect, label, lexicon, noise, assemble (7 questions)"] = time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
    console.print(f"searchd stopped (exit status {status}); request log: {process.log_path}")
    console.rule("one assembled benchmark item (refkit assemble), with its references")
    show_item(console, item, refkit_out / "items.jsonl")
    return steps


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def _usable(open_index) -> bool:
    """Whether an index opens and matches its corpus (else the demo rebuilds it)."""
    try:
        open_index()
    except (LineageError, FileNotFoundError, OSError, KeyError):
        return False
    return True


def ensure_indexes(corpus: Corpus, encoder_name: str, encoders: dict, log=None) -> list[str]:
    """Store, BM25 (in the corpus's recorded language) and dense-<encoder_name> for one corpus, each built
    only when missing or no longer matching it; returns what was built. `encoders` caches the loaded
    encoder across corpora."""
    from indexer.bm25 import BM25Index, build_bm25
    from indexer.dense import DenseIndex, build_dense
    from indexer.store import SnippetStore, build_store
    from medsnip.encoders import DenseEncoder, preset

    built = []
    if not _usable(lambda: SnippetStore(corpus.path / "store", corpus).close()):
        build_store(corpus, corpus.path / "store")
        built.append("store")
    if not _usable(lambda: BM25Index(corpus.path / "bm25", corpus).close()):
        build_bm25(corpus, corpus.path / "bm25", threads=2)
        built.append("bm25")
    dense = corpus.path / f"dense-{encoder_name}"
    if not _usable(lambda: DenseIndex(dense, corpus)):
        if encoder_name not in encoders:
            encoders[encoder_name] = DenseEncoder(preset(encoder_name))
        if log:
            log(f"embedding {corpus.snippets:,} {corpus.path.name} snippets on CPU")
        build_dense(corpus, dense, encoders[encoder_name], batch_size=16, log=log)  # 16: fastest on 2 CPU cores
        built.append("dense")
    return built


def build_indexes(console: Console, root: Path, sources: tuple[str, ...]) -> dict[str, float]:
    """Store, BM25 and dense (minilm) for every source; reused when they still match their corpus.
    Returns the seconds each source's indexes took."""
    console.rule("indexer: store, BM25 and dense (all-MiniLM-L6-v2, bundled; about 20 snippets/s on this CPU)")
    encoders: dict = {}
    table = Table("source", "snippets", "store MB", "bm25 MB", "dense-minilm MB", "built now")
    steps = {}
    for source in sources:
        started = time.perf_counter()
        corpus = Corpus.open(root / source)
        built = ensure_indexes(corpus, "minilm", encoders, console.print)
        steps[f"indexer: {source} ({corpus.snippets:,} snippets): {', '.join(built) or 'reused'}"] = (
            time.perf_counter() - started
        )
        table.add_row(source, f"{corpus.snippets:,}", *(f"{_size_mb(corpus.path / name):.1f}"
                      for name in ("store", "bm25", "dense-minilm")), ", ".join(built) or "reused")  # fmt: skip
    console.print(table)
    return steps


if __name__ == "__main__":
    main()
