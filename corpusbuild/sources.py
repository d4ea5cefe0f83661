"""The source kinds corpusbuild knows: how each finds, orders and maps its inputs.

One table shared by the per-source commands and by recipes (`corpusbuild build`), so a source built
from a recipe is built exactly as its command would build it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.inputs import order_inputs
from corpusbuild.jsonl import map_jsonl_file
from corpusbuild.pubmed import map_pubmed_file
from corpusbuild.statpearls import map_nxml_file
from corpusbuild.textbooks import map_textbook_file
from corpusbuild.wikipedia import map_wikipedia_file

SOURCE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True)
class SourceKind:
    kind: str
    suffixes: tuple[str, ...]
    map_function: Callable
    on_duplicate: str  # "replace": a later record is a newer version; "error": ids must be unique
    document_label: str
    options: tuple[str, ...] = ()  # kind-specific parameters, with their defaults below
    defaults: tuple[tuple[str, object], ...] = ()
    order: Callable[[list[Path]], list[Path]] = list
    position_name: str = "record"

    def params(self, chunking: ChunkingParams, source_name: str, **options) -> dict:
        """The build parameters: chunking, the source name and this kind's own options."""
        unknown = set(options) - set(self.options)
        if unknown:
            raise ValueError(f"{self.kind}: unknown option(s) {', '.join(sorted(unknown))}")
        values = {**chunking.to_dict(), **dict(self.defaults), **options}
        if self.kind in ("jsonl", "statpearls"):
            values["source"] = source_name
        if self.kind == "pubmed":
            values["updates"] = True
        return values


KINDS: dict[str, SourceKind] = {
    kind.kind: kind
    for kind in (
        SourceKind(
            "pubmed", (".xml", ".xml.gz"), map_pubmed_file, "replace", "articles",
            options=("keep_no_abstract",), defaults=(("keep_no_abstract", False),), order=order_inputs,
        ),
        SourceKind("statpearls", (".nxml", ".nxml.gz", ".tar.gz", ".tgz", ".tar", ".tar.bz2"), map_nxml_file,
                   "error", "articles"),
        SourceKind("textbooks", (".txt", ".txt.gz"), map_textbook_file, "error", "books"),
        SourceKind("wikipedia", (".xml", ".xml.bz2", ".bz2", ".xml.gz"), map_wikipedia_file, "replace", "pages"),
        SourceKind(
            "jsonl", (".jsonl", ".jsonl.gz", ".jsonl.bz2"), map_jsonl_file, "error", "documents",
            options=("id_field", "title_field", "text_field"),
            defaults=(("id_field", "_id"), ("title_field", "title"), ("text_field", "text")),
            position_name="line",
        ),
    )
}  # fmt: skip
