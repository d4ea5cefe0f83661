"""PubMed citations to snippets: clean the fields, chunk the abstract, keep MeSH and chemicals in meta.

Also the reader the build engine runs for each PubMed/MEDLINE XML file (corpusbuild.events).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, collapse_whitespace
from corpusbuild.errors import InputProblem
from corpusbuild.events import Delete, Problem, ReaderEvent, ReaderInput, ReaderStats, Record, Skip
from corpusbuild.inputs import decompressed
from corpusbuild.sources.medrag import read_pubmed as read_pubmed_as_medrag
from corpusbuild.sources.pubmed.xml import Deletion, FileSummary, RawArticle, SkippedRecord, iter_pubmed_records
from medsnip.snippet import snippet_lines

SOURCE = "pubmed"
SUFFIXES = (".xml", ".xml.gz")


@dataclass(frozen=True)
class PubmedParams(ChunkingParams):
    """Chunking, whether citations without an abstract are kept as title-only snippets, and the most
    characters a citation's title and abstract may hold (memory per record is bounded by it)."""

    keep_no_abstract: bool = False
    max_record_chars: int = 1_000_000
    medrag: bool = False  # MedRAG-compatible snippets (corpusbuild.sources.medrag), read by read_pubmed


def abstract_text(sections: list[tuple[str | None, str]]) -> str:
    """Abstract sections as `LABEL: text`, one per line so the splitter prefers section boundaries."""
    parts = []
    for label, text in sections:
        text = clean_text(text)
        if not text:
            continue
        label = clean_text(label) if label else ""
        parts.append(f"{label}: {text}" if label else text)
    return "\n".join(parts)


def pubmed_meta(article: RawArticle) -> dict:
    return {
        "pmid": article.pmid,
        "year": article.year,
        "journal": article.journal,  # NLM's controlled journal title, already stripped
        "languages": article.languages,
        "publication_types": article.publication_types,
        "mesh": article.mesh,
        "chemicals": article.chemicals,
        "keywords": [collapse_whitespace(keyword) for keyword in article.keywords],
    }


def record_chars(article: RawArticle) -> int:
    """Characters of a citation's title and abstract as read (before cleaning)."""
    return len(article.title) + sum(len(label or "") + len(text) for label, text in article.sections)


def article_block(article: RawArticle, params: PubmedParams) -> tuple[bytes, int, str | None]:
    """The snippet lines of one citation and their number, or (b"", 0, reason) when it yields none."""
    title = clean_text(article.title)
    abstract = abstract_text(article.sections)
    if not abstract:
        if not params.keep_no_abstract:
            return b"", 0, "no_abstract"
        if not title:
            return b"", 0, "no_title_no_abstract"
        chunks = [""]
    else:
        chunks = params.chunks(abstract)
    return snippet_lines(SOURCE, str(article.pmid), title, chunks, pubmed_meta(article)), len(chunks), None


def read_pubmed(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one PubMed/MEDLINE XML file: a Record per citation with an abstract, a Skip per
    citation left out, a Delete per PMID of a DeleteCitation, a Problem per bad record."""
    if source.params.get("medrag"):
        return (yield from read_pubmed_as_medrag(source))
    params = PubmedParams.from_dict(source.params)
    stats = ReaderStats(Counter(articles=0, deletions=0), skipped=Counter())  # PubMed files carry updates
    counts, skipped = stats.counts, stats.skipped
    summary = FileSummary()
    stream = decompressed(source.stream, source.magic)
    for record in iter_pubmed_records(stream, source.path, summary, not params.keep_no_abstract):
        if isinstance(record, RawArticle):
            counts["articles"] += 1
            pmid = str(record.pmid)
            size = record_chars(record)
            if size > params.max_record_chars:  # refused before cleaning and chunking multiply it
                message = (
                    f"title and abstract hold {size:,} characters, more than --max-record-chars "
                    f"{params.max_record_chars:,}: not used (an earlier version of PMID {record.pmid} is dropped too)"
                )
                yield Problem(InputProblem(source.path, message, line=record.line, element=f"PMID {record.pmid}"))
                counts["bad_records"] += 1
                yield Skip(pmid, record.pmid, "record_too_long")
                continue
            block, snippets, reason = article_block(record, params)
            if reason:
                skipped[reason] += 1
                yield Skip(pmid, record.pmid, reason)
            else:
                counts["snippets"] += snippets
                yield Record(pmid, record.pmid, block, snippets)
        elif isinstance(record, SkippedRecord):
            counts["articles"] += 1
            skipped[record.reason] += 1
            yield Skip(str(record.pmid), record.pmid, record.reason)
        elif isinstance(record, Deletion):
            counts["deletions"] += len(record.pmids)
            for pmid in record.pmids:
                yield Delete(str(pmid), pmid)
        else:
            counts["bad_records"] += 1
            yield Problem(record.problem)
    if summary.ids_normalised:  # "007" read as PMID 7: allowed, but said (corpusbuild.ids)
        counts["ids_normalised"] = summary.ids_normalised
    stats.facts["format"] = summary.root_tag
    return stats
