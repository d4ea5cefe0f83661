"""Streaming reader for PubMed/MEDLINE XML: PubmedArticleSet (baseline, update, efetch) and the
legacy MedlineCitationSet layout.

Uses lxml iterparse and clears every record once read, so memory stays flat whatever the file size.
Yields raw (uncleaned) fields; cleaning and chunking happen downstream.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from lxml import etree

from corpusbuild.errors import InputError, InputProblem

ROOT_TAGS = ("PubmedArticleSet", "MedlineCitationSet")
_RECORD_TAGS = ("PubmedArticle", "MedlineCitation", "PubmedBookArticle", "DeleteCitation")
_YEAR_RE = re.compile(r"\b(1[6-9]\d\d|2\d\d\d)\b")


@dataclass(slots=True)
class RawArticle:
    """One citation as found in the XML (text not yet cleaned)."""

    pmid: int
    line: int
    title: str
    sections: list[tuple[str | None, str]]
    journal: str | None
    year: int | None
    languages: list[str]
    publication_types: list[dict]
    mesh: list[dict]
    chemicals: list[dict]
    keywords: list[str]


@dataclass(slots=True)
class Deletion:
    """A DeleteCitation block: these PMIDs are withdrawn as of this file."""

    pmids: list[int]
    line: int


@dataclass(slots=True)
class SkippedRecord:
    """A record that is read but never becomes a snippet (e.g. a PubmedBookArticle)."""

    pmid: int
    line: int
    reason: str


@dataclass(slots=True)
class BadRecord:
    """A record the file carries but that cannot be used; the rest of the file is still read."""

    problem: InputProblem


@dataclass
class FileSummary:
    """What a reader learned about the file itself, filled in as it streams."""

    root_tag: str | None = None
    records: int = 0
    extra: dict = field(default_factory=dict)


def _text(element) -> str:
    """All text inside an element, inline markup (<i>, <sup>, ...) kept as its text."""
    if element is None:
        return ""
    return "".join(element.itertext())


def _year(journal_issue) -> int | None:
    if journal_issue is None:
        return None
    year = journal_issue.findtext("PubDate/Year")
    if year and year.strip().isdigit():
        return int(year.strip())
    medline_date = journal_issue.findtext("PubDate/MedlineDate")
    if medline_date:
        match = _YEAR_RE.search(medline_date)
        if match:
            return int(match.group(1))
    return None


def _yes(value: str | None) -> bool:
    return value == "Y"


def _mesh(citation) -> list[dict]:
    headings = []
    for heading in citation.iterfind("MeshHeadingList/MeshHeading"):
        descriptor = heading.find("DescriptorName")
        if descriptor is None:
            continue
        headings.append(
            {
                "ui": descriptor.get("UI"),
                "name": _text(descriptor).strip(),
                "major": _yes(descriptor.get("MajorTopicYN")),
                "qualifiers": [
                    {"ui": q.get("UI"), "name": _text(q).strip(), "major": _yes(q.get("MajorTopicYN"))}
                    for q in heading.iterfind("QualifierName")
                ],
            }
        )
    return headings


def _chemicals(citation) -> list[dict]:
    chemicals = []
    for chemical in citation.iterfind("ChemicalList/Chemical"):
        substance = chemical.find("NameOfSubstance")
        if substance is None:
            continue
        chemicals.append(
            {
                "ui": substance.get("UI"),
                "name": _text(substance).strip(),
                "registry_number": (chemical.findtext("RegistryNumber") or "").strip() or None,
            }
        )
    return chemicals


def _article_fields(citation, pmid: int, line: int) -> RawArticle:
    article = citation.find("Article")
    if article is None:
        article_title, sections, journal, year, languages, pub_types = "", [], None, None, [], []
    else:
        title_element = article.find("ArticleTitle")
        article_title = _text(title_element)
        if not article_title.strip():
            article_title = _text(article.find("VernacularTitle"))
        sections = [
            (abstract_text.get("Label"), _text(abstract_text))
            for abstract_text in article.iterfind("Abstract/AbstractText")
        ]
        journal_element = article.find("Journal")
        journal = None
        year = None
        if journal_element is not None:
            journal = (journal_element.findtext("Title") or "").strip() or None
            year = _year(journal_element.find("JournalIssue"))
        languages = [(lang.text or "").strip() for lang in article.iterfind("Language") if lang.text]
        pub_types = [
            {"ui": pt.get("UI"), "name": _text(pt).strip()}
            for pt in article.iterfind("PublicationTypeList/PublicationType")
        ]
    keywords = [
        _text(keyword).strip() for keyword in citation.iterfind("KeywordList/Keyword") if _text(keyword).strip()
    ]
    return RawArticle(
        pmid=pmid,
        line=line,
        title=article_title,
        sections=sections,
        journal=journal,
        year=year,
        languages=languages,
        publication_types=pub_types,
        mesh=_mesh(citation),
        chemicals=_chemicals(citation),
        keywords=keywords,
    )


def _parse_pmid(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _release(element) -> None:
    """Free a finished record and the siblings before it (the iterparse memory idiom)."""
    element.clear(keep_tail=False)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


def iter_pubmed_records(
    stream: BinaryIO, file_label: str, summary: FileSummary | None = None
) -> Iterator[RawArticle | Deletion | SkippedRecord | BadRecord]:
    """Yield the records of one PubMed/MEDLINE XML stream in document order.

    Raises InputError for problems that make the whole file unusable (malformed or truncated XML,
    empty file, not PubMed XML); yields BadRecord for a single unusable record (e.g. a PMID that is
    not a number) so the caller can report it and go on.
    """
    summary = summary if summary is not None else FileSummary()
    context = etree.iterparse(
        stream,
        events=("end",),
        tag=_RECORD_TAGS,
        no_network=True,
        load_dtd=False,
        resolve_entities=False,
        huge_tree=True,
        remove_blank_text=False,
    )
    ordinal = 0
    last_line = 0
    try:
        for _event, element in context:
            if summary.root_tag is None:
                summary.root_tag = element.getroottree().getroot().tag
                if summary.root_tag not in ROOT_TAGS:
                    raise InputError(
                        InputProblem(
                            file_label,
                            f"not PubMed XML: root element <{summary.root_tag}>, "
                            f"expected <{ROOT_TAGS[0]}> or <{ROOT_TAGS[1]}>",
                            line=1,
                        )
                    )
            tag = element.tag
            line = element.sourceline or 0
            last_line = line
            if tag == "MedlineCitation" and element.getparent().tag != "MedlineCitationSet":
                continue  # part of a PubmedArticle; handled when that record ends
            ordinal += 1
            summary.records += 1
            if tag == "DeleteCitation":
                pmids = []
                for pmid_element in element.iterfind("PMID"):
                    pmid = _parse_pmid(pmid_element.text)
                    if pmid is None:
                        yield BadRecord(
                            InputProblem(
                                file_label,
                                f"PMID {pmid_element.text!r} is not a number",
                                line=pmid_element.sourceline,
                                element="DeleteCitation/PMID",
                            )
                        )
                    else:
                        pmids.append(pmid)
                yield Deletion(pmids=pmids, line=line)
            else:
                if tag == "PubmedArticle":
                    citation = element.find("MedlineCitation")
                elif tag == "PubmedBookArticle":
                    citation = element.find("BookDocument")
                else:
                    citation = element
                pmid_element = citation.find("PMID") if citation is not None else None
                pmid = _parse_pmid(pmid_element.text if pmid_element is not None else None)
                if pmid is None:
                    found = None if pmid_element is None else pmid_element.text
                    where_line = pmid_element.sourceline if pmid_element is not None else line
                    yield BadRecord(
                        InputProblem(
                            file_label,
                            "missing PMID" if pmid_element is None else f"PMID {found!r} is not a number",
                            line=where_line,
                            element=f"{tag} #{ordinal}",
                        )
                    )
                elif tag == "PubmedBookArticle":
                    yield SkippedRecord(pmid=pmid, line=line, reason="book_article")
                else:
                    yield _article_fields(citation, pmid, line)
            _release(element)
        if summary.root_tag is None:
            root = context.root
            if root is None:
                raise InputError(InputProblem(file_label, "empty file: no XML element found", line=1))
            summary.root_tag = root.tag
            if root.tag not in ROOT_TAGS:
                raise InputError(
                    InputProblem(
                        file_label,
                        f"not PubMed XML: root element <{root.tag}>, "
                        f"expected <{ROOT_TAGS[0]}> or <{ROOT_TAGS[1]}>",
                        line=root.sourceline,
                    )
                )
    except etree.XMLSyntaxError as error:
        line = error.lineno if error.lineno else last_line
        message = error.msg or str(error)
        if "Document is empty" in message:
            raise InputError(InputProblem(file_label, "empty file: no XML content", line=1)) from error
        raise InputError(InputProblem(file_label, f"malformed XML: {message}", line=line)) from error
    except (EOFError, zlib.error, OSError) as error:  # gzip/bz2 raise EOFError or OSError
        raise InputError(
            InputProblem(
                file_label,
                f"truncated or corrupt compressed stream ({error}); the last complete record ends near here",
                line=last_line or None,
            )
        ) from error
