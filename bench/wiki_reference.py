"""The plain Wikipedia extraction loop `make bench` compares corpusbuild with, in its own process:
lxml iterparse over the dump(s) + mwparserfromhell.parse(text).strip_code() per main-namespace page.

usage: python bench/wiki_reference.py DUMP...   (prints {"pages": n, "wikitext_chars": n})
"""

from __future__ import annotations

import bz2
import json
import sys

import mwparserfromhell
from lxml import etree


def main(paths: list[str]) -> None:
    pages = chars = 0
    for path in paths:
        with bz2.open(path, "rb") as stream:
            for _event, page in etree.iterparse(stream, events=("end",), tag="{*}page"):
                if page.findtext("{*}ns") == "0" and page.find("{*}redirect") is None:
                    text = page.findtext("{*}revision/{*}text") or ""
                    mwparserfromhell.parse(text).strip_code()
                    pages += 1
                    chars += len(text)
                page.clear()
                while page.getprevious() is not None:
                    del page.getparent()[0]
    print(json.dumps({"pages": pages, "wikitext_chars": chars}))


if __name__ == "__main__":
    main(sys.argv[1:])
