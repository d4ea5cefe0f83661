"""Cut samples/wikipedia/enwiki-2016-first-80-pages.xml.bz2 from the real gensim slice beside it.

The demo embeds every Wikipedia snippet with MiniLM on the CPU; the full slice's 4,321 snippets were half
of `make demo`'s time. The first 80 `<page>` elements of the same dump (16 articles, 64 redirects: about
830 snippets), with its siteinfo header and closing tag, are still a real pages-articles file: the bytes
of each page are the dump's own, nothing is rewritten.
Run: python samples/wikipedia/make_head.py
"""

from __future__ import annotations

import bz2
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLICE = HERE / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
PAGES = 80
OUT = HERE / f"enwiki-2016-first-{PAGES}-pages.xml.bz2"


def main() -> None:
    text = bz2.decompress(SLICE.read_bytes()).decode("utf-8")
    pages = list(re.finditer(r"  <page>.*?</page>\n", text, re.S))
    head, tail = text[: pages[0].start()], text[pages[-1].end() :]
    body = "".join(page.group() for page in pages[:PAGES])
    OUT.write_bytes(bz2.compress((head + body + tail).encode("utf-8"), 9))
    articles = sum("<redirect" not in page.group() for page in pages[:PAGES])
    print(f"{OUT.name}: {PAGES} pages ({articles} articles), {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
