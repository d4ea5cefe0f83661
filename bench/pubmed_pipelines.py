"""The pipelines `make bench` times, each run in its own process so peak RSS is its own.

usage: python bench/pubmed_pipelines.py reference|pubmed_parser INPUT OUT

`reference` is what a careful user would write from the same libraries: pubmed_parser's
parse_medline_xml -> ftfy.fix_text on title and abstract -> LangChain RecursiveCharacterTextSplitter
(1000, 200) -> JSON lines. `pubmed_parser` is the parse alone. (medsnip's own pipeline is timed
through its CLI, `corpusbuild pubmed`.)
"""

from __future__ import annotations

import json
import sys


def run_reference(source: str, out: str) -> int:
    import ftfy
    import pubmed_parser
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    articles = 0
    with open(out, "w", encoding="utf-8") as handle:
        for record in pubmed_parser.parse_medline_xml(source):
            articles += 1
            abstract = ftfy.fix_text(record["abstract"] or "")
            if not abstract:
                continue
            title = ftfy.fix_text(record["title"] or "")
            for index, chunk in enumerate(splitter.split_text(abstract)):
                snippet = {
                    "id": f"{record['pmid']}_{index}",
                    "title": title,
                    "content": chunk,
                    "contents": f"{title} {chunk}" if title.endswith((".", "?", "!")) else f"{title}. {chunk}",
                    "pmid": record["pmid"],
                }
                handle.write(json.dumps(snippet, ensure_ascii=False) + "\n")
    return articles


def run_pubmed_parser(source: str) -> int:
    import pubmed_parser

    return sum(1 for _ in pubmed_parser.parse_medline_xml(source))


if __name__ == "__main__":
    kind, source, out = sys.argv[1], sys.argv[2], sys.argv[3]
    count = run_reference(source, out) if kind == "reference" else run_pubmed_parser(source)
    print(json.dumps({"articles": count}))
