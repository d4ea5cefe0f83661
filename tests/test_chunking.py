"""chunk_text gives exactly LangChain's RecursiveCharacterTextSplitter(1000, 200) chunks."""

from __future__ import annotations

import random

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from corpusbuild.chunking import chunk_text, validate_chunking
from corpusbuild.sources.pubmed import abstract_text
from realtext import pubmed_texts, pubmedqa_abstracts, textbook_books


def stock(text: str, size: int = 1000, overlap: int = 200) -> list[str]:
    return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap).split_text(text)


def test_identical_on_real_abstracts_and_books():
    texts = [*pubmed_texts(), *pubmedqa_abstracts(), *textbook_books().values()]
    long_texts = [t for t in texts if len(t) > 1000]
    assert len(long_texts) > 150  # the test exercises real splitting, not only the one-chunk case
    for text in texts:
        assert chunk_text(text) == stock(text)


def test_identical_on_cleaned_structured_abstracts():
    for text in pubmedqa_abstracts():
        cleaned = abstract_text([(None, line) for line in text.split("\n")])
        assert chunk_text(cleaned) == stock(cleaned)


@pytest.mark.parametrize("size,overlap", [(1000, 200), (500, 100), (200, 0), (300, 299), (64, 16)])
def test_identical_on_real_books_at_other_sizes(size, overlap):
    for text in textbook_books().values():
        assert chunk_text(text, size, overlap) == stock(text, size, overlap)


def test_identical_on_seeded_random_texts():
    """Words from real abstracts, random separators (including doubled ones and none), odd sizes."""
    words = " ".join(pubmedqa_abstracts()).split()
    rng = random.Random(7)
    for _ in range(2_000):
        size = rng.choice([5, 20, 50, 100, 200, 500, 1000])
        overlap = rng.choice([0, size // 10, size // 5, size // 2, size - 1])
        parts = []
        for _ in range(rng.randint(0, 600)):
            parts.append(rng.choice(words)[: rng.choice([3, 30, 300, 3000])])
            parts.append(rng.choice([" ", " ", " ", "\n", "\n\n", "  ", "", ". "]))
        text = "".join(parts)
        assert chunk_text(text, size, overlap) == stock(text, size, overlap)


def test_chunks_respect_size_and_overlap():
    running_text = " ".join(" ".join(pubmedqa_abstracts()[:50]).split())  # one line: word-level splits
    chunks = chunk_text(running_text)
    assert len(chunks) > 60
    assert max(len(c) for c in chunks) <= 1000
    assert min(len(c) for c in chunks[:-1]) > 700
    # consecutive chunks share their boundary text (the overlap), so nothing is cut off unseen
    assert all(b[:100] in a for a, b in zip(chunks[:-1], chunks[1:], strict=True))


def test_validate_chunking_rejects_nonsense():
    with pytest.raises(ValueError):
        validate_chunking(0, 0)
    with pytest.raises(ValueError):
        validate_chunking(100, 100)
