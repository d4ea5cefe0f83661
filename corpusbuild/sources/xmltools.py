"""Small lxml helpers the XML readers share: namespace-blind child lookup, the iterparse release and
the wording of parse errors."""

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


_ENCODING_ERRORS = ("Invalid bytes in character encoding", "not proper UTF-8", "Char 0x0 out of allowed range")


def syntax_error_message(message: str) -> str:
    """What an lxml parse error means to the user: bytes that do not fit the declared encoding are
    called that (libxml2 says "Invalid bytes in character encoding"), anything else is malformed XML."""
    if any(marker in message for marker in _ENCODING_ERRORS):
        return (
            "wrong encoding: these bytes are not valid in the encoding the XML declares (UTF-8 when it "
            f"declares none); re-encode the file or correct its <?xml encoding?> ({message})"
        )
    return f"malformed XML: {message}"
