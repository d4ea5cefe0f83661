"""The source kinds corpusbuild knows: how each finds, orders and reads its inputs.

One static table shared by the per-source commands and by recipes (`corpusbuild build`), so a source
built from a recipe is built exactly as its command would build it. Each kind holds its reader
(corpusbuild.events) and the file suffixes it takes; readers keep their heavy parsers' imports inside
the functions that need them, so listing every kind costs little at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.events import Reader
from corpusbuild.inputs import order_inputs
from corpusbuild.sources import jsonl, parallel, pubmed, statpearls, textbooks, wikipedia
from corpusbuild.sources.wikipedia.dump_ranges import plan_dump_split

SOURCE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class SourceKind:
    kind: str
    read: Reader
    suffixes: tuple[str, ...]  # the files a folder given as input contributes
    on_duplicate: str  # "replace": a later record is a newer version; "error": ids must be unique
    document_label: str
    options: tuple[tuple[str, object], ...] = ()  # kind-specific parameters and their defaults
    named: bool = False  # the user names the source (ids are NAME:id:chunk), so the map task needs it
    order: Callable[[list[Path]], list[Path]] = list
    position_name: str = "record"
    split_function: Callable | None = None  # cuts one big input into ranges parsed in parallel

    def params(self, chunking: ChunkingParams, source_name: str, **options) -> dict:
        """The build parameters: chunking, this kind's own options and, if named, the source name."""
        unknown = set(options) - {name for name, _ in self.options}
        if unknown:
            raise ValueError(f"{self.kind}: unknown option(s) {', '.join(sorted(unknown))}")
        values = {**chunking.to_dict(), **dict(self.options), **options}
        if self.named:
            values["source"] = source_name
        return values


KINDS: dict[str, SourceKind] = {
    kind.kind: kind
    for kind in (
        SourceKind(
            "pubmed",
            pubmed.read_pubmed,
            pubmed.SUFFIXES,
            "replace",
            "articles",
            options=(("keep_no_abstract", False), ("max_record_chars", 1_000_000), ("medrag", False)),
            order=order_inputs,
        ),
        SourceKind(
            "statpearls",
            statpearls.read_nxml,
            statpearls.SUFFIXES,
            "error",
            "articles",
            named=True,
            options=(("medrag", False),),
        ),
        SourceKind(
            "textbooks", textbooks.read_textbook, textbooks.SUFFIXES, "error", "books", options=(("medrag", False),)
        ),
        SourceKind(
            "wikipedia",
            wikipedia.read_wikipedia,
            wikipedia.SUFFIXES,
            "replace",
            "pages",
            options=(("medrag", False), ("language", None), ("convert_script", None)),
            named=True,
            split_function=plan_dump_split,
        ),
        SourceKind(
            "parallel",
            parallel.read_parallel,
            parallel.SUFFIXES,
            "error",
            "documents",
            options=(("language", None), ("english", None)),
            named=True,
            position_name="line",
        ),
        SourceKind(
            "jsonl",
            jsonl.read_jsonl,
            jsonl.SUFFIXES,
            "error",
            "documents",
            options=(("id_field", "_id"), ("title_field", "title"), ("text_field", "text"), ("language", None)),
            named=True,
            position_name="line",
        ),
    )
}
