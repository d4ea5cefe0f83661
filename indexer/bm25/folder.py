"""What a BM25 index folder is: the stage name its build.json carries and where its Lucene indexes lie
(`index/`, or `parts/part-*` for the "parts" layout). Shared by the full build (indexer.bm25) and the
update by id (indexer.bm25.update), which each read folders the other wrote."""

from __future__ import annotations

from pathlib import Path

STAGE = "indexer.bm25"


def index_dirs(path: Path) -> list[Path]:
    """The Lucene indexes of a BM25 index folder: `index/`, or its parts (layout "parts")."""
    parts = sorted((path / "parts").glob("part-*"))
    return parts or [path / "index"]
