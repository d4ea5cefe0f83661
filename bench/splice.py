"""Put the sections of a partial benchmark run (run_benchmarks.py --only ... --out PART) into
docs/benchmarks.md, replacing the sections of the same title and appending new ones, so one section
can be re-measured without re-running the whole suite.

usage: python bench/splice.py PART [DOC]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(preamble, [(title line, whole section text)]) split at `## ` headings."""
    parts = re.split(r"(?m)^(?=## )", text)
    return parts[0], [(part.splitlines()[0], part) for part in parts[1:]]


def splice(doc: str, part: str) -> str:
    preamble, existing = sections(doc)
    _, measured = sections(part)
    replaced = dict(measured)
    merged = [(title, replaced.pop(title, body)) for title, body in existing]
    merged += list(replaced.items())
    return preamble + "".join(body.rstrip("\n") + "\n\n" for _, body in merged).rstrip("\n") + "\n"


if __name__ == "__main__":
    part_path = Path(sys.argv[1])
    doc_path = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "docs" / "benchmarks.md"
    doc_path.write_text(
        splice(doc_path.read_text(encoding="utf-8"), part_path.read_text(encoding="utf-8")), encoding="utf-8"
    )
