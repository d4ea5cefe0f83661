"""MedRAG-compatible mode (`--medrag`, corpusbuild/sources/medrag.py): on the bundled samples, every source
gives exactly the ids, titles, contents and chunk boundaries that MedRAG's own scripts' logic gives
(tests/medrag_reference.py, run here on the same files), through the whole engine (shards, workers,
export, recipes). Also MedRAG's `concat` in every mode."""

from __future__ import annotations

import bz2
import json

import medrag_reference as reference
import pytest
from lxml import etree

from conftest import REPO, SAMPLES
from corpusbuild.recipe import load_recipe
from helpers import all_snippets
from medsnip.buildrecord import read_build_record
from medsnip.snippet import join_contents

FIELDS = ("id", "title", "content", "contents")


def built(out) -> list[dict]:
    return sorted(({key: s[key] for key in FIELDS} for s in all_snippets(out)), key=lambda row: row["id"])


def expected(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: row["id"])


@pytest.mark.parametrize("workers", [1, 2])
def test_textbooks_match_medrags_chunks(tmp_path, run_corpusbuild, workers):
    books = sorted((SAMPLES / "textbooks" / "books").glob("*.txt"))
    out = tmp_path / "textbooks"
    result = run_corpusbuild("textbooks", *books, "--medrag", "--out", out, "--workers", workers, "--quiet")
    assert result.exit_code == 0, result.output
    rows = expected([row for book in books for row in reference.textbook_rows(book)])
    assert len(rows) == 289  # the default mode gives 315: it collapses whitespace before splitting
    assert built(out) == rows
    assert read_build_record(out)["params"]["medrag"] is True


def test_pubmed_matches_medrags_line_extraction(tmp_path, run_corpusbuild):
    files = sorted((SAMPLES / "pubmed").iterdir())
    out = tmp_path / "pubmed"
    assert run_corpusbuild("pubmed", *files, "--medrag", "--out", out, "--quiet").exit_code == 0
    rows = expected([row for path in files for row in reference.pubmed_rows(path)])
    assert len(rows) > 100 and all(row["id"].startswith("PMID:") for row in rows)
    assert built(out) == rows
    # what the default mode does differently, on these very files: labels kept, entities decoded
    assert any("&" in row["content"] and ";" in row["content"] for row in rows) or any(
        row["content"] != " ".join(row["content"].split()) for row in rows
    )

    export = tmp_path / "medrag.jsonl"
    assert run_corpusbuild("export", out, "--format", "medrag", "--out", export).exit_code == 0
    exported = [json.loads(line) for line in export.read_text().splitlines()]
    assert sorted(exported, key=lambda row: row["id"]) == rows  # MedRAG's four keys, its ids


def test_statpearls_match_medrags_paragraph_walk(tmp_path, run_corpusbuild):
    files = sorted((SAMPLES / "nxml").glob("*.nxml"))
    out = tmp_path / "statpearls"
    result = run_corpusbuild("statpearls", *files, "--medrag", "--out", out, "--quiet")
    assert result.exit_code == 0, result.output
    rows = expected([row for path in files for row in reference.statpearls_rows(path)])
    assert len(rows) > 100
    assert built(out) == rows
    assert any(len(row["content"]) > 1000 for row in rows)  # MedRAG never splits a long paragraph


def test_wikipedia_chunks_whole_articles_like_medrag(tmp_path, run_corpusbuild):
    from corpusbuild.sources.wikipedia.wikitext import wiki_sections

    dumps = [  # real dump slices: the first 80 pages of the enwiki slice (16 articles), and the table-heavy one
        SAMPLES / "wikipedia" / "enwiki-2016-first-80-pages.xml.bz2",
        SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2",
    ]
    out = tmp_path / "wikipedia"
    assert run_corpusbuild("wikipedia", *dumps, "--medrag", "--out", out, "--quiet").exit_code == 0
    snippets = built(out)
    kept = {row["id"].rsplit("_", 1)[0] for row in snippets}
    pages = {}
    for dump in dumps:  # the last dump wins, as in the build
        for _, page in etree.iterparse(bz2.open(dump), tag="{*}page"):
            page_id = page.findtext("{*}id")
            if page_id in kept:
                pages[page_id] = (page.findtext("{*}title"), page.findtext("{*}revision/{*}text"))
            page.clear()
    rows = []
    for page_id, (title, wikitext) in pages.items():
        parts = [p for s in wiki_sections(wikitext) for p in ((s.path[-1],) if s.path else ()) + (s.text,) if p]
        rows += reference.wikipedia_rows(page_id, title, "\n\n".join(parts))
    assert len(pages) == len(kept) == 20  # the 16 articles of the first 80 pages and the 4 of the table dump
    assert snippets == expected(rows)


def test_contents_follow_medrags_concat_in_every_mode():
    assert (
        join_contents("Deep Learning for Retinal Recognition.", "Interlayer")
        == "Deep Learning for Retinal Recognition. Interlayer"
    )
    assert join_contents("Is it safe?", "Yes") == "Is it safe? Yes"
    assert join_contents("Anatomy_Gray", "The heart") == "Anatomy_Gray. The heart"
    assert join_contents("", "abstract only") == "abstract only"  # medsnip's default keeps no ". " prefix
    assert reference.medrag_concat("", "abstract only") == ". abstract only"  # MedRAG's does


def test_medcorp_recipe_builds_medrags_snippets():
    recipe = load_recipe(REPO / "manifests" / "medcorp-2026.toml", {"data": "/data"})
    assert {source.kind: source.params()["medrag"] for source in recipe.sources} == {
        "pubmed": True,
        "statpearls": True,
        "textbooks": True,
        "wikipedia": True,
    }
