"""Small readers the tests share."""

from __future__ import annotations

from pathlib import Path

from medsnip.buildrecord import read_build_record
from medsnip.snippet import SHARD_GLOB, iter_snippets


def all_snippets(directory: Path) -> list[dict]:
    return [s for shard in sorted(directory.glob(SHARD_GLOB)) for s in iter_snippets(shard)]


def by_pmid(directory: Path) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for snippet in all_snippets(directory):
        found.setdefault(snippet["meta"]["pmid"], []).append(snippet)
    return found


def shard_bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob(SHARD_GLOB))}


def record_without_run(directory: Path) -> dict:
    """build.json minus the parts that legitimately differ between runs (timings, command line)."""
    record = read_build_record(directory)
    record.pop("run")
    record.pop("command")
    return record
