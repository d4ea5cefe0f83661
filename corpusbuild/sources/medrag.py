"""MedRAG-compatible mode (`--medrag`, recipe option `medrag = true`): MedCorp's snippets as MedRAG's
own scripts (github.com/Teddy-XiongGZ/MedRAG, src/data/*.py) make them, for users who must reproduce
its numbers. Same ids, titles, chunk boundaries and `contents`, including the places where medsnip's
default mode deliberately differs:

- PubMed: one snippet per citation with an abstract, id `PMID:<n>`, no chunking. MedRAG slices XML
  lines rather than parsing them, so titles and abstracts keep entity references (`&lt;`) and
  inline-markup debris, abstract section labels are dropped, and only the first line of an
  AbstractText that spans lines is kept. (Default mode: parsed XML, entities decoded, `LABEL: text`
  sections, chunked at the chunk size, ids `pubmed:<pmid>:<j>`.)
- Textbooks: the raw book text is chunked and whitespace is collapsed inside each chunk afterwards
  (default mode collapses first, so its chunk boundaries differ), title = the file name without
  `.txt` (MedRAG's `str.strip(".txt")`, which also eats leading or trailing `.`, `t`, `x`), ids
  `<book>_<j>`.
- StatPearls: MedRAG's paragraph walk (every `sec` in document order; subtitle paragraphs;
  paragraphs under 200 characters appended to the previous one while under 1,000; lists grouped), no
  splitting of long paragraphs, ids `<file>_<j>`, titles `Article -- Section -- Subtitle`.
- Wikipedia: MedRAG chunks Hugging Face's `wikipedia` 20220301.en text; here the article text is
  medsnip's cleaning of the dump (section headings kept as their own lines), chunked like MedRAG
  (whole article, whitespace collapsed per chunk, title = page title, ids `<page id>_<j>`). The
  boundaries follow MedRAG's rules; the text is not byte-equal to that dataset's.
- `contents` is MedRAG's `concat`: stripped title, ". " or (after . ? !) a space, stripped content,
  also when the title is empty.

Everything else (shards, lineage, resume, updates by id) is the engine's, unchanged.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Generator, Iterator
from pathlib import PurePosixPath

import orjson

from corpusbuild.chunking import RecursiveSplitter
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import ReaderEvent, ReaderInput, ReaderStats, Record, Skip
from corpusbuild.inputs import decompressed
from medsnip.snippet import SENTENCE_ENDS, document_key

_WHITESPACE = re.compile(r"\s+")
SHORT_PARAGRAPH = 200  # MedRAG's StatPearls merge thresholds
MERGED_LIMIT = 1000


def concat(title: str, content: str) -> str:
    """MedRAG's `concat`, exactly (an empty title gives ". content")."""
    title, content = title.strip(), content.strip()
    return f"{title} {content}" if title.endswith(SENTENCE_ENDS) else f"{title}. {content}"


def snippet_line(snippet_id: str, title: str, content: str, source: str, doc_id: str, chunk: int) -> bytes:
    """One snippet in medsnip's field order, with MedRAG's id, title, content and contents."""
    snippet = {
        "id": snippet_id,
        "title": title,
        "content": content,
        "contents": concat(title, content),
        "source": source,
        "doc_id": doc_id,
        "chunk": chunk,
        "meta": {"medrag": True},
    }
    return orjson.dumps(snippet) + b"\n"


def chunked(text: str, chunk_size: int, chunk_overlap: int) -> list[str]:
    """MedRAG's textbook/Wikipedia chunking: split the stripped raw text, then collapse whitespace."""
    return [
        _WHITESPACE.sub(" ", chunk) for chunk in RecursiveSplitter(chunk_size, chunk_overlap).split_text(text.strip())
    ]


def universal_newlines(data: bytes, label: str) -> str:
    """UTF-8 text as Python's text mode reads it (what MedRAG's `open(path).read()` returns)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(InputProblem(label, f"not UTF-8 text at offset {error.start}", line=line)) from error
    return text.replace("\r\n", "\n").replace("\r", "\n")


# PubMed ------------------------------------------------------------------------------------------


def pubmed_citations(text: str) -> Iterator[tuple[str, str, str]]:
    """(pmid, title, abstract) by MedRAG's line rules: an <Article> line resets title and abstract; the
    last <PMID line seen gives the id; a line starting <ArticleTitle> gives the title between its tags;
    each line starting <AbstractText adds what follows its opening tag; </Article> emits the citation
    if the abstract is not blank."""
    pmid, title, abstract = "", "", ""
    for line in text.split("\n"):
        line = line.strip()
        if line == "<Article>" or line.startswith("<Article "):
            title, abstract = "", ""
        elif line == "</Article>" and abstract.strip():
            yield pmid, title, abstract
            continue
        if line.startswith("<PMID"):
            pmid = line.strip("</PMID>").split(">")[-1]
        if line.startswith("<ArticleTitle>"):
            title = line[len("<ArticleTitle>") : -len("</ArticleTitle>")]
        if line.startswith("<AbstractText"):
            piece = "".join(line[len("<AbstractText") : -len("</AbstractText>")].split(">")[1:])
            abstract = f"{abstract} {piece}" if abstract else piece


def read_pubmed(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    counts = Counter(articles=0, snippets=0)
    text = universal_newlines(decompressed(source.stream, source.magic).read(), source.path)
    for pmid, title, abstract in pubmed_citations(text):
        counts["articles"] += 1
        if not pmid.isdigit():
            raise InputError(InputProblem(source.path, f"PMID {pmid!r} is not a number", element="PMID"))
        counts["snippets"] += 1
        yield Record(pmid, int(pmid), snippet_line(f"PMID:{pmid}", title, abstract, "pubmed", pmid, 0), 1)
    return ReaderStats(counts)


# Textbooks ---------------------------------------------------------------------------------------


def book_title(file_name: str) -> str:
    """MedRAG's title for a book file: `name.strip(".txt")` (characters, not a suffix)."""
    return file_name.removesuffix(".gz").strip(".txt")  # noqa: B005 - MedRAG's quirk, reproduced on purpose


def read_textbook(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    name = PurePosixPath(source.path).name.removesuffix(".gz")
    book, title = name.replace(".txt", ""), book_title(name)
    text = universal_newlines(decompressed(source.stream, source.magic).read(), source.path)
    chunks = chunked(text, source.params["chunk_size"], source.params["chunk_overlap"])
    block = b"".join(snippet_line(f"{book}_{j}", title, chunk, "textbooks", book, j) for j, chunk in enumerate(chunks))
    yield Record(book, document_key(book), block, len(chunks))
    return ReaderStats(Counter(documents_read=1, snippets=len(chunks)))


# StatPearls --------------------------------------------------------------------------------------


def element_text(element) -> str:
    """MedRAG's `extract_text`: the element's text, then each child's text and tail, joined by spaces."""
    text = (element.text or "").strip()
    for child in element:
        text += (" " if text else "") + element_text(child)
        if child.tail and child.tail.strip():
            text += (" " if text else "") + child.tail.strip()
    return text.strip()


def is_subtitle(element) -> bool:
    """A paragraph holding only one <bold> and nothing after it."""
    children = list(element)
    return (
        element.tag == "p"
        and len(children) == 1
        and children[0].tag == "bold"
        and not (children[0].tail and children[0].tail.strip())
    )


class _Paragraphs:
    """The snippets of one article as MedRAG's StatPearls walk builds them (merging rewrites the last)."""

    def __init__(self, file_id: str):
        self.file_id, self.items, self.next_index = file_id, [], 0

    def add(self, title: str, content: str) -> None:
        self.items.append([f"{self.file_id}_{self.next_index}", title, content])
        self.next_index += 1

    def extend_last(self, content: str) -> None:
        self.items[-1][2] = content


def statpearls_snippets(root, file_id: str, label: str) -> list[list[str]]:
    """[id, title, content] per snippet of one NXML article, by MedRAG's rules."""
    title_node = root.find(".//title")
    if title_node is None or title_node.text is None:
        raise InputError(InputProblem(label, "no <title> text: MedRAG's walk needs the article title"))
    title = title_node.text
    out = _Paragraphs(file_id)
    for section in root.findall(".//sec"):
        heading = section.find("./title")
        if heading is None or heading.text is None:
            raise InputError(InputProblem(label, "a <sec> without <title> text", element="sec"))
        section_title = heading.text.strip()
        prefix = " -- ".join([title, section_title])
        last_text, last_node = None, None
        for child in section:
            if is_subtitle(child):
                last_text = None
                prefix = " -- ".join(prefix.split(" -- ")[:2] + [element_text(child)])
            elif child.tag == "p":
                text = element_text(child)
                if len(text) < SHORT_PARAGRAPH and last_text is not None and len(last_text + text) < MERGED_LIMIT:
                    last_text = " ".join([out.items[-1][2], text])
                    out.extend_last(last_text)
                else:
                    last_text = text
                    out.add(prefix, text)
            elif child.tag == "list":
                items = [element_text(item) for item in child]
                joined = " ".join(items)
                if last_text is not None and len(joined + last_text) < MERGED_LIMIT:
                    last_text = " ".join([out.items[-1][2], *items])
                    out.extend_last(last_text)
                elif len(joined) < MERGED_LIMIT:
                    last_text = joined
                    out.add(prefix, joined)
                else:
                    last_text = None
                    for item in items:
                        out.add(prefix, item)
                if last_node is not None and is_subtitle(last_node):
                    prefix = " -- ".join([title, section_title])
            last_node = child
    return out.items


def statpearls_record(member: str, data: bytes, label: str, source_name: str, position: int) -> ReaderEvent:
    """The Record of one NXML file (a Skip when MedRAG's walk gives it no snippet)."""
    file_id = PurePosixPath(member).name.replace(".nxml", "")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        line = error.position[0] if error.position else None
        raise InputError(InputProblem(label, f"XML error (MedRAG's parser): {error}", line=line)) from error
    items = statpearls_snippets(root, file_id, label)
    if not items:
        return Skip(file_id, document_key(file_id), "no_text", position)
    block = b"".join(
        snippet_line(snippet_id, title, content, source_name, file_id, j)
        for j, (snippet_id, title, content) in enumerate(items)
    )
    return Record(file_id, document_key(file_id), block, len(items), position)


# Wikipedia ---------------------------------------------------------------------------------------


def wikipedia_block(page_id: str, title: str, sections, chunk_size: int, chunk_overlap: int) -> bytes:
    """One article as MedRAG chunks it: headings and section texts as paragraphs of one text."""
    parts = []
    for section in sections:
        if section.path:
            parts.append(section.path[-1])
        parts.append(section.text)
    chunks = chunked("\n\n".join(part for part in parts if part), chunk_size, chunk_overlap)
    return b"".join(
        snippet_line(f"{page_id}_{j}", title, chunk, "wikipedia", page_id, j) for j, chunk in enumerate(chunks)
    )
