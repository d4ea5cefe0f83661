"""Any JSONL collection (BEIR's corpus.jsonl is the main case) to snippets.

One JSON object per line with an id, an optional title and a text field (names configurable). Other
fields are kept in `meta`. `--no-chunk` keeps one snippet per document, so relevance judgments keyed by
document id still apply. Ids must be unique across the whole collection: a repeat is reported with
its file and line (the first occurrence is kept). Ids, titles, texts and big integers are checked per
line (corpusbuild.ids, `parse_record`): a bad line is reported with its file and line and skipped.
"""

from __future__ import annotations

import codecs
import json
import re
from collections import Counter
from collections.abc import Generator

from corpusbuild.chunking import ChunkingParams
from corpusbuild.cleaning import clean_text, visible_or_empty
from corpusbuild.errors import InputError, InputProblem
from corpusbuild.events import Problem, ReaderEvent, ReaderInput, ReaderStats, Record
from corpusbuild.ids import BadId, text_id
from corpusbuild.inputs import DECOMPRESSION_ERRORS, decompressed
from medsnip.jsonl import loads_object
from medsnip.languages import is_cjk
from medsnip.snippet import document_key, snippet_lines

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.bz2")


def read_jsonl(source: ReaderInput) -> Generator[ReaderEvent, None, ReaderStats]:
    """Reader for one JSONL file; a bad line is reported with its line number and skipped."""
    language = source.params.get("language")  # Chinese, Japanese, Korean: full-width punctuation, CJK chunks
    params = ChunkingParams.from_dict(source.params).for_language(language)
    keep_width = is_cjk(language)
    name = source.params["source"]
    id_field, title_field, text_field = (source.params[field] for field in ("id_field", "title_field", "text_field"))
    own_fields = {id_field, title_field, text_field}
    stats = ReaderStats(Counter(documents_read=0, snippets=0, bad_records=0))
    if language:
        stats.facts.update({"language": language, "separators": params.resolved_separators()})
    counts = stats.counts

    def bad(line_number: int, message: str) -> Problem:
        counts["bad_records"] += 1
        return Problem(InputProblem(source.path, message, line=line_number))

    lines_seen = 0
    try:
        for line_number, raw in enumerate(decompressed(source.stream, source.magic), 1):
            if line_number == 1 and raw.startswith(codecs.BOM_UTF8):  # written by some Windows tools
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            lines_seen += 1
            try:
                record = parse_record(raw)
                doc_id = text_id(record.get(id_field), f"id field {id_field!r}")
                title, text = text_field_of(record, title_field, "title"), text_field_of(record, text_field, "text")
            except (RecordError, BadId) as error:
                yield bad(line_number, str(error))
                continue
            if text is None:
                yield bad(line_number, f"missing text field {text_field!r}")
                continue
            counts["documents_read"] += 1
            title = visible_or_empty(clean_text(title or "", keep_width))
            text = visible_or_empty(clean_text(text, keep_width))
            if not title and not text:
                yield bad(line_number, f"empty text field {text_field!r} and no title: nothing to index")
                continue
            chunks = params.chunks(text) or [""]  # a title without text is a title-only snippet
            meta = {field: value for field, value in record.items() if field not in own_fields}
            counts["snippets"] += len(chunks)
            block = snippet_lines(name, doc_id, title, chunks, meta)
            yield Record(doc_id, document_key(doc_id), block, len(chunks), line_number)
    except DECOMPRESSION_ERRORS as error:
        raise InputError(InputProblem(source.path, f"truncated or corrupt compressed stream ({error})")) from error
    if lines_seen == 0:
        raise InputError(InputProblem(source.path, "empty file: no JSON lines"))
    return stats


class RecordError(ValueError):
    """One line that cannot become a document (the caller adds file and line)."""


# A whole number of 19+ digits outside a string's quotes may not fit 64 bits, which orjson would turn
# into a float (silently changing the value); such lines are parsed again exactly to find out.
_LONG_INTEGER = re.compile(rb"(?<![\w.])-?[0-9]{19,}(?![0-9.eE])")
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson reads and writes exactly


def parse_record(raw: bytes) -> dict:
    """One JSONL line as an object; RecordError when it is not JSON, not an object, or holds an
    integer that no 64-bit type holds (it could not be written back unchanged)."""
    try:
        record = loads_object(raw)
    except ValueError as error:
        raise RecordError(str(error)) from None
    if _LONG_INTEGER.search(raw):
        field = _field_beyond_64_bits(json.loads(raw))
        if field is not None:
            raise RecordError(f"field {field} holds an integer beyond 64 bits: write it as a JSON string")
    return record


def _field_beyond_64_bits(value, path: str = "") -> str | None:
    """The path ('meta.counts[2]') of the first integer outside 64 bits, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (path or "<record>") if not _INT_RANGE[0] <= value <= _INT_RANGE[1] else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _field_beyond_64_bits(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found is not None:
            return found.lstrip(".")
    return None


def text_field_of(record: dict, field: str, what: str) -> str | None:
    """A field that must hold text: a string, or None when absent or null; RecordError otherwise (a list
    title would otherwise be indexed as its Python repr)."""
    value = record.get(field)
    if value is None or isinstance(value, str):
        return value
    raise RecordError(f"{what} field {field!r} is a JSON {_json_type(value)}, not text")


def _json_type(value) -> str:
    return {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "value")
