"""Small lxml helpers the XML readers share: namespace-blind child lookup and the iterparse release."""

from __future__ import annotations

from lxml import etree


def local_name(tag) -> str:
    """The tag without its namespace ("" for comments and processing instructions)."""
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def children(element, name: str) -> list:
    """Direct children whose local name is `name`, whatever their namespace."""
    return [child for child in element if local_name(child.tag) == name]


def first_child(element, name: str):
    """The first direct child whose local name is `name`, or None."""
    for candidate in element:
        if local_name(candidate.tag) == name:
            return candidate
    return None


def release(element) -> None:
    """Free a finished record and the siblings before it (the iterparse memory idiom)."""
    element.clear(keep_tail=False)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]
