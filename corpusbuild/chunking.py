"""Chunking with LangChain's RecursiveCharacterTextSplitter semantics (what MedRAG's corpora used).

The splitter is LangChain's own class; its `_merge_splits` and `_split_text` are replaced by exact
equivalents that find chunk boundaries by binary search instead of a Python loop over every word and
split with str.split instead of re.split (the stock code cost more than parsing the XML). Text that fits one chunk is returned stripped, which is
what the splitter returns for it. tests/test_chunking.py proves both shortcuts identical to the stock
splitter on the real test data and on thousands of seeded random texts.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import lru_cache
from itertools import accumulate

from langchain_text_splitters import RecursiveCharacterTextSplitter

logger = logging.getLogger(__name__)


class IndexedMergeSplitter(RecursiveCharacterTextSplitter):
    """RecursiveCharacterTextSplitter whose `_merge_splits` jumps between chunk boundaries and whose
    `_split_text` splits with str.split.

    LangChain's loop visits every piece (word) and re-slices its window list on every drop. With the
    length function `len`, every decision it makes compares a window's total length with the chunk
    size or the overlap; those totals are differences of one prefix-sum array, and pieces are never
    empty, so the array is strictly increasing and each decision is a binary search. Same chunks,
    O(pieces) once plus O(chunks * log pieces).
    """

    def _split_text(self, text: str, separators: list[str]) -> list[str]:
        """LangChain's recursion with str.split in place of re.split (literal separators kept at the
        start of each piece, the splitter's default)."""
        if self._is_separator_regex or self._keep_separator not in (True, "start") or self._length_function is not len:
            return super()._split_text(text, separators)
        separator = separators[-1]
        new_separators: list[str] = []
        for position, candidate in enumerate(separators):
            if not candidate:
                separator = candidate
                break
            if candidate in text:
                separator = candidate
                new_separators = separators[position + 1 :]
                break
        if separator:
            first, *rest = text.split(separator)
            splits = list(filter(None, [first, *map(separator.__add__, rest)]))
        else:
            splits = list(text)
        if not splits or max(map(len, splits)) < self._chunk_size:  # the common case, without a loop
            return self._merge_splits(splits, "") if splits else []
        final_chunks: list[str] = []
        good_splits: list[str] = []
        for piece in splits:
            if len(piece) < self._chunk_size:
                good_splits.append(piece)
                continue
            if good_splits:
                final_chunks.extend(self._merge_splits(good_splits, ""))
                good_splits = []
            if not new_separators:
                final_chunks.append(piece)
            else:
                final_chunks.extend(self._split_text(piece, new_separators))
        if good_splits:
            final_chunks.extend(self._merge_splits(good_splits, ""))
        return final_chunks

    def _merge_splits(self, splits: Iterable[str], separator: str) -> list[str]:
        if self._length_function is not len:
            return super()._merge_splits(splits, separator)
        pieces = list(splits)
        if "" in pieces:  # prefix sums must be strictly increasing
            return super()._merge_splits(pieces, separator)
        sep = len(separator)
        size = self._chunk_size
        overlap = self._chunk_overlap
        count = len(pieces)
        # prefix[k] = sum of (len + sep) over pieces[:k]; a window [a, i) totals prefix[i]-prefix[a]-sep.
        lengths = map(len, pieces) if not sep else (len(piece) + sep for piece in pieces)
        prefix = [0, *accumulate(lengths)]
        docs: list[str] = []
        start = 0
        index = 0
        while index < count:
            # LangChain emits at the first piece i whose addition would overflow the window [start, i).
            boundary = bisect_right(prefix, size + sep + prefix[start], index + 1)
            if boundary > count:
                break
            index = boundary - 1
            if index > start:
                total = prefix[index] - prefix[start] - sep
                if total > size:
                    logger.warning(
                        "Created a chunk of size %d, which is longer than the specified %d", total, size
                    )
                doc = self._join_docs(pieces[start:index], separator)
                if doc is not None:
                    docs.append(doc)
                # Drop from the front while the window exceeds the overlap or the next piece won't fit.
                piece_len = prefix[index + 1] - prefix[index] - sep
                start = max(
                    bisect_left(prefix, prefix[index] - sep - overlap, start, index),
                    bisect_left(prefix, prefix[index] + piece_len - size, start, index),
                )
            index += 1
        doc = self._join_docs(pieces[start:], separator)
        if doc is not None:
            docs.append(doc)
        return docs


@lru_cache(maxsize=8)
def _splitter(chunk_size: int, chunk_overlap: int) -> IndexedMergeSplitter:
    return IndexedMergeSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)


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
