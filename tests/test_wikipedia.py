"""`corpusbuild wikipedia` on real enwiki dump slices (samples/wikipedia)."""

from __future__ import annotations

import bz2

from conftest import SAMPLES
from helpers import all_snippets, shard_bytes
from medsnip.buildrecord import read_build_record

SLICE = SAMPLES / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TABLES = SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2"
HEAD = SAMPLES / "wikipedia" / "enwiki-2016-first-80-pages.xml.bz2"  # the slice's first 80 pages (16 articles)
REMNANTS = ("{{", "}}", "[[", "]]", "|}", "{|", "<ref", "</ref", "<!--", "[[File:", "Category:")


def test_dump_slice_becomes_clean_section_snippets(tmp_path, run_corpusbuild):
    out = tmp_path / "wiki"
    result = run_corpusbuild("wikipedia", SLICE, TABLES, "--out", out, "--shards", 3, "--quiet")
    assert result.exit_code == 0, result.output
    record = read_build_record(out)
    counts = record["counts"]
    assert counts["skipped"]["redirect"] == 99 and counts["skipped"]["disambiguation"] == 8
    assert counts["replaced"] == 1  # page 316 is in both dumps: the one given last wins
    snippets = all_snippets(out)
    assert len(snippets) > 4000
    for snippet in snippets:
        assert len(snippet["content"]) <= 1000
        for remnant in REMNANTS:
            assert remnant not in snippet["content"], (snippet["id"], remnant)
    titles = {s["title"] for s in snippets}
    assert "Autism -- Characteristics -- Social development" in titles
    assert not any(t.endswith(("-- References", "-- External links", "-- See also")) for t in titles)
    autism = sorted((s for s in snippets if s["doc_id"] == "25"), key=lambda s: s["chunk"])
    assert autism[0]["id"] == "wikipedia:25:0" and autism[0]["title"] == "Autism"
    assert autism[0]["content"].startswith("Autism is a neurodevelopmental disorder characterized by")
    assert autism[0]["meta"] == {"page_id": 25, "page_title": "Autism", "section": []}
    # a paragraph longer than a chunk is split with the splitter's 200-character overlap; paragraphs
    # that fit are split at their boundaries (no overlap needed there)
    same_section = [(a, b) for a, b in zip(autism, autism[1:], strict=False) if a["title"] == b["title"]]
    overlapping = [(a, b) for a, b in same_section if b["content"][:30] in a["content"]]
    assert overlapping and all(150 <= len(b["content"]) for _, b in overlapping)


def test_table_heavy_pages_lose_their_tables(tmp_path, run_corpusbuild):
    out = tmp_path / "tables"
    run_corpusbuild("wikipedia", TABLES, "--out", out, "--shards", 1, "--quiet")
    snippets = all_snippets(out)
    assert snippets
    for snippet in snippets:
        assert "|-" not in snippet["content"] and "{|" not in snippet["content"]
        assert "class=" not in snippet["content"] and "wikitable" not in snippet["content"]


def test_declared_encoding_and_byte_order_mark_are_honoured(tmp_path, run_corpusbuild):
    """The same real dump re-encoded as UTF-16 with a BOM (and its XML declaration saying so)."""
    xml = bz2.decompress(TABLES.read_bytes()).decode("utf-8")
    if xml.startswith("<?xml"):
        xml = xml[xml.index("?>") + 2 :]
    utf16 = tmp_path / "enwiki-utf16.xml"
    utf16.write_bytes(('<?xml version="1.0" encoding="UTF-16"?>' + xml).encode("utf-16"))
    plain, reencoded = tmp_path / "plain", tmp_path / "utf16"
    run_corpusbuild("wikipedia", TABLES, "--out", plain, "--shards", 2, "--quiet")
    assert run_corpusbuild("wikipedia", utf16, "--out", reencoded, "--shards", 2, "--quiet").exit_code == 0
    assert shard_bytes(plain) == shard_bytes(reencoded)


def test_worker_counts_give_identical_shards(tmp_path, run_corpusbuild):
    one, two = tmp_path / "one", tmp_path / "two"
    run_corpusbuild("wikipedia", HEAD, TABLES, "--out", one, "--shards", 4, "--workers", 1, "--quiet")
    run_corpusbuild("wikipedia", HEAD, TABLES, "--out", two, "--shards", 4, "--workers", 2, "--quiet")
    assert shard_bytes(one) == shard_bytes(two)


def test_bad_dumps(tmp_path, run_corpusbuild):
    data = TABLES.read_bytes()
    truncated = tmp_path / "cut.xml.bz2"
    truncated.write_bytes(data[: len(data) // 2])
    xml = bz2.decompress(data)
    malformed = tmp_path / "malformed.xml"
    malformed.write_bytes(xml.replace(b"</title>", b"</titel>", 1))
    empty = tmp_path / "empty.xml.bz2"
    empty.write_bytes(bz2.compress(b""))
    not_wiki = tmp_path / "pubmed.xml"
    not_wiki.write_bytes((SAMPLES / "pubmed" / "pubmed4.xml").read_bytes())
    out = tmp_path / "out"
    result = run_corpusbuild("wikipedia", truncated, malformed, empty, not_wiki, HEAD, "--out", out, "--quiet")
    assert result.exit_code == 1
    errors = {e["file"].rsplit("/", 1)[-1]: e for e in read_build_record(out)["errors"]}
    assert "truncated or corrupt compressed stream" in errors["cut.xml.bz2"]["message"]
    assert errors["malformed.xml"]["message"].startswith("malformed XML: Opening and ending tag mismatch")
    assert errors["malformed.xml"]["line"] == xml[: xml.index(b"</title>")].count(b"\n") + 1
    assert errors["empty.xml.bz2"]["message"].startswith("empty file")
    assert errors["pubmed.xml"]["message"] == "not a MediaWiki dump: root element <PubmedArticleSet>"
    assert len({s["doc_id"] for s in all_snippets(out)}) == 16  # the good dump's 16 articles still build


def test_stripping_refs_and_comments_before_parsing_changes_nothing():
    """The fast path (refs and comments removed before mwparserfromhell parses) gives the same sections
    as parsing everything, on every page of both real dump samples and on edge cases."""
    from lxml import etree

    from corpusbuild.sources.wikipedia.wikitext import wiki_sections

    texts = []
    for dump in (SLICE, TABLES):
        root = etree.fromstring(bz2.decompress(dump.read_bytes()), etree.XMLParser(huge_tree=True))
        texts += [t.text or "" for t in root.iter("{*}text")]
    texts += [
        "A<ref>x <!-- </ref> --> y</ref> b.",  # a closing tag inside a comment inside a ref
        "A<ref name=a/> b<REF group=n>{{cite web|url=x}}</REF>.",
        "Unclosed <ref>note and <!-- unclosed comment",
        "[[Link|label<ref>r</ref>]] and {{efn|note<ref>r</ref>}} text.",
    ]
    assert len(texts) > 200
    for text in texts:
        fast = [(s.path, s.text) for s in wiki_sections(text)]
        assert fast == [(s.path, s.text) for s in wiki_sections(text, prestrip=False)], text[:200]
