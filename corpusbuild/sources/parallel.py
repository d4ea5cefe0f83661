"""Sentence-aligned text (WMT biomedical test sets: Medline abstracts in Chinese, French, German ...) to
snippets in its own language, each carrying its English alignment in `meta.en`.

Two layouts, told apart by the first line:
- `docN<TAB>sentN<TAB>text` (WMT20 Medline): one document per `docN`, its sentences in file order, the
  first (the article's title in these sets) the title, the others the text; the English side is
  aligned by (doc, sentence), and a sentence the other side lacks, or one without a number (a
  section label such as "MÉTHODES:"), is counted (`unaligned_sentences`), not guessed;
- one sentence per line (WMT19 Medline): the file says nothing of where an abstract ends, so each line
  is a document of its own (id: its line number), aligned line by line; a blank line (a sentence the
  translation left out) is skipped and counted; files of different lengths are an error, since every
  later pair would be wrong.

The English file is `--english PATH`, or found beside the input by name (`X.zh` -> `X.en`, `X_fr.txt` ->
`X_en.txt`); without one the snippets have no `meta.en` and the build record says so. Sentences are
joined with a space, or with nothing in Chinese and Japanese; CJK text keeps its full-width punctuation
and is chunked at 。！？；(corpusbuild.chunking).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Generator
from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, visible_or_empty
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import ReaderEvent, ReaderInput, ReaderStats, Record
from corpusbuild.inputs import DECOMPRESSION_ERRORS, decompressed
from corpusbuild.sources.textbooks import decode_text
from medsnip.languages import canonical_language, is_cjk
from medsnip.snippet import document_key, snippet_lines

# Lines some WMT documents carry before their title and their abstract: layout, not text. Section labels
# ("Méthodes", "RÉSULTATS:") are kept, as PubMed abstracts keep theirs.
_LAYOUT_MARKERS = frozenset({"Title", "Abstract"})
SUFFIXES = (".txt", ".zh", ".fr", ".de", ".es", ".pt", ".it", ".ru", ".ja", ".ko")
_DOCUMENT_LINE_RE = re.compile(r"^([^\t]+)\t(\d*)\t(.*)$")  # the number may be missing (a section label)


def language_of_name(path: str) -> str | None:
    """The language a WMT file's name gives (`*.zh`, `*_fr.txt`, `*.de.txt`), or None."""
    name = Path(path).name
    for pattern in (r"\.([a-z]{2})$", r"[._-]([a-z]{2})\.txt$"):
        found = re.search(pattern, name)
        if found and found.group(1) != "en":
            return found.group(1)
    return None


def english_beside(path: str, language: str) -> Path | None:
    """The English side of a WMT file named by the usual conventions, if it exists."""
    name = Path(path).name
    for pattern, replacement in ((rf"\.{language}$", ".en"), (rf"([._-]){language}\.txt$", r"\1en.txt")):
        candidate = re.sub(pattern, replacement, name)
        if candidate != name and (Path(path).parent / candidate).is_file():
            return Path(path).parent / candidate
    return None


def _read_lines(data: bytes, path: str) -> list[tuple[int, str]]:
    """(line number, text without its line break) of a UTF-8 file (decode_text: a byte-order mark is
    dropped, a byte that is not UTF-8 is named); blank lines at the end are not sentences."""
    lines = [line.rstrip("\r") for line in decode_text(data, path).split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    return list(enumerate(lines, 1))


def read_parallel(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one sentence-aligned file (see the module's docstring)."""
    language = source.params.get("language") or language_of_name(source.path)
    if not language:
        raise InputError(InputProblem(source.path, "cannot tell the language from the file name: pass --language"))
    language = canonical_language(language)
    params = ChunkingParams.from_dict(source.params).for_language(language)
    name = source.params["source"]
    english_path = source.params.get("english") or english_beside(source.path, language)
    english_path = Path(english_path).resolve() if english_path else None
    stats = ReaderStats(
        Counter(documents_read=0, snippets=0, bad_records=0, aligned_sentences=0, unaligned_sentences=0)
    )
    stats.facts.update(
        {
            "language": language,
            "separators": params.resolved_separators(),
            "english": str(english_path) if english_path else None,
        }
    )
    try:
        lines = _read_lines(decompressed(source.stream, source.magic).read(), source.path)
    except DECOMPRESSION_ERRORS as error:
        raise InputError(InputProblem(source.path, f"truncated or corrupt compressed stream ({error})")) from error
    if not any(text.strip() for _, text in lines):
        raise InputError(InputProblem(source.path, "empty file: no sentences"))
    english_lines = None
    if english_path:
        english_bytes = english_path.read_bytes()
        english_lines = _read_lines(english_bytes, str(english_path))
        stats.facts["english_sha256"] = hashlib.sha256(english_bytes).hexdigest()
    by_document = _DOCUMENT_LINE_RE.match(lines[0][1]) is not None
    documents = _documents(source.path, lines, english_lines, str(english_path), by_document, stats.counts)
    cjk = is_cjk(language)
    joiner = "" if cjk else " "
    for doc_id, first_line, sentences, english in documents:
        stats.counts["documents_read"] += 1
        cleaned = [visible_or_empty(clean_text(s, keep_width=cjk)) for s in sentences]
        cleaned = [s for s in cleaned if s and s not in _LAYOUT_MARKERS]
        title, body = (cleaned[0], cleaned[1:]) if by_document and len(cleaned) > 1 else ("", cleaned)
        chunks = params.chunks(joiner.join(body)) or [""]
        meta: dict = {"language": language, "line": first_line, "sentences": len(sentences)}
        if english is not None:
            meta["en"] = " ".join(clean_text(s) for s in english)
        stats.counts["snippets"] += len(chunks)
        yield Record(
            doc_id, document_key(doc_id), snippet_lines(name, doc_id, title, chunks, meta), len(chunks), first_line
        )
    return stats


def _documents(path: str, lines, english_lines, english_path: str, by_document: bool, counts: Counter):
    """(doc id, first line, sentences, English sentences or None) per document."""
    if not by_document:
        if english_lines is not None and len(english_lines) != len(lines):
            message = (
                f"{len(lines)} sentences, but the English side {english_path} has {len(english_lines)}: "
                "line-aligned files must have as many"
            )
            raise InputError(InputProblem(path, message))
        for position, (number, text) in enumerate(lines):
            if not text.strip():
                counts["blank_lines"] += 1
                continue
            english = [english_lines[position][1]] if english_lines is not None else None
            counts["aligned_sentences" if english is not None else "unaligned_sentences"] += 1
            yield str(number), number, [text], english
        return
    english_by_key: dict[tuple[str, int], str] = {}
    for number, text in english_lines or ():
        if text.strip():
            doc_id, sentence, english_text = _document_line(english_path, number, text)
            if sentence is not None:
                english_by_key[(doc_id, sentence)] = english_text
    grouped: dict[str, list[tuple[int | None, int, str]]] = {}  # doc id -> (sentence, line, text), file order
    for number, text in lines:
        if text.strip():
            doc_id, sentence, foreign_text = _document_line(path, number, text)
            grouped.setdefault(doc_id, []).append((sentence, number, foreign_text))
    for doc_id, sentences in grouped.items():
        english = None
        if english_lines is not None:
            english = [
                english_by_key[(doc_id, sentence)]
                for sentence, _, _ in sentences
                if (doc_id, sentence) in english_by_key
            ]
        aligned = len(english or ())
        counts["aligned_sentences"] += aligned
        counts["unaligned_sentences"] += len(sentences) - aligned
        yield doc_id, sentences[0][1], [text for _, _, text in sentences], english


def _document_line(path: str, number: int, text: str) -> tuple[str, int | None, str]:
    """(doc id, sentence number or None, text) of a `docN<TAB>sentN<TAB>text` line."""
    found = _DOCUMENT_LINE_RE.match(text)
    if found is None:
        raise InputError(InputProblem(path, "expected 'doc<TAB>sentence number<TAB>text'", line=number))
    return found.group(1), int(found.group(2)) if found.group(2) else None, found.group(3)
