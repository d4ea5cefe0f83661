"""Wikipedia `pages-articles[-multistream].xml[.bz2]` dumps to section-titled snippets.

Main namespace only; redirects and disambiguation pages are skipped (and counted). Each page's prose
is split into sections by mwparserfromhell (corpusbuild.sources.wikipedia.wikitext), each section chunked at the chunk
size, every chunk titled `Page -- Section -- Subsection`. ids: `wikipedia:<page id>:<j>`, shards
ordered by page id. Streaming: pages are cleared as they are read, whatever the dump's size; the
XML's declared encoding and byte-order mark are honoured by the XML parser.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Generator
from typing import BinaryIO

from lxml import etree

from corpusbuild.chunking import ChunkingParams
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import Problem, ReaderEvent, ReaderInput, ReaderStats, Record, Skip
from corpusbuild.ids import BadId, numeric_id
from corpusbuild.inputs import DECOMPRESSION_ERRORS, ChainedReader, decompressed
from corpusbuild.sources.wikipedia.dump_ranges import range_position
from corpusbuild.sources.wikipedia.language import ENGLISH, WikiLanguage, siteinfo_language
from corpusbuild.sources.wikipedia.zhscript import ChineseScript
from corpusbuild.sources.xmltools import first_child, local_name, release, syntax_error_message
from medsnip.snippet import dumps_snippet, make_snippet

SOURCE = "wikipedia"
SUFFIXES = (".xml", ".xml.bz2", ".bz2", ".xml.gz")


def page_snippets(
    page_id: str,
    title: str,
    wikitext: str,
    params: ChunkingParams,
    medrag: bool = False,
    language: WikiLanguage = ENGLISH,
    script: ChineseScript | None = None,
    source: str = SOURCE,
) -> bytes:
    """The snippet lines of one article, ids `<source>:<page id>:<j>`. `script` (Chinese): the conversion
    asked for, if any; each snippet's meta records the script its text is written in."""
    lines = []
    index = 0
    from corpusbuild.sources.wikipedia.wikitext import wiki_sections  # mwparserfromhell: loaded when a dump is read

    variants = script.preferred_variants if script is not None else ()
    sections = wiki_sections(wikitext, language=language, variants=variants)
    if medrag:  # the whole article chunked as MedRAG chunks it (corpusbuild.sources.medrag)
        from corpusbuild.sources.medrag import wikipedia_block

        return wikipedia_block(page_id, title, sections, params.chunk_size, params.chunk_overlap)
    params = params.for_language(language.code)
    if script is not None:
        title = script.convert(title)
    for section in sections:
        section_title = " -- ".join((title, *(script.convert(p) if script else p for p in section.path)))
        meta = {"page_id": int(page_id), "page_title": title, "section": list(section.path)}
        text = section.text
        if script is not None:
            text = script.convert(text)
            meta["script"] = script.written_in(text)
        for content in params.chunks(text):
            lines.append(dumps_snippet(make_snippet(source, page_id, index, section_title, content, meta)))
            index += 1
    return b"".join(lines)


def _require_mediawiki_root(root, label: str) -> None:
    name = local_name(root.tag) if root is not None else None
    if name != "mediawiki":
        raise InputError(InputProblem(label, f"not a MediaWiki dump: root element <{name}>", line=1))


def dump_stream(source: ReaderInput) -> BinaryIO:
    """The XML a task parses: the whole dump, or one range of a split dump framed as a dump of its own
    (the dump's header before it unless it is the first, `</mediawiki>` after it unless it is the last)."""
    body = decompressed(source.stream, source.magic)
    part = source.part
    if part is None:
        return body
    streams: list[BinaryIO] = [body]
    if part["index"] > 0:
        streams.insert(0, io.BytesIO(part["head"]))
    if part["index"] < part["count"] - 1:
        streams.append(io.BytesIO(b"</mediawiki>"))
    return io.BufferedReader(ChainedReader(streams), buffer_size=1 << 16)


def read_wikipedia(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one dump file (or one range of it): every main-namespace article becomes one document."""
    params = ChunkingParams.from_dict(source.params)
    stats = ReaderStats(Counter(documents_read=0, snippets=0, bad_records=0))
    pages = 0
    last_line = 0
    language = None
    script = None
    try:
        context = etree.iterparse(dump_stream(source), events=("end",), tag="{*}page", huge_tree=True, no_network=True)
        for position, (_event, page) in enumerate(context):
            pages += 1
            last_line = page.sourceline or last_line
            if pages == 1:
                root = page.getroottree().getroot()
                _require_mediawiki_root(root, source.path)
                language = siteinfo_language(root, first_child(root, "siteinfo"), source.params.get("language"))
                try:
                    script = ChineseScript.for_build(language.code, source.params.get("convert_script"))
                except ValueError as error:
                    raise InputError(problem_at(source, str(error), 1, "siteinfo")) from error
                stats.facts.update(
                    {**language.facts(), "separators": params.for_language(language.code).resolved_separators()}
                )
                if script is not None:
                    stats.facts["convert_script"] = script.target
            event = _page_event(source, page, position, params, stats.counts, language, script)
            release(page)
            if event is not None:
                yield event
        if pages == 0:
            _require_mediawiki_root(context.root, source.path)
    except etree.XMLSyntaxError as error:
        message = error.msg or str(error)
        if "Document is empty" in message or (pages == 0 and "no element found" in message):
            raise InputError(problem_at(source, "empty file: no XML content", 1)) from error
        raise InputError(problem_at(source, syntax_error_message(message), error.lineno)) from error
    except DECOMPRESSION_ERRORS as error:
        message = f"truncated or corrupt compressed stream ({error})"
        raise InputError(problem_at(source, message, last_line or None)) from error
    return stats


def _is_disambiguation(title: str, wikitext: str, language: WikiLanguage) -> bool:
    from corpusbuild.sources.wikipedia.wikitext import is_disambiguation  # mwparserfromhell: loaded when a dump is read

    return is_disambiguation(title, wikitext, language)


def latest_revision(page) -> tuple[object | None, int]:
    """The page's newest <revision> and how many older ones it has: pages-articles dumps have one,
    history dumps every revision (ISO timestamps order as text; among equal ones, or without
    timestamps, the last in the file wins)."""
    revisions = [child for child in page if isinstance(child.tag, str) and local_name(child.tag) == "revision"]
    if len(revisions) <= 1:
        return (revisions[0] if revisions else None), 0
    newest = max(reversed(revisions), key=lambda r: _text_of(first_child(r, "timestamp")).strip())
    return newest, len(revisions) - 1


def _text_of(element) -> str:
    return (element.text or "") if element is not None else ""


def problem_at(source: ReaderInput, message: str, line: int | None, element: str | None = None) -> InputProblem:
    """A problem at `line` of the XML the task parsed, placed in the file (see range_position)."""
    if source.part is None:
        return InputProblem(source.path, message, line=line, element=element)
    line, where = range_position(source.part, line)
    return InputProblem(source.path, message, line=line, element=f"{element}, {where}" if element else where)


def _page_event(
    source: ReaderInput,
    page,
    position: int,
    params: ChunkingParams,
    counts: Counter,
    language: WikiLanguage,
    script: ChineseScript | None,
):
    """The event of one <page> (a Record, a Skip or a Problem), counting it."""
    title = _text_of(first_child(page, "title"))
    try:
        key, normalised = numeric_id(_text_of(first_child(page, "id")), "page id")
    except BadId as error:
        counts["bad_records"] += 1
        return Problem(problem_at(source, f"page {title!r}: {error}", page.sourceline, "page"))
    if normalised:
        counts["ids_normalised"] += 1
    page_id = str(key)
    namespace = first_child(page, "ns")
    if namespace is not None and (namespace.text or "").strip() != "0":
        return Skip(page_id, key, "not_main_namespace", position)
    counts["documents_read"] += 1
    if first_child(page, "redirect") is not None:
        return Skip(page_id, key, "redirect", position)
    revision, older = latest_revision(page)
    if older:
        counts["older_revisions_skipped"] += older
    wikitext = _text_of(first_child(revision, "text") if revision is not None else None)
    if wikitext.lstrip()[:9].upper() == "#REDIRECT":
        return Skip(page_id, key, "redirect", position)
    if _is_disambiguation(title, wikitext, language):
        return Skip(page_id, key, "disambiguation", position)
    block = page_snippets(
        page_id,
        title,
        wikitext,
        params,
        bool(source.params.get("medrag")),
        language,
        script,
        source.params.get("source", SOURCE),
    )
    if not block:
        return Skip(page_id, key, "no_text", position)
    lines = block.count(b"\n")
    counts["snippets"] += lines
    return Record(page_id, key, block, lines, position)
