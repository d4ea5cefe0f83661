"""Real-format PubMed files made from real records: scaled up with new PMIDs, or edited copies.

Benchmarks and resume tests need tens of thousands of citations and update/delete tests need PMIDs
that overlap across files; the repo ships a few hundred real records without such overlaps. Rather
than invent text, these helpers repeat or re-number real records and write a PubmedArticleSet file
(legacy MedlineCitation records are wrapped in PubmedArticle, as NLM's current files have them).
"""

from __future__ import annotations

import copy
import gzip
from collections.abc import Iterable, Sequence
from pathlib import Path

from lxml import etree

from corpusbuild.inputs import decompressed

HEADER = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
    b'"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">\n'
    b"<PubmedArticleSet>\n"
)
FOOTER = b"</PubmedArticleSet>\n"


def load_template_articles(sources: Sequence[Path]) -> list[etree._Element]:
    """Every citation in `sources` as a PubmedArticle element, in file order."""
    articles = []
    for path in sources:
        with open(path, "rb") as raw:
            magic = raw.read(4)
            raw.seek(0)
            parser = etree.XMLParser(no_network=True, huge_tree=True)
            root = etree.parse(decompressed(raw, magic), parser).getroot()
        if root.tag == "PubmedArticleSet":
            articles.extend(copy.deepcopy(a) for a in root.iterfind("PubmedArticle"))
        elif root.tag == "MedlineCitationSet":
            for citation in root.iterfind("MedlineCitation"):
                wrapper = etree.Element("PubmedArticle")
                wrapper.append(copy.deepcopy(citation))
                articles.append(wrapper)
    return articles


def renumbered(article: etree._Element, pmid: int | str) -> etree._Element:
    """A copy of `article` whose MedlineCitation/PMID is `pmid`."""
    clone = copy.deepcopy(article)
    clone.find("MedlineCitation/PMID").text = str(pmid)
    return clone


def without_abstract(article: etree._Element) -> etree._Element:
    """A copy of `article` with its Abstract removed (a later version that lost its abstract)."""
    clone = copy.deepcopy(article)
    for abstract in clone.iterfind("MedlineCitation/Article/Abstract"):
        abstract.getparent().remove(abstract)
    return clone


def write_pubmed_file(out_path: Path, articles: Iterable[etree._Element], deletions: Sequence[int] = ()) -> None:
    """Write a PubmedArticleSet (gzip if the name ends in .gz), with a DeleteCitation block at the end
    when `deletions` is given, as NLM's update files have."""
    opener = gzip.open if out_path.suffix == ".gz" else open
    with opener(out_path, "wb") as out:
        out.write(HEADER)
        for article in articles:
            out.write(etree.tostring(article, encoding="UTF-8", xml_declaration=False).strip() + b"\n")
        if deletions:
            out.write(b"<DeleteCitation>\n")
            for pmid in deletions:
                out.write(f'<PMID Version="1">{pmid}</PMID>\n'.encode())
            out.write(b"</DeleteCitation>\n")
        out.write(FOOTER)


def write_scaled_pubmed(sources: Sequence[Path], out_path: Path, count: int, first_pmid: int) -> list[int]:
    """Write `count` real citations (round-robin over `sources`) as PMIDs first_pmid, first_pmid+1, ..."""
    templates = load_template_articles(sources)
    if not templates:
        raise ValueError("no PubMed citations found in the template files")
    pmids = list(range(first_pmid, first_pmid + count))
    articles = (renumbered(templates[i % len(templates)], pmid) for i, pmid in enumerate(pmids))
    write_pubmed_file(out_path, articles)
    return pmids
