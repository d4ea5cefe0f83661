"""Inputs that are valid files but odd records: each must get a clear per-record error (file, line,
field) or a documented, reported treatment, and the rest of the build must stand."""

from __future__ import annotations

import bz2
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from pubmed_scaleup import load_template_articles, renumbered, write_pubmed_file

from conftest import PUBMED_SAMPLES, REPO, SAMPLES, run_indexer
from corpusbuild.ids import BadId, numeric_id, text_id
from medsnip.buildrecord import read_build_record
from medsnip.queries import read_query_file
from medsnip.snippet import iter_snippets

BEIR = SAMPLES / "ir" / "pubmedqa-beir"


def snippets_of(out: Path) -> list[dict]:
    return [s for shard in sorted(out.glob("shard-*.jsonl")) for s in iter_snippets(shard)]


def errors_by_line(out: Path) -> dict[int, str]:
    return {e["line"]: e["message"] for e in read_build_record(out)["errors"]}


def test_odd_jsonl_records_are_reported_one_by_one(tmp_path, run_corpusbuild):
    """Real BEIR records (PubMedQA) with one field broken per line; the file starts with a byte-order
    mark, which must not cost the first record."""
    real = [orjson.loads(line) for line in (BEIR / "corpus.jsonl").read_bytes().splitlines()[:12]]
    variants = [
        real[0],  # line 1, behind the BOM: fine
        {**real[1], "_id": 123456789012345678901234567890},
        {**real[2], "_id": "24\n77"},
        {**real[3], "_id": "with space"},
        {**real[4], "title": ["a", "list"]},
        {**real[5], "text": 42},
        {**real[6], "pmids": [1, 2, 123456789012345678901234567890]},
        {**real[7], "title": "", "text": "\u200b \u200b"},
        {**real[8], "title": "Aspirin after myocardial infarction", "text": ""},  # a title-only snippet
        {**real[9], "_id": 18446744073709551615},  # the largest 64-bit integer is a fine id
        real[10],
    ]
    lines = [json.dumps(record, ensure_ascii=False).encode() for record in variants]  # exact big integers
    corpus = tmp_path / "odd.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    result = run_corpusbuild("jsonl", corpus, "--source", "odd", "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert result.exit_code == 1
    errors = errors_by_line(out)
    assert errors == {
        2: "field _id holds an integer beyond 64 bits: write it as a JSON string",
        3: "id field '_id' is '24\\n77', which holds U+000A (whitespace and control characters break TREC runs "
        "and qrels)",
        4: "id field '_id' is 'with space', which holds SPACE (whitespace and control characters break TREC runs "
        "and qrels)",
        5: "title field 'title' is a JSON array, not text",
        6: "text field 'text' is a JSON number, not text",
        7: "field pmids[2] holds an integer beyond 64 bits: write it as a JSON string",
        8: "empty text field 'text' and no title: nothing to index",
    }
    built = {s["doc_id"]: s for s in snippets_of(out)}
    assert set(built) == {real[0]["_id"], real[8]["_id"], "18446744073709551615", real[10]["_id"]}
    title_only = built[real[8]["_id"]]
    assert title_only["content"] == "" and title_only["contents"] == "Aspirin after myocardial infarction"


def _pubmed_with_pmids(path: Path, pmids: list[str]) -> None:
    templates = load_template_articles(sorted(PUBMED_SAMPLES.glob("pubmed[0-9]*.xml")))
    templates = [t for t in templates if (t.findtext(".//AbstractText") or "").strip()]  # all become snippets
    write_pubmed_file(path, [renumbered(templates[i], pmid) for i, pmid in enumerate(pmids)])


def test_pmids_must_be_ascii_numbers_within_64_bits(tmp_path, run_corpusbuild):
    """A PMID in other digits, a superscript, one beyond 64 bits are bad records (not a traceback that
    stops every other file); leading zeros are read as the plain number and counted."""
    odd, fine = tmp_path / "odd.xml", tmp_path / "fine.xml"
    _pubmed_with_pmids(odd, ["\u0663\u0664\u0665", "\u00b2", "99999999999999999999", "0040000123", "40000124"])
    _pubmed_with_pmids(fine, ["40000200", "40000201"])
    out = tmp_path / "out"
    result = run_corpusbuild("pubmed", odd, fine, "--out", out, "--shards", 2, "--workers", 1, "--quiet")
    assert result.exit_code == 1
    record = read_build_record(out)
    messages = sorted(e["message"] for e in record["errors"])
    assert messages == [
        "PMID '\u00b2' is not a number (ASCII digits 0-9)",
        "PMID '\u0663\u0664\u0665' is not a number (ASCII digits 0-9)",
        f"PMID 99999999999999999999 is beyond 64 bits (at most {2**63 - 1})",
    ]
    assert all(e["file"] == str(odd) and e["line"] and "PubmedArticle #" in e["element"] for e in record["errors"])
    assert record["inputs"][0]["stats"]["ids_normalised"] == record["counts"]["ids_normalised"] == 1
    assert "ids with leading zeros, read as numbers" in result.output
    assert {s["doc_id"] for s in snippets_of(out)} >= {"40000123", "40000124", "40000200", "40000201"}


def test_id_rules():
    assert numeric_id(" 007 ") == (7, True) and numeric_id("7") == (7, False)
    for text in ("", "7a", "-7", "\u0967", str(2**63)):
        with pytest.raises(BadId):
            numeric_id(text)
    assert text_id(2**64 - 1) == "18446744073709551615" and text_id("PMC123-4") == "PMC123-4"
    for value in (None, True, 1.5, "", "a\tb", "a\u200bb", "a\u2028b", ["x"]):
        with pytest.raises(BadId):
            text_id(value)


def test_query_files_with_a_byte_order_mark_or_a_huge_query(tmp_path):
    """Windows tools write a BOM; a 1 MB query is read (the server's own limit then answers for it)."""
    tsv = tmp_path / "q.tsv"
    tsv.write_bytes(b"\xef\xbb\xbfid\tquery\nq1\taspirin\nq2\t" + b"heart " * 200_000 + b"\n")
    items = read_query_file(tsv)
    assert [i.id for i in items] == ["q1", "q2"] and len(items[1].query) == 1_199_999
    headerless = tmp_path / "h.tsv"
    headerless.write_bytes(b"\xef\xbb\xbfq1\taspirin\n")
    assert [i.id for i in read_query_file(headerless)] == ["q1"]
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_bytes(b'\xef\xbb\xbf{"id": "q1", "query": "aspirin"}\n')
    assert [i.id for i in read_query_file(jsonl)] == ["q1"]


def test_symlinked_folders_are_followed_and_dangling_links_reported(tmp_path, run_corpusbuild):
    books = tmp_path / "books"
    (books / "more").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (books / "Anatomy_Gray.txt").write_bytes((SAMPLES / "textbooks" / "books" / "Anatomy_Gray.txt").read_bytes())
    (elsewhere / "Neurology_Adams.txt").write_bytes(
        (SAMPLES / "textbooks" / "books" / "Neurology_Adams.txt").read_bytes()
    )
    os.symlink(elsewhere, books / "linked")  # a folder reached through a link
    os.symlink(books, books / "more" / "loop")  # a link back up: searched once
    os.symlink(tmp_path / "gone.txt", books / "Missing_Book.txt")  # dangling
    out = tmp_path / "out"
    result = run_corpusbuild("textbooks", books, "--out", out, "--shards", 1, "--workers", 1, "--quiet")
    assert result.exit_code == 1
    assert {s["doc_id"] for s in snippets_of(out)} == {"Anatomy_Gray", "Neurology_Adams"}
    [error] = read_build_record(out)["errors"]
    assert error["file"] == str(books / "Missing_Book.txt") and "dangling symbolic link" in error["message"]


def test_a_book_name_that_cannot_be_an_id(tmp_path, run_corpusbuild):
    books = tmp_path / "books"
    books.mkdir()
    (books / "Gray Anatomy.txt").write_bytes((SAMPLES / "textbooks" / "books" / "Anatomy_Gray.txt").read_bytes())
    (books / "Neurology_Adams.txt").write_bytes((SAMPLES / "textbooks" / "books" / "Neurology_Adams.txt").read_bytes())
    out = tmp_path / "out"
    result = run_corpusbuild("textbooks", books, "--out", out, "--shards", 1, "--workers", 1, "--quiet")
    assert result.exit_code == 1
    [error] = read_build_record(out)["errors"]
    assert "which holds SPACE" in error["message"] and "rename the file" in error["message"]
    assert {s["doc_id"] for s in snippets_of(out)} == {"Neurology_Adams"}


def test_a_recipe_root_given_where_a_corpus_is_expected(tmp_path, run_corpusbuild):
    """indexer and export name the folder a corpus root and list its sources (no KeyError); verify verifies
    each of the root's corpora."""
    from click.testing import CliRunner

    from corpusbuild.cli import main as corpusbuild_main
    from indexer.cli import main as indexer_main

    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'[recipe]\nname = "tiny"\n[[sources]]\nkind = "textbooks"\ninputs = ["{SAMPLES / "textbooks" / "books"}"]\n'
        "shards = 1\n"
    )
    root = tmp_path / "root"
    assert run_corpusbuild("build", recipe, "--out", root, "--workers", 1, "--quiet").exit_code == 0
    runner = CliRunner()
    for main, args in (
        (indexer_main, ["store", str(root)]),
        (corpusbuild_main, ["export", str(root), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl")]),
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 1, result.output
        assert "is a corpus root" in result.output and str(root / "textbooks") in result.output
        assert not isinstance(result.exception, KeyError)
    verified = runner.invoke(corpusbuild_main, ["verify", str(root)])
    assert verified.exit_code == 0 and f"{root / 'textbooks'}: OK (1 shards, 315 snippets" in verified.output
    run_indexer("store", root / "textbooks")


def test_templates_nested_past_the_parser_leave_no_debris(tmp_path, run_corpusbuild):
    """A real page with 2,000 nested templates inserted: mwparserfromhell gives up after about 33 levels
    and hands back the rest of the braces as text, which must not become dozens of snippets of `}}}}`."""
    dump = bz2.decompress((SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2").read_bytes())
    anchor = b"The principle is intended to ensure"
    assert dump.count(anchor) == 1
    nested = b"{{nowrap|" * 2000 + b"deep" + b"}}" * 2000
    damaged = tmp_path / "nested.xml.bz2"
    damaged.write_bytes(bz2.compress(dump.replace(anchor, nested + b" " + anchor)))
    out = tmp_path / "out"
    result = run_corpusbuild("wikipedia", damaged, "--out", out, "--shards", 1, "--workers", 1, "--quiet")
    assert result.exit_code == 0, result.output
    original = tmp_path / "original"
    run_corpusbuild(
        "wikipedia",
        SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2",
        "--out",
        original,
        "--shards",
        1,
        "--workers",
        1,
        "--quiet",
    )
    page = [s["content"] for s in snippets_of(out) if s["doc_id"] == "217916"]
    assert not any("{{" in text or "}}" in text for text in page)
    assert page == [s["content"] for s in snippets_of(original) if s["doc_id"] == "217916"]


def test_an_oversized_abstract_is_refused_and_memory_stays_bounded(tmp_path):
    """A 20 MB abstract (real text repeated): reported as a bad record with its PMID, the other citation
    of the file still built, and the build's peak memory stays near the ~70 MB of an ordinary file
    (cleaning and chunking must not multiply it, as a copy per step would: about 1 GB for 50 MB)."""
    templates = load_template_articles(sorted(PUBMED_SAMPLES.glob("pubmed[0-9]*.xml")))
    templates = [t for t in templates if (t.findtext(".//AbstractText") or "").strip()]
    huge = renumbered(templates[0], "41000000")
    element = huge.find(".//AbstractText")
    element.text = (element.text + " ") * (20_000_000 // (len(element.text) + 1))
    source = tmp_path / "huge.xml"
    write_pubmed_file(source, [huge, renumbered(templates[1], "41000001")])
    out = tmp_path / "out"
    build = [
        sys.executable,
        "-m",
        "corpusbuild.cli",
        "pubmed",
        str(source),
        "--out",
        str(out),
        "--shards",
        "1",
        "--workers",
        "1",
        "--quiet",
    ]
    measure = (
        "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    result = subprocess.run([sys.executable, "-c", measure, *build], cwd=REPO, capture_output=True, text=True)
    code, peak_kb = map(int, result.stdout.split()[-2:])
    assert code == 1
    [error] = read_build_record(out)["errors"]
    assert error["element"] == "PMID 41000000" and "more than --max-record-chars 1,000,000" in error["message"]
    assert {s["doc_id"] for s in snippets_of(out)} == {"41000001"}
    assert peak_kb < 200 * 1024, f"peak RSS {peak_kb // 1024} MB"
