"""The user documentation the tests read: README.md (the short tour) and every page of the documentation site
(docs/**/*.md, mkdocs.yml). A test that checks what the documentation says reads them all, so a paragraph
moved from one page to another keeps being checked."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"


def pages() -> list[Path]:
    """README.md first, then the site's pages in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def name(page: Path) -> str:
    """How an error names a page: its path in the repository (README.md, docs/serve/searchd.md)."""
    return page.relative_to(REPO).as_posix()


def text() -> str:
    """Every page's text, one after the other."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())
