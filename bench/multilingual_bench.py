"""Chinese, French and German: the costs a user of other languages pays, against the reference tools.

- CJK chunking: corpusbuild's splitter with CJK_SEPARATORS against LangChain's
  RecursiveCharacterTextSplitter configured the same (keep_separator="end") on real Chinese text
  (zhwiki sections, WMT Medline, CMB-Clin cases), with proof the chunks are equal, at growing sizes;
- BM25: Anserini's CJK bigram analyzer against its English default on the same Chinese corpus (index
  time, index bytes, queries/s), and French/German against English on their corpora;
- dense: the shipped USE multilingual encoder's snippets/s on each language's snippets, against the
  bundled English MiniLM on the same snippets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MULTILINGUAL = REPO / "samples" / "multilingual"


def chinese_texts() -> list[str]:
    """Real Chinese text, paragraphs kept: zhwiki pages (cleaned, sections joined), the WMT Medline file,
    CMB-Clin cases with their answers."""
    from lxml import etree

    from corpusbuild.sources.wikipedia.language import wiki_language
    from corpusbuild.sources.wikipedia.wikitext import wiki_sections

    zh = wiki_language("zh", "bench")
    texts = [MULTILINGUAL.joinpath("medline", "wmt-wmt19.medline.zh-en.zh").read_text(encoding="utf-8")]
    cases = json.loads(MULTILINGUAL.joinpath("queries", "cmb-clin-test-qa.json").read_text(encoding="utf-8"))
    texts += [case["description"] + "\n\n" + "\n".join(p["answer"] for p in case["QA_pairs"]) for case in cases]
    dump = MULTILINGUAL / "wikipedia" / "cyberzhg-zhwiki-test-pages.xml"
    for element in etree.parse(str(dump)).iter("{*}text"):
        sections = wiki_sections(element.text or "", language=zh)
        if sections:
            texts.append("\n\n".join(section.text for section in sections))
    return texts


def chunker_rows(passes: int = 20) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from corpusbuild.chunking import CJK_SEPARATORS, chunk_text

    texts = chinese_texts()
    rows = []
    for size in (200, 1000):
        stock = RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=size // 5, separators=list(CJK_SEPARATORS), keep_separator="end"
        )
        batch = texts * passes
        started = time.perf_counter()
        reference = [stock.split_text(text) for text in batch]
        langchain_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ours = [chunk_text(text, size, size // 5, "cjk") for text in batch]
        our_seconds = time.perf_counter() - started
        characters = sum(map(len, batch))
        rows.append(
            f"| {size}/{size // 5} | {characters / 1e6:.1f} | {sum(map(len, ours)):,} | {ours == reference} | "
            f"{characters / langchain_seconds / 1e6:.2f} | {characters / our_seconds / 1e6:.2f} | "
            f"{langchain_seconds / our_seconds:.1f}x |"
        )
    return [
        "Real Chinese text (23 zhwiki pages, the WMT19 Medline file, 74 CMB-Clin cases with answers; "
        "paragraphs kept), 20 passes:",
        "",
        "| chunk/overlap | M chars | chunks | identical to LangChain | LangChain M chars/s | medsnip M chars/s | "
        "speed-up |",
        "|---|---:|---:|---|---:|---:|---:|",
        *rows,
        "",
    ]


def _build_root(work: Path) -> Path:
    root = work / "multilingual-root"
    if not (root / "build.json").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "corpusbuild",
                "build",
                str(REPO / "manifests" / "multilingual.toml"),
                "--out",
                str(root),
                "--workers",
                "2",
                "--quiet",
            ],
            check=True,
            cwd=REPO,
        )
    return root


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def bm25_rows(root: Path, work: Path) -> list[str]:
    """Each Medline corpus indexed with its language's analyzer and with the English one; queries: the
    first 30 characters of each snippet, 3 passes."""
    from indexer.bm25 import BM25Index, build_bm25
    from medsnip.corpus import Corpus

    rows = []
    for name in ("medline-zh", "medline-fr", "medline-de"):
        corpus = Corpus.open(root / name)
        snippets = [json.loads(line) for shard in corpus.shards for line in shard.path.open(encoding="utf-8")]
        queries, ids = [s["content"][:30] for s in snippets], [s["id"] for s in snippets]
        cells = []
        for language in (corpus.language, "en"):
            out = work / f"bm25-{name}-{language}"
            shutil.rmtree(out, ignore_errors=True)
            started = time.perf_counter()
            build_bm25(corpus, out, threads=2, language=language)
            build_seconds = time.perf_counter() - started
            index = BM25Index(out, corpus)
            index.search(queries, 10, threads=2)  # warm-up
            started = time.perf_counter()
            for _ in range(3):
                hits = index.search(queries, 10, threads=2)
            rate = 3 * len(queries) / (time.perf_counter() - started)
            own_first = sum(
                1 for position, query_hits in enumerate(hits) if query_hits and query_hits[0][0] == ids[position]
            )
            cells.append((language, build_seconds, _size_mb(out), rate, own_first / len(queries)))
            index.close()
        (own, build_own, mb_own, rate_own, top_own), (_, build_en, mb_en, rate_en, top_en) = cells
        rows.append(
            f"| {name} ({corpus.snippets}) | {own} | {build_own:.1f} s, {mb_own:.2f} MB, "
            f"{rate_own:,.0f} q/s, {top_own:.0%} | {build_en:.1f} s, {mb_en:.2f} MB, {rate_en:,.0f} q/s, "
            f"{top_en:.0%} |"
        )
    return [
        "BM25 on the WMT Medline corpora, each analyzed with its own language's Anserini analyzer and with the "
        "English default (build: one IndexCollection with 2 threads, JVM start included; queries: the first "
        "30 characters of every snippet, k=10, 2 threads; last figure: the share of queries whose own snippet "
        "ranks first):",
        "",
        "| corpus (snippets) | analyzer | own analyzer | English analyzer |",
        "|---|---|---|---|",
        *rows,
        "",
        "A verbatim prefix finds its own snippet with either analyzer (and slightly more often without "
        "stemming, which merges near-duplicate sentences' terms), so the share is a sanity check, not a quality "
        "measure; what the language's analyzer adds is matching inflected and unspaced forms: \"anticorps "
        'monoclonal biosimilaire" finds "anticorps monoclonaux biosimilaires" only through the French '
        "stemmer, and Chinese is indexed as overlapping bigrams rather than single characters "
        "(tests/test_multilingual.py). The bigram index is 1.7x the unigram one's size here.",
        "",
    ]


def dense_rows(root: Path) -> list[str]:
    from medsnip.corpus import Corpus
    from medsnip.encoders import DenseEncoder, preset

    encoders = {"use-multilingual": DenseEncoder(preset("use-multilingual")), "minilm": DenseEncoder(preset("minilm"))}
    rows = []
    for name in ("wikipedia-zh", "wikipedia-fr", "wikipedia-de"):
        corpus = Corpus.open(root / name)
        snippets = [json.loads(line) for shard in corpus.shards for line in shard.path.open(encoding="utf-8")][:200]
        rates = []
        for encoder in encoders.values():
            encoder.encode_snippets(snippets[:8])  # warm-up
            started = time.perf_counter()
            encoder.encode_snippets(snippets, batch_size=64)
            rates.append(len(snippets) / (time.perf_counter() - started))
        characters = sum(len(s["contents"]) for s in snippets) / len(snippets)
        rows.append(f"| {name} | {len(snippets)} | {characters:,.0f} | {rates[0]:,.1f} | {rates[1]:,.1f} |")
    return [
        "Embedding on the CPU (2 cores), the first 200 snippets of each Wikipedia corpus:",
        "",
        "| corpus | snippets | mean characters | use-multilingual snippets/s (shipped, 512 d) | "
        "minilm snippets/s (English only, 384 d, cut at 256 tokens) |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
    ]


def multilingual_section(work: Path) -> list[str]:
    root = _build_root(work)
    return [
        "## Multilingual (zh, fr, de)",
        "",
        *chunker_rows(),
        *bm25_rows(root, work),
        *dense_rows(root),
    ]
