"""Rebuild samples/textbooks/books/*.txt from the real MedRAG textbook chunks in V3_predictions.jsonl.

The repo cannot ship MedQA's 18 textbooks; V3_predictions.jsonl carries 301 unique real chunks of 10
of them (ids like InternalMed_Harrison_1234). Concatenating each book's chunks in id order, one chunk
per line, gives a realistic plain-text book: real sentences, real layout quirks, no invented text.
Run: python samples/textbooks/make_books.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    chunks: dict[str, dict[int, str]] = {}
    with open(HERE / "V3_predictions.jsonl", encoding="utf-8") as handle:
        for line in handle:
            for snippet in json.loads(line).get("snippets", []):
                book, _, index = snippet["id"].rpartition("_")
                chunks.setdefault(book, {})[int(index)] = snippet["content"]
    out = HERE / "books"
    out.mkdir(exist_ok=True)
    for book, parts in sorted(chunks.items()):
        text = "\n".join(parts[index] for index in sorted(parts)) + "\n"
        (out / f"{book}.txt").write_text(text, encoding="utf-8")
        print(f"{book}.txt: {len(parts)} chunks, {len(text):,} characters")


if __name__ == "__main__":
    main()
