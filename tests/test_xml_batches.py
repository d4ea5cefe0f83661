"""Reading PubMed in batches of whole records gives exactly what streaming the file with iterparse
gives: the same records, lines and errors (message, line and column), on real files and on damaged
copies of them, including batches that cannot be cut cleanly and hand the rest of the file back."""

from __future__ import annotations

import dataclasses
import gzip
import io
import random

import pytest
from isal import igzip
from isal.igzip_lib import IsalError
from pubmed_scaleup import write_scaled_pubmed

import corpusbuild.sources.pubmed.batches as xmlbatches
import corpusbuild.sources.pubmed.xml as pubmed_xml
from corpusbuild.errors import InputError
from corpusbuild.sources.pubmed.xml import BadRecord, FileSummary, iter_pubmed_records
from medsnip.buildrecord import read_build_record


def outcome(data: bytes, skip_without_abstract: bool = False) -> dict:
    """Every record (as plain data) and the error that ended the file, if any."""
    summary = FileSummary()
    records, error = [], None
    try:
        for record in iter_pubmed_records(io.BytesIO(data), "file.xml", summary, skip_without_abstract):
            records.append(record.problem.to_dict() if isinstance(record, BadRecord) else dataclasses.asdict(record))
    except InputError as failure:
        error = failure.problem.to_dict()
    return {"records": records, "error": error, "root": summary.root_tag, "count": summary.records}


def streamed_outcome(monkeypatch, data: bytes, skip_without_abstract: bool = False) -> dict:
    """The same file read the way it was before batches: iterparse from the first byte."""
    with monkeypatch.context() as patch:
        patch.setattr(pubmed_xml, "read_prolog", lambda *args: None)
        return outcome(data, skip_without_abstract)


def sample(pubmed_samples, name: str) -> bytes:
    data = (pubmed_samples / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def later_half(data: bytes, anchor: bytes, insert: bytes, after: bool = False, times: int = 9) -> bytes:
    """`insert` put before (or after) the first `times` occurrences of `anchor` in the second half."""
    middle = len(data) // 2
    head, tail = data[:middle], data[middle:]
    return head + tail.replace(anchor, anchor + insert if after else insert + anchor, times)


def damaged_copies(pubmed_samples) -> dict[str, bytes]:
    """Real files, and copies of them damaged in the ways that test the cut and the hand-back."""
    medline = sample(pubmed_samples, "medsamp2014.xml")  # pretty-printed MedlineCitationSet, 162 records
    update = sample(pubmed_samples, "pubmed20n1016.xml.gz")  # a PubmedArticleSet on one line
    lines = medline.decode().splitlines(keepends=True)
    broken = next(i for i, line in enumerate(lines) if i > 600 and "</ArticleTitle>" in line)
    lines[broken] = lines[broken].replace("</ArticleTitle>", "</ArticleTitel>")
    middle = medline.index(b"</MedlineCitation>", len(medline) // 2) + len(b"</MedlineCitation>")
    pretty_update = update.replace(b"<PubmedArticle>", b"\n<PubmedArticle>")
    pretty_update = pretty_update.replace(b"</DeleteCitation>", b"</DeleteCitation>\n")
    return {
        **{path.name: sample(pubmed_samples, path.name) for path in sorted(pubmed_samples.iterdir())},
        "tag mismatch": "".join(lines).encode(),
        "bad PMID": medline.replace(b'<PMID Version="1">10540283</PMID>', b'<PMID Version="1">1054O283</PMID>', 1),
        "cut in a record": medline[: len(medline) // 2],
        "cut after a record": medline[:middle] + b"\n",
        "content after the root": medline + b"<x/>\n",
        # from the middle on, so that batches are cut (and fooled) only after many good ones
        "end tag in comments": later_half(medline, b"<MedlineCitation ", b"<!-- </MedlineCitation>\n -->"),
        "end tag in comments between records": later_half(
            medline, b"</MedlineCitation>\n", b"<!-- </MedlineCitation>\n -->\n", after=True
        ),
        "end tag in CDATA": later_half(medline, b"<ArticleTitle>", b"<![CDATA[</MedlineCitation>\n]]>", after=True),
        "CRLF line ends": medline.replace(b"\n", b"\r\n"),
        "one record per line": pretty_update,
        "one line, cut": update[: len(update) * 2 // 3],
        "self-closing and bad deletions": pretty_update.replace(
            b"</PubmedArticleSet>",
            b'<DeleteCitation/>\n<DeleteCitation><PMID Version="1">x1</PMID><PMID Version="1">77</PMID>'
            b"</DeleteCitation>\n"
            b"</PubmedArticleSet>",
        ),
        "undefined entity": pretty_update.replace(b"<ArticleTitle>", b"<ArticleTitle>&foo;", 3),
        "bytes not UTF-8": pretty_update.replace(b"<ArticleTitle>", b"<ArticleTitle>\xff\xfe", 1),
        "Latin-1": sample(pubmed_samples, "pubmed4.xml")
        .decode()
        .encode("latin-1", "replace")
        .replace(b'<?xml version="1.0" ?>', b'<?xml version="1.0" encoding="ISO-8859-1"?>'),
        "root only": b'<?xml version="1.0"?>\n<PubmedArticleSet>\n</PubmedArticleSet>\n',
        "empty root": b'<?xml version="1.0"?>\n<PubmedArticleSet />\n',
        "other root": b'<?xml version="1.0"?>\n<foo><PubmedArticle/></foo>\n',
        "root tag in a comment": medline.replace(b"?>\n", b"?>\n<!-- <PubmedArticleSet> -->\n", 1),
        "empty": b"",
    }


@pytest.fixture
def batches_parsed(monkeypatch) -> list:
    """Every batch parsed from now on (so a test can tell that batches, not the fall-back, did the work)."""
    parsed = []
    original = xmlbatches.RecordBatches.__iter__

    def counting(self):
        for batch in original(self):
            parsed.append(batch)
            yield batch

    monkeypatch.setattr(xmlbatches.RecordBatches, "__iter__", counting)
    return parsed


@pytest.mark.parametrize("read_bytes", [4096, 1 << 17], ids=["many batches", "default batches"])
def test_batches_read_exactly_what_iterparse_reads(monkeypatch, pubmed_samples, read_bytes, batches_parsed):
    monkeypatch.setattr(xmlbatches, "READ_BYTES", read_bytes)
    monkeypatch.setattr(xmlbatches, "MAX_BATCH_BYTES", 64 * read_bytes)
    if read_bytes == 4096:  # so the comparison is between batches and iterparse, not iterparse twice
        least_batches = {"medsamp2014.xml": 100, "tag mismatch": 3, "end tag in comments": 50, "one record per line": 5}
    else:
        least_batches = {"medsamp2014.xml": 5, "CRLF line ends": 5}
    for name, data in damaged_copies(pubmed_samples).items():
        for skip in (False, True):
            batches_parsed.clear()
            assert outcome(data, skip) == streamed_outcome(monkeypatch, data, skip), name
            assert len(batches_parsed) >= least_batches.get(name, 0), name


def test_damaged_copies_really_are_damaged_where_meant(pubmed_samples):
    """Guards the test above: each damage gives the failure (or the success) it is meant to."""
    results = {name: outcome(data) for name, data in damaged_copies(pubmed_samples).items()}
    assert "ArticleTitel" in results["tag mismatch"]["error"]["message"]
    assert results["bad PMID"]["records"][0]["message"] == "PMID '1054O283' is not a number (ASCII digits 0-9)"
    assert results["cut in a record"]["error"] and results["cut after a record"]["error"]
    assert "Extra content" in results["content after the root"]["error"]["message"]
    for fooled in ("end tag in comments", "end tag in comments between records", "end tag in CDATA", "CRLF line ends"):
        assert results[fooled]["error"] is None and results[fooled]["count"] == 162, fooled
    assert "column" in results["one line, cut"]["error"]["message"]
    assert results["bytes not UTF-8"]["error"]["message"].startswith("wrong encoding")
    assert results["Latin-1"]["error"] is None and results["Latin-1"]["records"]
    assert results["other root"]["error"]["message"].startswith("not PubMed XML")
    assert results["empty"]["error"]["message"].startswith("empty file")
    assert results["root tag in a comment"]["count"] == 162


def test_a_file_without_clean_cuts_is_handed_back_whole(monkeypatch, pubmed_samples, batches_parsed):
    """pubmed20n1016 is written on one line: no batch can be cut, so it is streamed from its start."""
    monkeypatch.setattr(xmlbatches, "READ_BYTES", 4096)
    monkeypatch.setattr(xmlbatches, "MAX_BATCH_BYTES", 16384)
    result = outcome(sample(pubmed_samples, "pubmed20n1016.xml.gz"))
    assert batches_parsed == [] and result["error"] is None and result["count"] == 27


def test_record_lines_are_the_lines_of_their_start_tags(pubmed_samples, tmp_path):
    """Past line 65535 libxml2 keeps no exact line for an element; batches stay below it, so every
    record's line is exact in a file of half a million lines."""
    path = tmp_path / "pubmed25n0001.xml"
    write_scaled_pubmed(sorted(pubmed_samples.iterdir()), path, 3000, 50_000_000)
    data = path.read_bytes()
    lines = data.split(b"\n")
    assert len(lines) > 300_000
    result = outcome(data)
    assert result["count"] == 3000
    for record in result["records"]:
        assert lines[record["line"] - 1].lstrip().startswith(b"<PubmedArticle>"), record["line"]


def _isal_corrupted(data: bytes) -> bytes:
    """A copy of a real .gz whose deflate stream ISA-L rejects with its own IsalError (not an OSError)."""
    generator = random.Random(7)
    for _ in range(2000):
        damaged = bytearray(data)
        position = generator.randrange(20, len(data) - 20)
        damaged[position : position + 8] = bytes(generator.randrange(256) for _ in range(8))
        try:
            igzip.decompress(bytes(damaged))
        except IsalError:
            return bytes(damaged)
        except Exception:  # noqa: BLE001 - other damage (a CRC error) is not what this test needs
            continue
    raise AssertionError("no corruption found that ISA-L rejects as an invalid deflate block")


def test_an_invalid_deflate_block_is_a_reported_damaged_archive(tmp_path, pubmed_samples, run_corpusbuild):
    damaged = tmp_path / "pubmed20n1016.xml.gz"
    damaged.write_bytes(_isal_corrupted((pubmed_samples / "pubmed20n1016.xml.gz").read_bytes()))
    out = tmp_path / "out"
    result = run_corpusbuild("pubmed", damaged, pubmed_samples / "pubmed4.xml", "--out", out, "--quiet")
    assert result.exit_code == 1
    (error,) = read_build_record(out)["errors"]
    assert error["file"] == str(damaged) and "truncated or corrupt compressed stream" in error["message"]
    assert read_build_record(out)["counts"]["documents"] == 1  # pubmed4.xml still built


def test_records_are_the_children_of_the_root(pubmed_samples):
    """A PubmedArticle nested inside another record is part of that record, not a record of its own."""
    update = sample(pubmed_samples, "pubmed20n1016.xml.gz")
    nested = update.replace(
        b"</PubmedData>",
        b"<PubmedArticle><MedlineCitation><PMID>5</PMID></MedlineCitation></PubmedArticle></PubmedData>",
        1,
    )
    pmids = [r["pmid"] for r in outcome(nested)["records"] if "pmid" in r]
    assert 5 not in pmids and len(pmids) == len([r for r in outcome(update)["records"] if "pmid" in r])
