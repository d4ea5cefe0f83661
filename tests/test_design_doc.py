"""docs/design.md's "Where to add what" names real files and symbols: every `path` and `path.py:NAME` it
cites exists, so the worked examples a newcomer follows cannot drift from the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:py|proto|md|toml))(?::([\w.]+))?`")


def where_to_add_section() -> str:
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index("## Where to add what")
    return text[start : text.index("\n## ", start + 1)]


def defined_names(path: Path) -> set[str]:
    """Every top-level name and every Class.member the module defines."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{member.name}")
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(f"{node.name}.{member.target.id}")
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


# the worked examples' own new files, which exist only once someone follows them
EXAMPLES_TO_WRITE = {"corpusbuild/sources/cochrane.py", "indexer/sparse/__init__.py"}


def test_every_file_and_symbol_the_section_names_exists():
    section = where_to_add_section()
    references = REFERENCE.findall(section)
    assert len(references) >= 30  # the section is written in references, not prose alone
    missing = []
    for file, symbol in references:
        if file in EXAMPLES_TO_WRITE:
            continue
        path = REPO / file
        if not path.is_file():
            missing.append(file)
        elif symbol and symbol not in defined_names(path):
            missing.append(f"{file}:{symbol}")
    assert missing == []


def test_each_extension_is_one_package_and_one_table():
    """The four extensions the section promises each have their table where it says."""
    from corpusbuild.sources import KINDS as SOURCE_KINDS
    from corpusbuild.sources import SourceKind
    from indexer.kinds import KINDS as INDEX_KINDS
    from indexer.kinds import IndexKind
    from medsnip.v1 import search_pb2
    from refkit.noise.filters import FILTERS
    from refkit.noise.targets import TARGET_RULES
    from searchd.server import SearchServicer

    assert all(isinstance(kind, SourceKind) for kind in SOURCE_KINDS.values())
    assert all(isinstance(kind, IndexKind) for kind in INDEX_KINDS.values())
    service = search_pb2.DESCRIPTOR.services_by_name["SearchService"]
    assert all(callable(getattr(SearchServicer, method, None)) for method in service.methods_by_name)
    assert all(callable(rule) for _, rule in TARGET_RULES)
    assert all(hasattr(f, "measure") and hasattr(f, "decide") for f in FILTERS)
    section = where_to_add_section()
    for heading in ("A new source", "A new index kind", "A new gRPC method", "A new refkit noise rule"):
        assert f"### {heading}" in section
