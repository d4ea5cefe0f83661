"""StatPearls (NCBI Bookshelf BITS) and PMC JATS articles to paragraph snippets.

Input: the StatPearls tarball (`statpearls_NBK430685.tar.gz`, streamed member by member, never
unpacked to disk), a folder of `.nxml` files, or single files. A snippet is a paragraph titled with
its heading path (`Article -- Section -- Subsection`); short paragraphs merge into the previous one
of the same section, list items are grouped, and nothing exceeds the chunk size (longer paragraphs
are split by the recursive splitter). ids keep the article's file id and the paragraph index:
`statpearls:article-17:3` (MedRAG export `article-17_3`).
"""

from __future__ import annotations

import tarfile
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import PurePosixPath

from lxml import etree

from corpusbuild.chunking import ChunkingParams
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import Problem, ReaderEvent, ReaderInput, ReaderStats, Record
from corpusbuild.ids import BadId, text_id
from corpusbuild.inputs import DECOMPRESSION_ERRORS, read_decompressed
from corpusbuild.sources.medrag import statpearls_record
from corpusbuild.sources.statpearls.nxml import NxmlDocument, merge_short_paragraphs, parse_nxml
from corpusbuild.sources.xmltools import syntax_error_message
from medsnip.snippet import document_key, dumps_snippet, make_snippet

SUFFIXES = (".nxml", ".nxml.gz", ".tar.gz", ".tgz", ".tar", ".tar.bz2")
TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2")
MIN_PARAGRAPH = 200  # shorter paragraphs merge into the previous one


@dataclass(frozen=True)
class StatpearlsParams(ChunkingParams):
    medrag: bool = False  # MedRAG's own paragraph walk (corpusbuild.sources.medrag)


_PARSER = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False, huge_tree=True)


def document_snippets(document: NxmlDocument, doc_id: str, member: str, params: ChunkingParams, source: str) -> bytes:
    """The snippet lines of one article: merged paragraphs, each split to the chunk size."""
    lines = []
    index = 0
    limit = params.chunk_size
    for path, text in merge_short_paragraphs(document.paragraphs, MIN_PARAGRAPH, limit):
        title = " -- ".join(part for part in (document.title, *path) if part)
        for content in params.chunks(text):
            meta = {"file": member, "format": document.kind, "ids": document.ids, "section": list(path)}
            lines.append(dumps_snippet(make_snippet(source, doc_id, index, title, content, meta)))
            index += 1
    return b"".join(lines)


def _documents(data: bytes, label: str) -> list[NxmlDocument]:
    if not data.strip():
        raise InputError(InputProblem(label, "empty file: no XML content"))
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as error:
        raise InputError(
            InputProblem(label, syntax_error_message(error.msg or str(error)), line=error.lineno)
        ) from error
    try:
        return parse_nxml(root)
    except ValueError as error:
        raise InputError(InputProblem(label, str(error), line=root.sourceline)) from error


def _doc_ids(member: str, documents: list[NxmlDocument], label: str) -> list[str]:
    """Ids from the file name (one article) or the PMC ids (an article set); a name that cannot be an
    id (whitespace, control characters: corpusbuild.ids) makes the file a bad record."""
    stem = PurePosixPath(member).name.split(".nxml")[0].removesuffix(".xml")
    if len(documents) == 1:
        ids = [stem]
    else:
        ids = [f"PMC{d.ids['pmc']}" if "pmc" in d.ids else f"{stem}-{k}" for k, d in enumerate(documents)]
    try:
        return [text_id(doc_id, "article id (from the file name)") for doc_id in ids]
    except BadId as error:
        raise InputError(InputProblem(label, str(error))) from error


def _article_events(
    member: str, data: bytes, label: str, position: int, params: ChunkingParams, name: str, counts: Counter
) -> list[Record]:
    """The Records of one NXML file's articles; InputError (before any event) if it cannot be read."""
    if params.medrag:
        event = statpearls_record(member, data, label, name, position)
        counts["documents_read"] += 1
        counts["snippets"] += event.count if isinstance(event, Record) else 0
        return [event]
    documents = _documents(data, label)
    records = []
    for doc_id, document in zip(_doc_ids(member, documents, label), documents, strict=True):
        block = document_snippets(document, doc_id, member, params, name)
        counts["documents_read"] += 1
        lines = block.count(b"\n")
        counts["snippets"] += lines
        records.append(Record(doc_id, document_key(doc_id), block, lines, position))
    return records


def read_nxml(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one tarball or NXML file. In a tarball a bad member is reported and skipped."""
    params = StatpearlsParams.from_dict(source.params)
    name = source.params["source"]
    stats = ReaderStats(Counter(documents_read=0, snippets=0, bad_records=0))
    counts = stats.counts
    if source.path.endswith(TAR_SUFFIXES):
        members = 0
        try:
            with tarfile.open(fileobj=source.stream, mode="r|*") as archive:
                for position, member in enumerate(archive):
                    if not member.isfile() or not member.name.endswith((".nxml", ".xml")):
                        continue
                    members += 1
                    data = archive.extractfile(member).read()
                    label = f"{source.path}:{member.name}"
                    try:
                        records = _article_events(member.name, data, label, position, params, name, counts)
                    except InputError as error:  # one bad article does not sink the tarball
                        counts["bad_records"] += 1
                        yield Problem(error.problem)
                        continue
                    yield from records
        except (tarfile.TarError, *DECOMPRESSION_ERRORS) as error:
            raise InputError(InputProblem(source.path, f"truncated or corrupt tar archive ({error})")) from error
        if members == 0:
            raise InputError(InputProblem(source.path, "archive holds no .nxml file"))
    else:
        data = read_decompressed(source.stream, source.magic, source.path)
        yield from _article_events(PurePosixPath(source.path).name, data, source.path, 0, params, name, counts)
    return stats
