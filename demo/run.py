"""`make demo`: `medsnip build manifests/demo.toml` (every bundled real sample source and its store, BM25
and dense indexes, reused when still current), show what came out, serve the root with searchd, query
it, and build a small curation benchmark with refkit."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from corpusbuild.engine.verify import verify_build
from demo import shortened
from demo.refkit_walkthrough import curation_walkthrough, show_item
from medsnip.snippet import SHARD_GLOB, iter_snippets
from pipeline.cli import main as medsnip_main

REPO = Path(__file__).resolve().parents[1]
# A structured abstract (labels kept, split at a section boundary), a legacy MEDLINE citation, and one
# snippet of each other source.
EXAMPLE_IDS = (
    "pubmed:27797938:1",
    "pubmed:10540283:0",
    "pmc:pone.0000217:4",
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
    began = started = time.perf_counter()
    console.rule(
        "medsnip build manifests/demo.toml: real PubMed, PMC NXML, textbook and Wikipedia samples, "
        "each with a store, BM25 and MiniLM dense index (about 20 snippets/s on this CPU)"
    )
    recipe = REPO / "manifests" / "demo.toml"
    try:
        medsnip_main(
            ["build", str(recipe), "--out", str(args.out), "--workers", "2", "--require-checksums", "--quiet"],
            standalone_mode=False,
        )
    except SystemExit as stop:
        if stop.code:
            raise
    steps["medsnip build: 5 sources, their indexes (reused when current)"] = time.perf_counter() - started
    started = time.perf_counter()
    sources = ("pubmed", "pmc", "textbooks", "wikipedia", "pubmedqa")
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
    console.print(f"corpus root: {args.out} (build.json lists every source's record; serve.json what searchd serves)")
    steps["corpusbuild verify, example snippets"] = time.perf_counter() - started
    steps.update(serve_and_query(console, args.out, args.out / "refkit"))
    table = Table("step", "seconds", title="make demo, step by step (this run)")
    for step, seconds in [*steps.items(), ("total", time.perf_counter() - began)]:
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
            console.print(
                f"searchd {info.server_version} on {address}: "
                + ", ".join(f"{c.name} ({c.snippets:,})" for c in info.corpora)
            )
            for question in DEMO_QUERIES:
                response = client.search(question, k=5)
                table = Table(
                    "#",
                    "RRF",
                    "id",
                    "ranks (corpus/retriever)",
                    "title / content",
                    title=f"{question}  [{response.took_ms:.0f} ms]",
                )
                for hit in response.hits:
                    ranks = ", ".join(f"{r.corpus}/{r.retriever} {r.rank}" for r in hit.retrievers)
                    table.add_row(
                        str(hit.rank),
                        f"{hit.score:.4f}",
                        escape(hit.id),
                        escape(ranks),
                        f"[bold]{escape(hit.title)}[/bold]\n{escape(shortened(hit.content, 160))}",
                    )
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


if __name__ == "__main__":
    main()
