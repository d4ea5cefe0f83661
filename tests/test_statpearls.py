"""`corpusbuild statpearls` on real PMC JATS articles, a BITS book part made from one, and tarballs."""

from __future__ import annotations

import io
import tarfile

from lxml import etree

from conftest import SAMPLES
from helpers import all_snippets, shard_bytes
from medsnip.buildrecord import read_build_record

NXML = SAMPLES / "nxml"


def bits_from_jats(jats_path) -> bytes:
    """No real StatPearls (BITS) file is public in a form this repo can ship, so this re-wraps a real
    JATS article's title and body into BITS's book-part-wrapper/book-part (an edited copy)."""
    article = etree.parse(str(jats_path), etree.XMLParser(load_dtd=False, no_network=True)).getroot()
    title = article.find("front/article-meta/title-group/article-title")
    wrapper = etree.Element("book-part-wrapper", {"content-type": "chapter"})
    part = etree.SubElement(wrapper, "book-part", {"id": "article-17", "book-part-type": "chapter"})
    meta = etree.SubElement(part, "book-part-meta")
    etree.SubElement(meta, "book-part-id", {"book-part-id-type": "nbk"}).text = "NBK430685"
    group = etree.SubElement(meta, "title-group")
    new_title = etree.SubElement(group, "title")
    new_title.text = "".join(title.itertext())
    part.append(article.find("body"))
    return etree.tostring(wrapper, xml_declaration=True, encoding="UTF-8")


def test_jats_articles_become_titled_paragraph_snippets(tmp_path, run_corpusbuild):
    out = tmp_path / "sp"
    result = run_corpusbuild("statpearls", NXML, "--out", out, "--shards", 2, "--quiet")
    assert result.exit_code == 0, result.output
    snippets = all_snippets(out)
    assert {s["doc_id"] for s in snippets} == {
        "1471-2180-11-174",
        "1472-6831-8-11",
        "6605965a",
        "ehp-116-1694",
        "pntd.0002065",
        "pone.0000217",
    }
    assert max(len(s["content"]) for s in snippets) <= 1000
    for snippet in snippets:
        for remnant in ("<xref", "<italic", "</", "<table", "<tr>"):
            assert remnant not in snippet["content"]
    pone = sorted((s for s in snippets if s["doc_id"] == "pone.0000217"), key=lambda s: s["chunk"])
    assert pone[0]["title"] == (
        "Quantifying Organismal Complexity using a Population Genetic Approach -- Abstract -- Background"
    )
    assert pone[0]["id"] == "statpearls:pone.0000217:0"
    assert pone[0]["meta"]["ids"]["pmid"] == "17299597"
    assert any(" -- Methods -- " in s["title"] or s["title"].endswith(" -- Methods") for s in pone)
    # the reference list is dropped: a cited title from it appears in no snippet
    assert not any("Metazoan complexity and evolution" in s["content"] for s in pone)
    # table captions are kept as text, table cells are not
    lysis = [s for s in snippets if s["doc_id"] == "1471-2180-11-174"]
    assert any("Table 1 Effects of holin allelic sequences on the stochasticity" in s["content"] for s in lysis)
    assert not any("Strain" in s["content"] and "WT" in s["content"] and "\t" in s["content"] for s in lysis)
    # short paragraphs were merged into the previous one of their section
    assert sum(len(s["content"]) < 200 for s in snippets) < len(snippets) * 0.1


def test_bits_book_part_and_tarball(tmp_path, run_corpusbuild):
    bits = bits_from_jats(NXML / "pone.0000217.nxml")
    tarball = tmp_path / "statpearls_NBK430685.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for name, data in [("statpearls_NBK430685/article-17.nxml", bits)] + [
            (f"statpearls_NBK430685/{p.name}", p.read_bytes()) for p in sorted(NXML.glob("*.nxml"))[:3]
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    out = tmp_path / "sp"
    result = run_corpusbuild("statpearls", tarball, "--out", out, "--shards", 2, "--quiet")
    assert result.exit_code == 0, result.output
    snippets = all_snippets(out)
    chapter = sorted((s for s in snippets if s["doc_id"] == "article-17"), key=lambda s: s["chunk"])
    assert chapter[0]["meta"]["format"] == "bits" and chapter[0]["meta"]["ids"] == {"nbk": "NBK430685"}
    assert chapter[0]["title"].startswith("Quantifying Organismal Complexity using a Population Genetic Approach -- ")
    assert len({s["doc_id"] for s in snippets}) == 4

    two = tmp_path / "two"
    run_corpusbuild("statpearls", tarball, NXML, "--out", two, "--shards", 3, "--workers", 2, "--quiet")
    one = tmp_path / "one"
    run_corpusbuild("statpearls", tarball, NXML, "--out", one, "--shards", 3, "--workers", 1, "--quiet")
    assert shard_bytes(one) == shard_bytes(two)


def test_bad_nxml_inputs(tmp_path, run_corpusbuild):
    good = (NXML / "pone.0000217.nxml").read_bytes()
    broken = good.replace(b"</article-title>", b"</article-titel>", 1)
    tarball = tmp_path / "statpearls.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for name, data in [("a/good.nxml", good), ("a/broken.nxml", broken)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(tarball.read_bytes()[: len(tarball.read_bytes()) // 2])
    (tmp_path / "empty.nxml").write_bytes(b"")
    not_jats = tmp_path / "pubmed.nxml"
    not_jats.write_bytes((SAMPLES / "pubmed" / "pubmed4.xml").read_bytes())
    out = tmp_path / "out"
    result = run_corpusbuild(
        "statpearls", tarball, truncated, tmp_path / "empty.nxml", not_jats, "--out", out, "--shards", 1, "--quiet"
    )
    assert result.exit_code == 1
    errors = {e["file"].rsplit("/", 1)[-1]: e for e in read_build_record(out)["errors"]}
    broken_line = broken[: broken.index(b"</article-titel>")].count(b"\n") + 1
    assert errors["broken.nxml"]["message"].startswith("malformed XML: Opening and ending tag mismatch")
    assert errors["broken.nxml"]["line"] == broken_line
    assert errors["broken.nxml"]["file"].endswith("statpearls.tar.gz:a/broken.nxml")
    assert "truncated or corrupt tar archive" in errors["cut.tar.gz"]["message"]
    assert errors["empty.nxml"]["message"] == "empty file: no XML content"
    assert errors["pubmed.nxml"]["message"] == "not JATS or BITS XML: root element <PubmedArticleSet>"
    assert {s["doc_id"] for s in all_snippets(out)} == {"good"}  # the tarball's good member still builds
