"""Plain-text textbooks (MedQA's 18 books: Anatomy_Gray.txt, ...) to snippets, one document per book.

As in MedRAG's Textbooks corpus: the book's whitespace is collapsed (the MedQA files hard-wrap
lines), the text is chunked with RecursiveCharacterTextSplitter(1000, 200) semantics, every chunk's
title is the book name (the file name without `.txt`), and ids export as `<book>_<j>`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, visible_or_empty
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import ReaderEvent, ReaderInput, ReaderStats, Record
from corpusbuild.ids import BadId, text_id
from corpusbuild.inputs import read_decompressed
from corpusbuild.sources.medrag import read_textbook as read_textbook_as_medrag
from medsnip.snippet import document_key, snippet_lines

SOURCE = "textbooks"
SUFFIXES = (".txt", ".txt.gz")


def book_name(path: Path) -> str:
    name = path.name
    for suffix in (".txt.gz", ".txt"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 (a byte-order mark is dropped); anything else is an error naming the offending byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        bad = data[error.start : error.start + 1].hex()
        raise InputError(
            InputProblem(label, f"not UTF-8 text: byte 0x{bad} at offset {error.start}", line=line)
        ) from error


def read_textbook(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one book file: the whole book is one document."""
    if source.params.get("medrag"):
        return (yield from read_textbook_as_medrag(source))
    params = ChunkingParams.from_dict(source.params)
    data = read_decompressed(source.stream, source.magic, source.path)
    text = visible_or_empty(clean_text(decode_text(data, source.path)))
    if not text:
        raise InputError(InputProblem(source.path, "empty file: no visible text"))
    try:
        book = text_id(book_name(Path(source.path)), "book name (from the file name)")
    except BadId as error:
        raise InputError(InputProblem(source.path, f"{error}: rename the file")) from error
    chunks = params.chunks(text)
    block = snippet_lines(SOURCE, book, book, chunks, {"book": book, "characters": len(text)})
    yield Record(book, document_key(book), block, len(chunks))
    return ReaderStats(Counter(documents_read=1, snippets=len(chunks)))
