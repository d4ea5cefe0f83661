"""Real Wikipedia pages re-issued under new page ids, to make benchmark-sized dumps without
inventing text (the repo ships a 206-page enwiki slice): multistream dumps with their index, laid out
as Wikimedia publishes them."""

from __future__ import annotations

import bz2
import copy
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

HEADER = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'
FOOTER = b"</mediawiki>\n"


def _scaled_pages(source: Path, copies: int, id_offset: int) -> Iterator[tuple[bytes, int, str, int]]:
    """(page XML, page id, title, article wikitext characters) of every page of `source`, `copies`
    times, ids shifted by id_offset + k * 10,000,000 per copy."""
    with bz2.open(source, "rb") as stream:
        root = etree.parse(stream, etree.XMLParser(huge_tree=True)).getroot()
    pages = [p for p in root if etree.QName(p.tag).localname == "page"]
    for k in range(copies):
        for page in pages:
            clone = copy.deepcopy(page)
            page_id = clone.find("{*}id")
            page_id.text = str(int(page_id.text) + id_offset + k * 10_000_000)
            chars = 0
            if clone.findtext("{*}ns") == "0" and clone.find("{*}redirect") is None:
                chars = len(clone.findtext("{*}revision/{*}text") or "")
            yield etree.tostring(clone, encoding="UTF-8"), int(page_id.text), clone.findtext("{*}title"), chars


def multistream_index_path(dump: Path) -> Path:
    return dump.with_name(dump.name.removesuffix(".xml.bz2") + "-index.txt.bz2")


def write_multistream_dump(
    source: Path, out: Path, copies: int, id_offset: int, pages_per_stream: int = 100, index: bool = True
) -> int:
    """Like `pages-articles-multistream.xml.bz2`: the header in its own bz2 stream, then streams of
    `pages_per_stream` pages, then `</mediawiki>`; with `index`, the `offset:page_id:title` index
    beside it. `out` must end in `-multistream.xml.bz2`. Returns the article wikitext characters."""
    chars = 0
    lines: list[bytes] = []
    batch: list[bytes] = []
    with open(out, "wb") as handle:
        handle.write(bz2.compress(HEADER))

        def flush() -> None:
            if batch:
                handle.write(bz2.compress(b"".join(batch)))
                batch.clear()

        for page_xml, page_id, title, page_chars in _scaled_pages(source, copies, id_offset):
            if len(batch) == pages_per_stream:
                flush()
            if not batch:
                offset = handle.tell()
            batch.append(page_xml)
            lines.append(f"{offset}:{page_id}:{title}\n".encode())
            chars += page_chars
        flush()
        handle.write(bz2.compress(FOOTER))
    if index:
        multistream_index_path(out).write_bytes(bz2.compress(b"".join(lines)))
    return chars
