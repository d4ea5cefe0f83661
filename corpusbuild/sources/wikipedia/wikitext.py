"""Wikitext to plain text by section, with mwparserfromhell.

Kept: running text, link labels, bold/italic contents, list items (one per line), section headings as
the path of each section. Dropped: templates (infoboxes, citations, navboxes), <ref> and other
non-prose tags, tables, comments, files and images, categories, interlanguage links, and the
trailing reference/link sections. What a language calls its file and category namespaces, its
reference sections and its disambiguation templates comes from a WikiLanguage (corpusbuild.sources.wikipedia.language);
English by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Tag,
    Template,
    Text,
    Wikilink,
)

from corpusbuild.cleaning import clean_text
from corpusbuild.sources.wikipedia.language import ENGLISH, WikiLanguage, resolve_variants

_DROP_TAGS = {
    "ref",
    "references",
    "table",
    "gallery",
    "math",
    "chem",
    "ce",
    "score",
    "timeline",
    "graph",
    "imagemap",
    "syntaxhighlight",
    "source",
    "pre",
    "nowiki",
    "templatedata",
    "mapframe",
    "maplink",
    "noinclude",
    "div",
}
_INTERLANGUAGE_RE = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z0-9]+)*|simple)$")
_BLANK_LINES_RE = re.compile(r"\n\s*\n\s*")
_SPACE_BEFORE_PUNCTUATION_RE = re.compile(r" +([,.;:!?)])")  # left where a <ref> or template was
_STYLE_QUOTES_RE = re.compile(r"'{2,}")  # two or more quotes: italic and bold (style tags are not parsed)
_LINE_SPACES_RE = re.compile(r"[ \t\r\f\v]+")
# Templates nested deeper than mwparserfromhell's tokenizer goes (about 33 levels) end early, and the
# closing braces they leave behind come back as text ("}}}}}}..."): what is left of template syntax in
# text is dropped, as the templates themselves are.
_TEMPLATE_DEBRIS_RE = re.compile(r"\{\{+|\}\}+")


@dataclass
class WikiSection:
    path: tuple[str, ...]  # headings below the page title
    text: str


def is_disambiguation(title: str, wikitext: str, language: WikiLanguage = ENGLISH) -> bool:
    return title.endswith(language.disambiguation_titles) or bool(language.disambiguation_re.search(wikitext))


def _link_text(link: Wikilink, language: WikiLanguage) -> str:
    target = str(link.title).strip().lstrip(":")
    if ":" in target:
        prefix = target.split(":", 1)[0].strip()
        if prefix.casefold() in language.link_prefixes or _INTERLANGUAGE_RE.match(prefix.lower()):
            return ""
    return plain_text(link.text if link.text is not None else link.title, language)


def _node_text(node, language: WikiLanguage = ENGLISH) -> str:
    if isinstance(node, Text):
        if "{{" in node.value or "}}" in node.value:  # rare: only unparsed template syntax has these
            return _TEMPLATE_DEBRIS_RE.sub("", node.value)
        return node.value
    if isinstance(node, Wikilink):
        return _link_text(node, language)
    if isinstance(node, Tag):
        tag = str(node.tag).strip().lower()
        if tag in _DROP_TAGS or node.wiki_markup == "{|":
            return ""
        if tag in ("li", "dt", "dd"):
            return "\n"
        if tag == "br" or tag == "hr":
            return "\n"
        if node.self_closing or node.contents is None:
            return ""
        return plain_text(node.contents, language)
    if isinstance(node, ExternalLink):
        return plain_text(node.title, language) if node.title is not None else ""
    if isinstance(node, HTMLEntity):
        return node.normalize()
    if isinstance(node, Template | Comment | Argument):
        return ""
    if isinstance(node, Heading):
        return plain_text(node.title, language)
    return ""


def plain_text(wikicode, language: WikiLanguage = ENGLISH) -> str:
    return "".join(_node_text(node, language) for node in wikicode.nodes)


def tidy(text: str, keep_width: bool = False) -> str:
    """Paragraphs separated by one blank line, lines trimmed, then ftfy/NFC per paragraph (full-width
    punctuation kept with `keep_width`: corpusbuild.cleaning)."""
    text = _STYLE_QUOTES_RE.sub("", text)
    text = _SPACE_BEFORE_PUNCTUATION_RE.sub(r"\1", text)
    paragraphs = []
    for paragraph in _BLANK_LINES_RE.split(text):
        lines = [_LINE_SPACES_RE.sub(" ", line).strip() for line in paragraph.split("\n")]
        joined = "\n".join(line for line in lines if line)
        if joined:
            paragraphs.append("\n".join(clean_text(line, keep_width) for line in joined.split("\n")))
    return "\n\n".join(p for p in paragraphs if p)


_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_INDENTED_TABLE_RE = re.compile(r"^:+[ \t]*(?=\{\|)", re.MULTILINE)
_REF_RE = re.compile(r"<ref\b[^>]*?/>|<ref\b[^>]*>.*?</ref\s*>", re.DOTALL | re.IGNORECASE)


def strip_refs_and_comments(wikitext: str) -> str:
    """Remove HTML comments, then <ref> tags (self-closing or closed), before parsing.

    Both are dropped by the node walk anyway, and refs carry most citation templates, whose node trees
    are the most expensive part of mwparserfromhell's parse: this saves ~20% of a page's time with
    the same output (tests/test_wikipedia.py checks every sample page). Comments go first so a
    "</ref>" inside a comment cannot end a ref early; an unclosed comment or ref is left to the parser."""
    if "<!--" in wikitext:
        wikitext = _COMMENT_RE.sub("", wikitext)
    if "<ref" in wikitext or "<REF" in wikitext or "<Ref" in wikitext:
        wikitext = _REF_RE.sub("", wikitext)
    return wikitext


def wiki_sections(
    wikitext: str, prestrip: bool = True, language: WikiLanguage = ENGLISH, variants: tuple[str, ...] = ()
) -> list[WikiSection]:
    """The page's prose by section (lead first), trailing reference/link sections dropped.

    `prestrip=False` parses the wikitext exactly as given (what the tests compare the fast path with).
    Chinese: -{...}- variant markup is resolved first (wikilang.resolve_variants, `variants` preferred)."""
    if language.code == "zh":  # comments first: "<!--{{...}}-->" is not variant markup
        wikitext = resolve_variants(_COMMENT_RE.sub("", wikitext), variants)
    if ":{|" in wikitext:  # an indented table (":{|" at a line start) is a table the parser does not see
        wikitext = _INDENTED_TABLE_RE.sub("", wikitext)
    code = mwparserfromhell.parse(strip_refs_and_comments(wikitext) if prestrip else wikitext, skip_style_tags=True)
    sections: list[WikiSection] = []
    headings: list[tuple[int, str]] = []
    buffer: list[str] = []
    skipping = False

    def flush() -> None:
        text = tidy("".join(buffer), language.cjk)
        if text and not skipping:
            sections.append(WikiSection(tuple(title for _, title in headings), text))
        buffer.clear()

    for node in code.nodes:
        if isinstance(node, Heading):
            flush()
            title = clean_text(plain_text(node.title, language), language.cjk)
            while headings and headings[-1][0] >= node.level:
                headings.pop()
            headings.append((node.level, title))
            skipping = headings[0][1].casefold() in language.trailing_sections
            continue
        buffer.append(_node_text(node, language))
    flush()
    return sections
