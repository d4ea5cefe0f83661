"""Real text from the bundled samples, for equivalence tests of cleaning and chunking."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from corpusbuild.inputs import decompressed
from corpusbuild.sources.pubmed.xml import RawArticle, iter_pubmed_records

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@lru_cache(maxsize=1)
def pubmed_texts() -> tuple[str, ...]:
    """Every raw title and abstract section of the bundled PubMed files, as the XML has them."""
    texts = []
    for path in sorted((SAMPLES / "pubmed").iterdir()):
        with open(path, "rb") as raw:
            magic = raw.read(4)
            raw.seek(0)
            for record in iter_pubmed_records(decompressed(raw, magic), str(path)):
                if isinstance(record, RawArticle):
                    texts.append(record.title)
                    texts.extend(text for _, text in record.sections)
    return tuple(texts)


@lru_cache(maxsize=1)
def pubmedqa_abstracts() -> tuple[str, ...]:
    """PubMedQA's 500 real abstracts, sections joined one per line."""
    data = json.loads((SAMPLES / "ir" / "pubmedqa_test_set.json").read_text(encoding="utf-8"))
    return tuple("\n".join(item["CONTEXTS"]) for item in data.values())


@lru_cache(maxsize=1)
def textbook_books() -> dict[str, str]:
    """Real MedRAG textbook chunks concatenated per book in id order (realistic long book text)."""
    chunks: dict[str, dict[int, str]] = {}
    with open(SAMPLES / "textbooks" / "V3_predictions.jsonl", encoding="utf-8") as handle:
        for line in handle:
            for snippet in json.loads(line).get("snippets", []):
                book, _, index = snippet["id"].rpartition("_")
                chunks.setdefault(book, {})[int(index)] = snippet["content"]
    return {book: "\n\n".join(parts[i] for i in sorted(parts)) for book, parts in sorted(chunks.items())}
