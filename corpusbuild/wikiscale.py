"""Real Wikipedia pages re-issued under new page ids, to make benchmark-sized dumps without
inventing text (the repo ships a 206-page enwiki slice)."""

from __future__ import annotations

import bz2
import copy
from pathlib import Path

from lxml import etree

HEADER = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n'


def write_scaled_dump(source: Path, out: Path, copies: int, id_offset: int) -> int:
    """Write every page of `source` `copies` times, ids shifted by id_offset + k * 10,000,000 per copy;
    returns the wikitext characters of the main-namespace articles written."""
    with bz2.open(source, "rb") as stream:
        root = etree.parse(stream, etree.XMLParser(huge_tree=True)).getroot()
    pages = [p for p in root if etree.QName(p.tag).localname == "page"]
    chars = 0
    with bz2.open(out, "wb") as handle:
        handle.write(HEADER)
        for k in range(copies):
            for page in pages:
                clone = copy.deepcopy(page)
                page_id = clone.find("{*}id")
                page_id.text = str(int(page_id.text) + id_offset + k * 10_000_000)
                handle.write(etree.tostring(clone, encoding="UTF-8"))
                if clone.findtext("{*}ns") == "0" and clone.find("{*}redirect") is None:
                    chars += len(clone.findtext("{*}revision/{*}text") or "")
        handle.write(b"</mediawiki>\n")
    return chars
