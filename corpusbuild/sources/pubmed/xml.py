"""Streaming reader for PubMed/MEDLINE XML: PubmedArticleSet (baseline, update, efetch) and the
legacy MedlineCitationSet layout.

Reads records in batches of about 128 KB of XML (corpusbuild.sources.pubmed.batches), or with lxml iterparse
clearing every record once read, so memory stays flat whatever the file size. Yields raw (uncleaned)
fields; cleaning and chunking happen downstream.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from lxml import etree

from corpusbuild.errors import InputError, InputProblem
from corpusbuild.ids import BadId, numeric_id
from corpusbuild.inputs import DECOMPRESSION_ERRORS
from corpusbuild.sources.pubmed.batches import RecordBatches, read_prolog
from corpusbuild.sources.xmltools import release, syntax_error_message

ROOT_TAGS = ("PubmedArticleSet", "MedlineCitationSet")
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
    ids_normalised: int = 0  # PMIDs written with leading zeros (corpusbuild.ids)
    extra: dict = field(default_factory=dict)


def _text(element) -> str:
    """All text inside an element, inline markup (<i>, <sup>, ...) kept as its text."""
    if element is None:
        return ""
    if len(element) == 0:  # no child elements: the common case, and 5x cheaper than itertext
        return element.text or ""
    return "".join(element.itertext())


def _first(element, tag: str):
    """First direct child with `tag`. The wanted child is usually the first (PMID in MedlineCitation,
    MedlineCitation in PubmedArticle), so that is checked before iterchildren (find() would go
    through the much slower ElementPath)."""
    if len(element) and element[0].tag == tag:
        return element[0]
    for child in element.iterchildren(tag):
        return child
    return None


def _plain(element) -> str:
    """Text of an element that carries no markup (controlled vocabulary: MeSH, chemicals, ...)."""
    return (element.text or "").strip()


def _year(journal_issue) -> int | None:
    pub_date = _first(journal_issue, "PubDate")
    if pub_date is None:
        return None
    for child in pub_date:
        if child.tag == "Year" and _plain(child).isdigit():
            return int(_plain(child))
        if child.tag == "MedlineDate":
            match = _YEAR_RE.search(child.text or "")
            if match:
                return int(match.group(1))
    return None


def _mesh(heading_list) -> list[dict]:
    """MeSH headings with their qualifiers, in one C-level walk over the names only (the DTD puts
    DescriptorName first in each MeshHeading, so a QualifierName belongs to the last descriptor)."""
    headings: list[dict] = []
    qualifiers: list[dict] = []
    for part in heading_list.iter("DescriptorName", "QualifierName"):
        entry = {"ui": part.get("UI"), "name": (part.text or "").strip(), "major": part.get("MajorTopicYN") == "Y"}
        if part.tag == "DescriptorName":
            qualifiers = entry["qualifiers"] = []
            headings.append(entry)
        elif headings:
            qualifiers.append(entry)
    return headings


def _chemicals(chemical_list) -> list[dict]:
    chemicals = []
    for chemical in chemical_list.iterchildren("Chemical"):
        substance = registry = None
        for part in chemical:
            if part.tag == "NameOfSubstance":
                substance = part
            elif part.tag == "RegistryNumber":
                registry = _plain(part) or None
        if substance is not None:
            chemicals.append({"ui": substance.get("UI"), "name": _plain(substance), "registry_number": registry})
    return chemicals


def _article_fields(citation, pmid: int, line: int, skip_without_abstract: bool) -> RawArticle | SkippedRecord:
    """One pass over the citation's children, one over the Article's, then MeSH, chemicals and keywords.

    An article with no abstract is returned as SkippedRecord before any metadata is read when the
    caller will skip it anyway (a third or more of PubMed citations have no abstract).
    """
    article = mesh_list = chemical_list = None
    keyword_lists = []
    for child in citation:  # one walk over the citation's children finds everything read below
        tag = child.tag
        if tag == "Article":
            article = child
        elif tag == "MeshHeadingList":
            mesh_list = child
        elif tag == "ChemicalList":
            chemical_list = child
        elif tag == "KeywordList":
            keyword_lists.append(child)
    title = vernacular = ""
    sections: list[tuple[str | None, str]] = []
    journal = year = None
    languages: list[str] = []
    pub_types: list[dict] = []
    if article is not None:
        abstract = _first(article, "Abstract")
        if abstract is not None:
            sections = [(text.get("Label"), _text(text)) for text in abstract.iterchildren("AbstractText")]
        if not sections and skip_without_abstract:
            return SkippedRecord(pmid=pmid, line=line, reason="no_abstract")
        for child in article:
            tag = child.tag
            if tag == "ArticleTitle":
                title = _text(child)
            elif tag == "VernacularTitle":
                vernacular = _text(child)
            elif tag == "Journal":
                journal_title = _first(child, "Title")
                journal = (_plain(journal_title) or None) if journal_title is not None else None
                issue = _first(child, "JournalIssue")
                year = _year(issue) if issue is not None else None
            elif tag == "Language":
                if _plain(child):
                    languages.append(_plain(child))
            elif tag == "PublicationTypeList":
                pub_types = [{"ui": pt.get("UI"), "name": _plain(pt)} for pt in child.iterchildren("PublicationType")]
    elif skip_without_abstract:
        return SkippedRecord(pmid=pmid, line=line, reason="no_abstract")
    keywords = [
        text
        for keyword_list in keyword_lists
        for text in (_text(k).strip() for k in keyword_list.iterchildren("Keyword"))
        if text
    ]
    mesh = _mesh(mesh_list) if mesh_list is not None else []
    chemicals = _chemicals(chemical_list) if chemical_list is not None else []
    return RawArticle(
        pmid=pmid,
        line=line,
        title=title if title.strip() else vernacular,
        sections=sections,
        journal=journal,
        year=year,
        languages=languages,
        publication_types=pub_types,
        mesh=mesh,
        chemicals=chemicals,
        keywords=keywords,
    )


def _require_pubmed_root(tag: str, file_label: str, line: int | None) -> None:
    if tag not in ROOT_TAGS:
        message = f"not PubMed XML: root element <{tag}>, expected <{ROOT_TAGS[0]}> or <{ROOT_TAGS[1]}>"
        raise InputError(InputProblem(file_label, message, line=line))


_RECORD_TAGS_OF_ROOT = {
    "PubmedArticleSet": ("PubmedArticle", "PubmedBookArticle", "DeleteCitation"),
    "MedlineCitationSet": ("MedlineCitation", "DeleteCitation"),
}
# What the streamed reader stops at: a record of either layout, kept if it is a child of the root.
_RECORD_TAGS = tuple(dict.fromkeys(tag for tags in _RECORD_TAGS_OF_ROOT.values() for tag in tags))
# The options of every parse of a PubMed file, streamed or in batches (the same records either way).
# Not collect_ids=False: libxml2 then tries to load the external DTD, and a batch parse of a file whose
# DOCTYPE names an http:// DTD (medsamp2014.xml) fails on the refused network access.
_PARSER_OPTIONS = {"no_network": True, "load_dtd": False, "resolve_entities": False, "huge_tree": True}


@dataclass
class _Progress:
    """Where a reader is in its file: records seen (the ordinal in error messages), the last line."""

    ordinal: int = 0
    last_line: int = 0
    ids_normalised: int = 0

    def pmid(self, element) -> int:
        """The PMID of a <PMID> element (BadId if missing or not a PMID; corpusbuild.ids)."""
        pmid, normalised = numeric_id(element.text if element is not None else None, "PMID")
        self.ids_normalised += normalised
        return pmid


def _record_of(
    element, tag: str, line_offset: int, progress: _Progress, file_label: str, skip_without_abstract: bool
) -> RawArticle | Deletion | SkippedRecord | BadRecord | list[Deletion | BadRecord]:
    """What one record element (a child of the root) stands for: one record, or for a DeleteCitation a
    list (a BadRecord per unusable PMID, then the Deletion). A plain return, not a generator: this runs
    once per citation, and a generator per record costs more than the work it wraps. Lines are the
    element's plus `line_offset` (non-zero when the element was parsed in a batch, see
    corpusbuild.sources.pubmed.batches)."""
    line = (element.sourceline or 0) + line_offset
    progress.last_line = line
    progress.ordinal += 1
    if tag == "DeleteCitation":
        pmids = []
        found: list[Deletion | BadRecord] = []
        for pmid_element in element.iterfind("PMID"):
            try:
                pmids.append(progress.pmid(pmid_element))
            except BadId as error:
                where = (pmid_element.sourceline or 0) + line_offset
                found.append(BadRecord(InputProblem(file_label, str(error), line=where, element="DeleteCitation/PMID")))
        found.append(Deletion(pmids=pmids, line=line))
        return found
    if tag == "PubmedArticle":
        citation = _first(element, "MedlineCitation")
    elif tag == "PubmedBookArticle":
        citation = _first(element, "BookDocument")
    else:
        citation = element
    pmid_element = _first(citation, "PMID") if citation is not None else None
    try:
        pmid = progress.pmid(pmid_element)
    except BadId as error:
        where_line = (pmid_element.sourceline or 0) + line_offset if pmid_element is not None else line
        return BadRecord(InputProblem(file_label, str(error), line=where_line, element=f"{tag} #{progress.ordinal}"))
    if tag == "PubmedBookArticle":
        return SkippedRecord(pmid=pmid, line=line, reason="book_article")
    return _article_fields(citation, pmid, line, skip_without_abstract)


def iter_pubmed_records(
    stream: BinaryIO,
    file_label: str,
    summary: FileSummary | None = None,
    skip_without_abstract: bool = False,
) -> Iterator[RawArticle | Deletion | SkippedRecord | BadRecord]:
    """Yield the records of one PubMed/MEDLINE XML stream in document order.

    Records are the root's children named PubmedArticle, PubmedBookArticle, DeleteCitation (or, in a
    MedlineCitationSet, MedlineCitation). They are parsed in batches of whole records
    (corpusbuild.sources.pubmed.batches); whatever the batches cannot take exactly (a file on one line, malformed
    XML, an unusual prolog) is streamed with iterparse from that point, with the same result.

    With `skip_without_abstract`, citations without an abstract come back as SkippedRecord
    ("no_abstract") without their metadata being read.

    Raises InputError for problems that make the whole file unusable (malformed or truncated XML,
    empty file, not PubMed XML); yields BadRecord for a single unusable record (e.g. a PMID that is
    not a number) so the caller can report it and go on.
    """
    summary = summary if summary is not None else FileSummary()
    progress = _Progress()
    try:
        yield from _all_records(stream, file_label, summary, progress, skip_without_abstract)
    finally:
        summary.ids_normalised = progress.ids_normalised


def _all_records(
    stream: BinaryIO, file_label: str, summary: FileSummary, progress: _Progress, skip_without_abstract: bool
) -> Iterator[RawArticle | Deletion | SkippedRecord | BadRecord]:
    try:
        stream = io.BufferedReader(stream, buffer_size=1 << 16)
        parser = etree.XMLParser(**_PARSER_OPTIONS)
        prolog = read_prolog(stream, ROOT_TAGS, parser)
        if prolog is not None:
            record_tags = _RECORD_TAGS_OF_ROOT[prolog.root_tag]
            batches = RecordBatches(stream, prolog, record_tags, parser)
            for batch in batches:
                summary.root_tag = prolog.root_tag
                line_offset = batch.line_offset
                for element in batch.root:
                    tag = element.tag
                    if tag in record_tags:
                        summary.records += 1
                        record = _record_of(element, tag, line_offset, progress, file_label, skip_without_abstract)
                        if type(record) is list:
                            yield from record
                        else:
                            yield record
            if batches.rest is None:
                return
            stream = batches.rest
        yield from _streamed_records(stream, file_label, summary, progress, skip_without_abstract)
    except etree.XMLSyntaxError as error:
        line = error.lineno if error.lineno else progress.last_line
        message = error.msg or str(error)
        if "Document is empty" in message or (summary.records == 0 and "no element found" in message):
            raise InputError(InputProblem(file_label, "empty file: no XML content", line=1)) from error
        raise InputError(InputProblem(file_label, syntax_error_message(message), line=line)) from error
    except DECOMPRESSION_ERRORS as error:
        raise InputError(
            InputProblem(
                file_label,
                f"truncated or corrupt compressed stream ({error}); the last complete record ends near here",
                line=progress.last_line or None,
            )
        ) from error


def _streamed_records(
    stream: BinaryIO, file_label: str, summary: FileSummary, progress: _Progress, skip_without_abstract: bool
) -> Iterator[RawArticle | Deletion | SkippedRecord | BadRecord]:
    """The records of a stream read with iterparse, each cleared once read (memory stays flat): the
    whole file when batches do not apply, or what batches handed back (then behind a stand-in prefix
    that keeps lines and columns those of the file)."""
    context = etree.iterparse(stream, events=("end",), tag=_RECORD_TAGS, **_PARSER_OPTIONS)
    for _event, element in context:
        if summary.root_tag is None:
            summary.root_tag = element.getroottree().getroot().tag
            _require_pubmed_root(summary.root_tag, file_label, 1)
        parent = element.getparent()
        if parent is None or parent.getparent() is not None:
            continue  # not a child of the root (a MedlineCitation inside a PubmedArticle, ...)
        summary.records += 1
        record = _record_of(element, element.tag, 0, progress, file_label, skip_without_abstract)
        if type(record) is list:
            yield from record
        else:
            yield record
        release(element)
    if summary.root_tag is None:
        root = context.root
        if root is None:
            raise InputError(InputProblem(file_label, "empty file: no XML element found", line=1))
        summary.root_tag = root.tag
        _require_pubmed_root(root.tag, file_label, root.sourceline)
