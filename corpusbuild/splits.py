"""An input cut into byte ranges parsed in parallel: what a source's split function (SourceKind.split_function,
e.g. sources/wikipedia/dump_ranges.py) hands the engine, which runs one map task per range."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SplitPlan:
    """How one input file is parsed in parts: its identity and one task description per range."""

    sha256: str
    size: int
    parts: list[dict]  # {"start", "end", "index", "count", "head"} in file order
