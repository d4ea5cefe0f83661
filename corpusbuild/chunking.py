"""Chunking with LangChain's RecursiveCharacterTextSplitter semantics (what MedRAG's corpora used).

`RecursiveSplitter` is the algorithm of `RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)`
with its defaults (separators "\\n\\n", "\\n", " ", ""; separator kept at the start of the next piece;
`len` as length; chunks stripped), rewritten for speed:

- pieces are made with str.split instead of re.split;
- LangChain's merge loop visits every piece (word) and re-slices its window list on each drop. Every
  decision it makes compares a window's total length with the chunk size or the overlap; with `len`
  those totals are differences of one prefix-sum array, which is strictly increasing because pieces
  are never empty, so each decision is a binary search: O(pieces) once plus O(chunks * log pieces);
- text that fits one chunk is returned stripped, which is what the splitter returns for it;
- at a one-character separator (a space, a line break) with every piece shorter than a chunk, the
  usual case for prose, the same decisions are made on the text itself: a chunk's end is the last
  separator within reach (str.rfind), the overlap's start the first one past a position (str.find),
  so no piece is built: O(chunks) C-level scans.

It does not import LangChain (whose import alone costs 0.4 s per process). tests/test_chunking.py
proves it identical to LangChain's own class on all the real text in samples/ at several sizes and on
thousands of seeded random texts.

Chinese, Japanese and Korean text has no spaces between words, so LangChain's default separators would
cut it mid-sentence at the chunk size. `CJK_SEPARATORS` splits at paragraph and line breaks, then at
sentence ends (。．！？；), then clauses (，、), and keeps each separator at the end of the piece it ends
(LangChain's `keep_separator="end"`), so a chunk ends with its sentence's full stop instead of starting
with the previous one's. tests/test_multilingual.py proves it identical to
`RecursiveCharacterTextSplitter(separators=CJK_SEPARATORS, keep_separator="end")` on real Chinese text.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import accumulate
from operator import add, sub

logger = logging.getLogger(__name__)

SEPARATORS = ("\n\n", "\n", " ", "")
CJK_SEPARATORS = ("\n\n", "\n", "。", "．", "！", "？", "；", "，", "、", " ", "")
SEPARATOR_SETS = {"default": (SEPARATORS, "start"), "cjk": (CJK_SEPARATORS, "end")}


class RecursiveSplitter:
    """LangChain's RecursiveCharacterTextSplitter, computed in linear time: its defaults, or `separators`
    with `keep` "start" (LangChain's keep_separator=True) or "end"."""

    def __init__(
        self,
        chunk_size: int = 1000,
        chunk_overlap: int = 200,
        separators: tuple[str, ...] = SEPARATORS,
        keep: str = "start",
    ):
        validate_chunking(chunk_size, chunk_overlap)
        if keep not in ("start", "end"):
            raise ValueError(f"keep must be 'start' or 'end', got {keep!r}")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators = tuple(separators)
        self.keep_end = keep == "end"

    def split_text(self, text: str) -> list[str]:
        return self._split(text, self.separators)

    def _split(self, text: str, separators: tuple[str, ...]) -> list[str]:
        """Split on the first separator the text contains; recurse with the finer ones on pieces that
        are still too long; merge the rest into chunks.

        Pieces (separator kept at the start of each but the first) are contiguous in `text` once an
        empty first piece is dropped, so they are handled as end offsets and never built as strings."""
        separator = separators[-1]
        finer: tuple[str, ...] = ()
        for position, candidate in enumerate(separators):
            if not candidate:
                separator = candidate
                break
            if candidate in text:
                separator = candidate
                finer = separators[position + 1 :]
                break
        if not text:
            return []
        if separator and self.keep_end:
            parts = text.split(separator)
            step = len(separator)
            # each part but the last ends with its separator; an empty last part (text ending with one) is dropped
            ends = list(map(add, accumulate(map(len, parts)), range(step, step * len(parts) + 1, step)))
            ends[-1] = len(text)
            if not parts[-1]:
                del ends[-1]
            longest = max(map(sub, ends, [0, *ends[:-1]]))
        elif separator:
            if len(separator) == 1 and self._pieces_fit(text, separator):
                return self._merge_at(text, separator)
            parts = text.split(separator)
            step = len(separator)
            # ends[k] = end offset of piece k: the parts' lengths plus one separator before each but the first.
            ends = list(map(add, accumulate(map(len, parts)), range(0, step * len(parts), step)))
            if not parts[0]:
                del ends[0]  # LangChain drops the empty piece before a leading separator
            # An upper bound (the first piece has no separator before it) is enough: the loop below is
            # exact for any piece, and gives the fast path's result when every piece is short.
            longest = max(map(len, parts)) + step
        else:
            ends = list(range(1, len(text) + 1))
            longest = 1
        if longest < self.chunk_size:  # the common case, without a Python loop
            return self._merge(text, [0, *ends])
        chunks: list[str] = []
        run = [0]  # offsets of a run of consecutive short pieces
        begin = 0
        for end in ends:
            if end - begin < self.chunk_size:
                run.append(end)
            else:
                if len(run) > 1:
                    chunks.extend(self._merge(text, run))
                piece = text[begin:end]
                chunks.extend(self._split(piece, finer) if finer else [piece])
                run = [end]
            begin = end
        if len(run) > 1:
            chunks.extend(self._merge(text, run))
        return chunks

    def _pieces_fit(self, text: str, separator: str) -> bool:
        """Whether every piece at the one-character `separator` is shorter than the chunk size, by the
        bound `_split` uses (the longest run without the separator, plus one). Few separators: split
        and measure; many (words): a regex for a run of chunk_size - 1, which fails within a word."""
        if text.count(separator) < 64:
            return max(map(len, text.split(separator))) + 1 < self.chunk_size
        return _long_run_pattern(separator, self.chunk_size).search(text) is None

    def _merge_at(self, text: str, separator: str) -> list[str]:
        """`_merge` over the pieces of `text` at the one-character `separator` (kept at the start of
        each piece but the first; an empty first piece dropped), every piece shorter than the chunk size.

        The pieces' offsets are 0, every later position of the separator, and len(text): each binary
        search of `_merge` over them becomes a scan of the text between two known offsets."""
        size = self.chunk_size
        overlap = self.chunk_overlap
        length = len(text)
        chunks: list[str] = []
        start = 0  # offset of the window's first piece (`offsets[start]` in _merge)
        current = 0  # offset of the piece the merge is at (`offsets[index]`)
        while current < length:
            reach = start + size
            if reach >= length:  # the rest fits the window
                break
            end = text.rfind(separator, 1, reach + 1)  # the last piece boundary within reach
            if end < current:
                end = current
            following = text.find(separator, end + 1)  # the boundary after `end`
            if following == -1:
                following = length
            if end > start:
                if end - start > size:
                    logger.warning(
                        "Created a chunk of size %d, which is longer than the specified %d", end - start, size
                    )
                _append_stripped(chunks, text[start:end])
                start = max(
                    self._first_boundary(text, separator, end - overlap, start, end),
                    self._first_boundary(text, separator, following - size, start, end),
                )
            current = following
        _append_stripped(chunks, text[start:length])
        return chunks

    @staticmethod
    def _first_boundary(text: str, separator: str, position: int, low: int, high: int) -> int:
        """The first piece boundary at or after `position` in [low, high), else high (`bisect_left`)."""
        if position <= low:
            return low
        if position >= high:
            return high
        found = text.find(separator, position, high)
        return high if found == -1 else found

    def _merge(self, text: str, offsets: list[int]) -> list[str]:
        """LangChain's `_merge_splits` with separator "" over the pieces text[offsets[k]:offsets[k+1]]."""
        size = self.chunk_size
        overlap = self.chunk_overlap
        count = len(offsets) - 1
        # The window of pieces [start, i) totals offsets[i] - offsets[start]; offsets are strictly increasing.
        chunks: list[str] = []
        start = 0
        index = 0
        while index < count:
            # LangChain emits at the first piece i whose addition would overflow the window [start, i).
            boundary = bisect_right(offsets, size + offsets[start], index + 1)
            if boundary > count:
                break
            index = boundary - 1
            if index > start:
                total = offsets[index] - offsets[start]
                if total > size:
                    logger.warning("Created a chunk of size %d, which is longer than the specified %d", total, size)
                _append_stripped(chunks, text[offsets[start] : offsets[index]])
                # Drop from the front while the window exceeds the overlap or the next piece won't fit.
                piece_len = offsets[index + 1] - offsets[index]
                start = max(
                    bisect_left(offsets, offsets[index] - overlap, start, index),
                    bisect_left(offsets, offsets[index] + piece_len - size, start, index),
                )
            index += 1
        _append_stripped(chunks, text[offsets[start] : offsets[count]])
        return chunks


def _append_stripped(chunks: list[str], text: str) -> None:
    text = text.strip()
    if text:
        chunks.append(text)


@lru_cache(maxsize=64)
def _long_run_pattern(separator: str, chunk_size: int) -> re.Pattern:
    return re.compile(f"[^{re.escape(separator)}]{{{max(chunk_size - 1, 0)}}}")


@lru_cache(maxsize=8)
def _splitter(chunk_size: int, chunk_overlap: int, separators: str = "default") -> RecursiveSplitter:
    return RecursiveSplitter(chunk_size, chunk_overlap, *SEPARATOR_SETS[separators])


def validate_chunking(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size <= 0:
        raise ValueError(f"chunk size must be positive, got {chunk_size}")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(f"chunk overlap must be in [0, chunk size), got {chunk_overlap} for {chunk_size}")


def chunk_text(text: str, chunk_size: int = 1000, chunk_overlap: int = 200, separators: str = "default") -> list[str]:
    """Split `text` into chunks of at most `chunk_size` characters with `chunk_overlap` overlap, at the
    separators of SEPARATOR_SETS[separators]."""
    if len(text) <= chunk_size:
        stripped = text.strip()
        return [stripped] if stripped else []
    return _splitter(chunk_size, chunk_overlap, separators).split_text(text)


@dataclasses.dataclass(frozen=True)
class ChunkingParams:
    """How documents become snippets; part of every build record and every resume key."""

    chunk: bool = True
    chunk_size: int = 1000
    chunk_overlap: int = 200
    # "auto": CJK_SEPARATORS for Chinese, Japanese and Korean text (as a reader that knows its language
    # asks with for_language), LangChain's defaults otherwise; or "default" / "cjk" whatever the language.
    separators: str = "auto"

    def __post_init__(self):
        if self.separators not in ("auto", *SEPARATOR_SETS):
            raise ValueError(f"separators must be auto, {' or '.join(SEPARATOR_SETS)}, got {self.separators!r}")

    def for_language(self, language: str | None) -> ChunkingParams:
        """These parameters for text in `language`: "auto" separators resolved by it."""
        if self.separators != "auto":
            return self
        from medsnip.languages import is_cjk

        return dataclasses.replace(self, separators="cjk" if is_cjk(language) else "default")

    def resolved_separators(self) -> str:
        return "default" if self.separators == "auto" else self.separators

    def chunks(self, text: str) -> list[str]:
        """The snippets' contents for one document's text (one snippet with `chunk=False`)."""
        if not self.chunk:
            stripped = text.strip()
            return [stripped] if stripped else []
        return chunk_text(text, self.chunk_size, self.chunk_overlap, self.resolved_separators())

    def to_dict(self) -> dict:
        """Build-record form; "auto" separators are left out, so records of builds made before there was a
        choice read the same."""
        values = dataclasses.asdict(self)
        if self.separators == "auto":
            del values["separators"]
        values["splitter"] = "RecursiveCharacterTextSplitter semantics (separators \\n\\n, \\n, space, '')"
        if self.separators == "cjk":
            values["splitter"] = "RecursiveCharacterTextSplitter semantics (CJK_SEPARATORS, keep_separator='end')"
        return values

    @classmethod
    def from_dict(cls, values: dict):
        return cls(**{field.name: values[field.name] for field in dataclasses.fields(cls) if field.name in values})
