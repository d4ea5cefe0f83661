"""Plain-text textbooks (MedQA's 18 books: Anatomy_Gray.txt, ...) to snippets, one document per book.

As in MedRAG's Textbooks corpus: the book's whitespace is collapsed (the MedQA files hard-wrap
lines), the text is chunked with RecursiveCharacterTextSplitter(1000, 200) semantics, every chunk's
title is the book name (the file name without `.txt`), and ids export as `<book>_<j>`.
"""

from __future__ import annotations

from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, visible_or_empty
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.ids import BadId, text_id
from corpusbuild.inputs import read_decompressed
from corpusbuild.shardbuild import EVENT_RECORD, FileTask, PartWriter
from medsnip.buildrecord import HashingReader
from medsnip.snippet import document_key, shard_of, snippet_lines

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


def map_textbook_file(task: FileTask, reader: HashingReader, magic: bytes, writer: PartWriter) -> dict:
    """Map task for one book file: the whole book is one document."""
    params = ChunkingParams.from_dict(task.params)
    text = visible_or_empty(clean_text(decode_text(read_decompressed(reader, magic, task.path), task.path)))
    if not text:
        raise InputError(InputProblem(task.path, "empty file: no visible text"))
    try:
        book = text_id(book_name(Path(task.path)), "book name (from the file name)")
    except BadId as error:
        raise InputError(InputProblem(task.path, f"{error}: rename the file")) from error
    chunks = params.chunks(text)
    block = snippet_lines(SOURCE, book, book, chunks, {"book": book, "characters": len(text)})
    writer.add(shard_of(book, task.num_shards), document_key(book), EVENT_RECORD, block, lines=len(chunks))
    return {"stats": {"documents_read": 1, "snippets": len(chunks)}, "problems": []}
