"""JATS articles (PMC) and BITS book parts (NCBI Bookshelf, StatPearls) to titled paragraphs.

Both formats share `sec` / `title` / `p` / `list`; this walks the body in document order and yields
(heading path, paragraph text). Reference lists, graphics, formulas' markup and tables' cells are
dropped; figure and table captions are kept as text; lists become one paragraph per run of items.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from corpusbuild.cleaning import clean_text
from corpusbuild.sources.xmltools import children, first_child, local_name

# Subtrees that never carry running text.
_DROP = {
    "ref-list",
    "graphic",
    "inline-graphic",
    "media",
    "table",
    "alternatives",
    "object-id",
    "label",
    "fn-group",
    "ack",
    "notes",
    "permissions",
    "disp-formula",
    "tex-math",
    "math",
    "supplementary-material",
}
# Inside a paragraph: block elements emitted on their own after the paragraph text.
_BLOCKS_IN_P = {"list", "table-wrap", "fig", "boxed-text", "disp-quote", "def-list"}
BOOK_ROOTS = ("book-part-wrapper", "book-part", "book")


@dataclass
class NxmlDocument:
    """One article or book part: its ids, title and paragraphs (heading path, text) in order."""

    kind: str  # "jats" or "bits"
    title: str
    ids: dict[str, str] = field(default_factory=dict)
    paragraphs: list[tuple[tuple[str, ...], str]] = field(default_factory=list)


def _first(element, *path: str):
    """The element at a path of local names below `element`, or None."""
    for name in path:
        if element is None:
            return None
        element = first_child(element, name)
    return element


def inline_text(element) -> str:
    """Running text of an element: its text and its inline children's, without dropped or block
    subtrees (whose tails, the text after them, are kept)."""
    parts = [element.text or ""]
    for child in element:
        name = local_name(child.tag)
        if name and name not in _DROP and name not in _BLOCKS_IN_P:
            parts.append(inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


class _Walker:
    def __init__(self, document: NxmlDocument):
        self.document = document

    def emit(self, path: tuple[str, ...], text: str) -> None:
        text = clean_text(text)
        if text:
            self.document.paragraphs.append((path, text))

    def walk(self, element, path: tuple[str, ...]) -> None:
        for child in element:
            name = local_name(child.tag)
            if not name or name in _DROP or name == "title":
                continue
            if name in ("sec", "abstract", "trans-abstract", "app", "glossary"):
                title = _first(child, "title")
                heading = clean_text(inline_text(title)).rstrip(":").strip() if title is not None else ""
                if not heading and name == "abstract":
                    heading = "Abstract"
                self.walk(child, (*path, heading) if heading else path)
            elif name == "p":
                self.emit(path, inline_text(child))
                for block in child:
                    if local_name(block.tag) in _BLOCKS_IN_P:
                        self.walk_block(block, path)
            elif name in _BLOCKS_IN_P:
                self.walk_block(child, path)
            else:
                self.walk(child, path)

    def walk_block(self, block, path: tuple[str, ...]) -> None:
        name = local_name(block.tag)
        if name == "list":
            items = [clean_text(inline_text_deep(item)) for item in children(block, "list-item")]
            self.document.paragraphs.extend((path, group) for group in join_items([i for i in items if i]))
        elif name in ("fig", "table-wrap"):
            caption = _first(block, "caption")
            label = _first(block, "label")
            text = " ".join(
                part
                for part in (
                    clean_text(inline_text(label)) if label is not None else "",
                    clean_text(inline_text_deep(caption)) if caption is not None else "",
                )
                if part
            )
            self.emit(path, text)
        else:
            self.walk(block, path)


def inline_text_deep(element) -> str:
    """All running text below an element (paragraphs of a caption or list item joined by spaces)."""
    pieces = []
    for child in element:
        name = local_name(child.tag)
        if name in ("p", "title"):
            pieces.append(inline_text(child))
        elif name == "list":
            pieces.extend(inline_text_deep(item) for item in children(child, "list-item"))
        elif name and name not in _DROP:
            pieces.append(inline_text(child))
    return " ".join(pieces) if pieces else inline_text(element)


def join_items(items: list[str], limit: int = 1000) -> list[str]:
    """List items joined one per line while the group stays under `limit` characters."""
    groups: list[str] = []
    for item in items:
        if groups and len(groups[-1]) + 1 + len(item) < limit:
            groups[-1] += "\n" + item
        else:
            groups.append(item)
    return groups


def _ids(meta) -> dict[str, str]:
    ids = {}
    if meta is None:
        return ids
    for child in meta:
        name = local_name(child.tag)
        if name in ("article-id", "book-part-id", "book-id"):
            kind = child.get("pub-id-type") or child.get("book-part-id-type") or child.get("book-id-type") or name
            if child.text and child.text.strip():
                ids.setdefault(kind, child.text.strip())
    return ids


def parse_nxml(root) -> list[NxmlDocument]:
    """The documents in a parsed JATS/BITS tree (a pmc-articleset may hold several articles)."""
    name = local_name(root.tag)
    if name == "pmc-articleset":
        return [doc for article in children(root, "article") for doc in parse_nxml(article)]
    if name == "article":
        meta = _first(root, "front", "article-meta")
        title_element = _first(meta, "title-group", "article-title") if meta is not None else None
        document = NxmlDocument("jats", clean_text(inline_text(title_element)) if title_element is not None else "")
        document.ids = _ids(meta)
        walker = _Walker(document)
        for abstract in children(meta, "abstract") if meta is not None else []:
            if abstract.get("abstract-type") in (None, "", "summary"):
                walker.walk(abstract, ("Abstract",))
        body = _first(root, "body")
        if body is not None:
            walker.walk(body, ())
        return [document]
    if name in BOOK_ROOTS:
        part = root if name == "book-part" else next(iter(root.iter("{*}book-part")), None)
        if part is None:
            return []
        meta = _first(part, "book-part-meta")
        title_element = _first(meta, "title-group", "title") if meta is not None else None
        document = NxmlDocument("bits", clean_text(inline_text(title_element)) if title_element is not None else "")
        document.ids = _ids(meta)
        body = _first(part, "body")
        if body is not None:
            _Walker(document).walk(body, ())
        return [document]
    raise ValueError(f"not JATS or BITS XML: root element <{name}>")


def merge_short_paragraphs(
    paragraphs: list[tuple[tuple[str, ...], str]], min_chars: int = 200, max_chars: int = 1000
) -> list[tuple[tuple[str, ...], str]]:
    """A paragraph under `min_chars` joins the previous one of the same section when the result
    stays under `max_chars`."""
    merged: list[tuple[tuple[str, ...], str]] = []
    for path, text in paragraphs:
        if merged and len(text) < min_chars and merged[-1][0] == path:
            joined = merged[-1][1] + " " + text
            if len(joined) < max_chars:
                merged[-1] = (path, joined)
                continue
        merged.append((path, text))
    return merged
