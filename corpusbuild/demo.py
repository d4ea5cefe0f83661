"""`make demo`: build the bundled real PubMed samples into snippet shards and show what came out."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from corpusbuild.cli import main as corpusbuild_main
from corpusbuild.verify import verify_build
from medsnip.snippet import SHARD_GLOB, iter_snippets

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "pubmed"
# A structured abstract (labels kept, split at a section boundary) and a legacy MEDLINE citation.
EXAMPLE_IDS = ("pubmed:27797938:1", "pubmed:10540283:0")


def show_snippet(console: Console, snippet: dict) -> None:
    meta = snippet["meta"]
    mesh = ", ".join(m["name"] + ("*" if m["major"] else "") for m in meta["mesh"][:6])
    chemicals = ", ".join(c["name"] for c in meta["chemicals"][:4]) or "-"
    body = (
        f"[bold]{escape(snippet['title'])}[/bold]\n\n{escape(snippet['content'])}\n\n"
        f"[dim]journal {escape(meta['journal'] or '-')} ({meta['year']}) | MeSH {escape(mesh)} ... | "
        f"chemicals {escape(chemicals)}[/dim]"
    )
    console.print(Panel(body, title=snippet["id"], title_align="left"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "demo")
    args = parser.parse_args()
    out = args.out / "pubmed"
    console = Console()
    console.rule("corpusbuild pubmed samples/pubmed (9 real files: baseline/update, efetch, legacy MEDLINE)")
    corpusbuild_main(
        ["pubmed", str(SAMPLES), "--out", str(out), "--shards", "4", "--workers", "2"], standalone_mode=False
    )
    differences, summary = verify_build(out)
    console.print(f"verify: {'OK, ' + summary if not differences else differences}")
    console.rule("two example snippets")
    wanted = {}
    for shard in sorted(out.glob(SHARD_GLOB)):
        for snippet in iter_snippets(shard):
            if snippet["id"] in EXAMPLE_IDS:
                wanted[snippet["id"]] = snippet
    for snippet_id in EXAMPLE_IDS:
        show_snippet(console, wanted[snippet_id])
    console.print(f"shards and build.json are in {out}")


if __name__ == "__main__":
    main()
