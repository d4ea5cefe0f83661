"""Chunking with LangChain's RecursiveCharacterTextSplitter semantics (what MedRAG's corpora used).

The splitter is the reference; the only shortcut is for text that already fits one chunk, where the
splitter returns the stripped text itself (proved on the real test data in tests/test_chunking.py).
"""

from __future__ import annotations

from functools import lru_cache

from langchain_text_splitters import RecursiveCharacterTextSplitter


@lru_cache(maxsize=8)
def _splitter(chunk_size: int, chunk_overlap: int) -> RecursiveCharacterTextSplitter:
    return RecursiveCharacterTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def validate_chunking(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size <= 0:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"chunk overlap must be in [0, chunk size), got {chunk_overlap} for {chunk_size}")


def chunk_text(text: str, chunk_size: int = 1000, chunk_overlap: int = 200) -> list[str]:
    """Split `text` into chunks of at most `chunk_size` characters with `chunk_overlap` overlap."""
    if len(text) <= chunk_size:
        stripped = text.strip()
        return [stripped] if stripped else []
    return _splitter(chunk_size, chunk_overlap).split_text(text)
