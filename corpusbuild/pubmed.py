"""PubMed citations to snippets: clean the fields, chunk the abstract, keep MeSH and chemicals in meta.

Also the map task the sharded build engine runs for each PubMed/MEDLINE XML file.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, collapse_whitespace
from corpusbuild.errors import InputProblem
from corpusbuild.inputs import decompressed
from corpusbuild.pubmed_xml import Deletion, FileSummary, RawArticle, SkippedRecord, iter_pubmed_records
from corpusbuild.shardbuild import EVENT_DELETE, EVENT_RECORD, EVENT_SKIP, FileTask, PartWriter
from medsnip.buildrecord import HashingReader
from medsnip.snippet import shard_of, snippet_lines

SOURCE = "pubmed"
SUFFIXES = (".xml", ".xml.gz")


@dataclass(frozen=True)
class PubmedParams(ChunkingParams):
    """Chunking, whether citations without an abstract are kept as title-only snippets, and the most
    characters a citation's title and abstract may hold (memory per record is bounded by it)."""

    keep_no_abstract: bool = False
    max_record_chars: int = 1_000_000


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


def map_pubmed_file(task: FileTask, reader: HashingReader, magic: bytes, writer: PartWriter) -> dict:
    """Map task for one PubMed/MEDLINE XML file: every citation, skip and deletion becomes an event."""
    params = PubmedParams.from_dict(task.params)
    num_shards = task.num_shards
    stats: Counter = Counter(articles=0, deletions=0)  # always listed: PubMed files carry updates
    skipped: Counter = Counter()
    problems: list[dict] = []
    summary = FileSummary()
    stream = decompressed(reader, magic)
    for record in iter_pubmed_records(stream, task.path, summary, not params.keep_no_abstract):
        if isinstance(record, RawArticle):
            stats["articles"] += 1
            shard = shard_of(str(record.pmid), num_shards)
            size = record_chars(record)
            if size > params.max_record_chars:  # refused before cleaning and chunking multiply it
                message = (
                    f"title and abstract hold {size:,} characters, more than --max-record-chars "
                    f"{params.max_record_chars:,}: not used (an earlier version of PMID {record.pmid} is dropped too)"
                )
                problems.append(
                    InputProblem(task.path, message, line=record.line, element=f"PMID {record.pmid}").to_dict()
                )
                stats["bad_records"] += 1
                writer.add(shard, record.pmid, EVENT_SKIP, reason="record_too_long")
                continue
            block, snippets, reason = article_block(record, params)
            if reason:
                skipped[reason] += 1
                writer.add(shard, record.pmid, EVENT_SKIP, reason=reason)
            else:
                stats["snippets"] += snippets
                writer.add(shard, record.pmid, EVENT_RECORD, block, lines=snippets)
        elif isinstance(record, SkippedRecord):
            stats["articles"] += 1
            skipped[record.reason] += 1
            writer.add(shard_of(str(record.pmid), num_shards), record.pmid, EVENT_SKIP, reason=record.reason)
        elif isinstance(record, Deletion):
            stats["deletions"] += len(record.pmids)
            for pmid in record.pmids:
                writer.add(shard_of(str(pmid), num_shards), pmid, EVENT_DELETE)
        else:
            stats["bad_records"] += 1
            problems.append(record.problem.to_dict())
    if summary.ids_normalised:  # "007" read as PMID 7: allowed, but said (corpusbuild.ids)
        stats["ids_normalised"] = summary.ids_normalised
    return {
        "stats": {**stats, "skipped": dict(sorted(skipped.items())), "format": summary.root_tag},
        "problems": problems,
    }
