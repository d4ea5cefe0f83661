"""What a source reader gives the build engine: typed events, and its own counters at the end.

A reader is a generator function `read(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]`:
it parses one input (or one byte range of it) and yields, in input order, a `Record` per document with
its snippet lines, a `Skip` per document it leaves out (and why), a `Delete` per document the input
withdraws, and a `Problem` per bad record (with its file and line); it returns what it counted. It
never sees shards, part files or other inputs: the engine alone places each document in a shard (by
its id), writes it, and decides between versions, so a reader can be tested by listing its events.
A problem that spoils the whole input is raised as `InputError` instead (the input then contributes
nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from corpusbuild.errors import InputProblem
from medsnip.buildrecord import HashingReader


@dataclass(frozen=True, slots=True)
class ReaderInput:
    """One input as a reader gets it: its path (for messages), its bytes, the first four of them (to
    tell compressions apart), the build parameters, and for a split input the byte range it reads
    (corpusbuild.sources.wikipedia.dump_ranges), else None."""

    path: str
    stream: HashingReader
    magic: bytes
    params: dict
    part: dict | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A document: its id, its 63-bit ordering key (the PMID, the page id, or document_key(id)), its
    snippet lines and how many there are. `position` orders versions of one key within the input and
    is what duplicate-id messages cite (a line number for line-based sources); None: input order."""

    doc_id: str
    key: int
    lines: bytes
    count: int
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Skip:
    """A document read and left out, with the reason counted in build.json; it also withdraws an
    earlier version of the same document."""

    doc_id: str
    key: int
    reason: str
    position: int | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """The input withdraws a document (PubMed's DeleteCitation)."""

    doc_id: str
    key: int


@dataclass(frozen=True, slots=True)
class Problem:
    """A bad record, reported with its file and line; the rest of the input still builds."""

    problem: InputProblem


ReaderEvent = Record | Skip | Delete | Problem


@dataclass
class ReaderStats:
    """A reader's counters for one input, listed in build.json as they are: `counts` in the order the
    reader keeps them, then `skipped` by reason (readers that list skips), then `facts` that are not
    counts (PubMed's root element)."""

    counts: Counter = field(default_factory=Counter)
    skipped: Counter | None = None
    facts: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        values: dict = dict(self.counts)
        if self.skipped is not None:
            values["skipped"] = dict(sorted(self.skipped.items()))
        return {**values, **self.facts}


Reader = Callable[[ReaderInput], Generator[ReaderEvent, None, ReaderStats]]
